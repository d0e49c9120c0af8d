-- The history of sync runs (src/runtime/runHistory.ts): one row per finished execution, written by the
-- sync entity workflow before it continues as new. The dashboard charts it; GET /sync/runs reads it.
CREATE TABLE sync_runs (
  -- The run workflow's id: idempotent under a replayed write.
  run_id text PRIMARY KEY,
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  sync_name text NOT NULL,
  mode text NOT NULL,
  status text NOT NULL CHECK (status IN ('success', 'failed')),
  started_at timestamptz NOT NULL,
  finished_at timestamptz NOT NULL,
  -- Per model: { added, updated, deleted, unchanged }.
  models jsonb NOT NULL DEFAULT '{}',
  error_code text,
  error_message text
);
CREATE INDEX sync_runs_recent ON sync_runs (environment_id, integration_id, connection_id, sync_name, finished_at DESC);
