-- Checkpoints (issue 32): the small resumable state a sync script saves with svc.saveCheckpoint, one per
-- (environment, integration, connection, sync, variant). A run that continues in a next execution starts
-- its script again from it; GET/DELETE /sync/checkpoint read and reset it; a full resync clears it.
-- No foreign key: the records' own rows name their connection the same way and go with it (eraseSync,
-- eraseConnection, the environment's holdings).
CREATE TABLE sync_checkpoints (
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  sync_name text NOT NULL,
  variant text NOT NULL DEFAULT 'base',
  checkpoint jsonb NOT NULL,
  -- 1 on the first save, +1 on each save after it.
  version integer NOT NULL DEFAULT 1,
  -- The run (execution) that saved it.
  run_id text NOT NULL,
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, integration_id, connection_id, sync_name, variant)
);
