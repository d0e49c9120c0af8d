-- A run that continued past one execution (issue 32) lists them: the run id of each, oldest first.
-- NULL for a run of one execution (its own run_id).
ALTER TABLE sync_runs ADD COLUMN executions jsonb;
