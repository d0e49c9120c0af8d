-- The step ledger (issue 17, src/runtime/stepLedger.ts): the outcome of each completed step of an
-- open run, keyed by Temporal's run id and the step's index in the run (the same on every replay).
-- Requests keep their outcome (the response, or a final failure) encrypted with the service key
-- (purpose step_outcome); record writes keep their summary, written in the same transaction as the
-- records. Rows go once Temporal holds the steps' results (the run tells, src/runtime/stepLedger.ts);
-- what a run leaves at its end is purged after a day. It replaces script_run_steps.
CREATE TABLE script_steps (
  run_id text NOT NULL,
  step integer NOT NULL,
  result jsonb,
  outcome text,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, step)
);
CREATE INDEX script_steps_created ON script_steps (created_at);
DROP TABLE script_run_steps;
