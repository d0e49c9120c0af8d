-- Per-connection sync frequency (issue 23): overrides the `runs` of service.yaml for one sync of one
-- connection. Goes with its connection (the foreign key cascades); survives redeploys, which hand
-- every sync entity its definition with the override applied (src/temporal/syncControl.ts).
CREATE TABLE connection_sync_frequencies (
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  sync_name text NOT NULL,
  -- As the caller wrote it ("30m", "every 2 hours"), and in milliseconds (at least 30 s, like `runs`).
  frequency text NOT NULL,
  frequency_ms bigint NOT NULL CHECK (frequency_ms >= 30000),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, integration_id, connection_id, sync_name),
  FOREIGN KEY (environment_id, integration_id, connection_id)
    REFERENCES connections (environment_id, provider_config_key, connection_id) ON DELETE CASCADE
);
