-- The durable script runtime (issue 5): deployed script bundles, script logs, payloads kept out of
-- Temporal's history, and the ledger that makes record writes exactly-once per run step.

-- Deployed script bundles, addressed by the SHA-256 of their code: a run fetches its bundle by hash,
-- so a replay after a redeploy still sees the code it started with.
CREATE TABLE script_bundles (
  hash text PRIMARY KEY,
  code text NOT NULL,
  size_bytes integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);

-- svc.log lines, searchable by connection, script, run, level and text.
CREATE TABLE script_logs (
  id bigserial PRIMARY KEY,
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  -- 'sync' or 'action', and the sync or action name.
  script_kind text NOT NULL,
  script_name text NOT NULL,
  run_id text NOT NULL,
  level text NOT NULL,
  message text NOT NULL,
  -- When the script logged it (workflow time); created_at is when it was stored.
  logged_at timestamptz NOT NULL,
  -- Order of the line within its run, so a replayed flush cannot store a line twice.
  seq integer NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (run_id, seq)
);
CREATE INDEX script_logs_connection ON script_logs (environment_id, integration_id, connection_id, id DESC);
CREATE INDEX script_logs_script ON script_logs (environment_id, integration_id, script_name, id DESC);

-- Payloads above the external-storage threshold (large HTTP responses, large batches): Temporal's
-- history keeps only a claim (the hash), the bytes live here.
CREATE TABLE payload_blobs (
  hash text PRIMARY KEY,
  -- The payload's metadata, values base64.
  metadata jsonb NOT NULL,
  data bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payload_blobs_created ON payload_blobs (created_at);

-- One row per record-writing step of a run: a step re-executed after a crash (its result was not yet
-- recorded in the history) returns the stored summary instead of writing again.
CREATE TABLE script_run_steps (
  run_id text NOT NULL,
  step_id text NOT NULL,
  result jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (run_id, step_id)
);
