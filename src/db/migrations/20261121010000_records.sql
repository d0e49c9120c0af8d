-- The records cache (src/records/postgresRecordStore.ts, docs/records.md).

-- Modification positions. Every change of a record takes the next value while its scope's row lock is
-- held, so within one scope the order of positions is the order of commits, which is what lets a
-- reader page by position without ever skipping a record. CACHE 1 (the default) is required: with a
-- larger cache each session hands out its own range and positions stop following commit order.
CREATE SEQUENCE record_positions AS bigint CACHE 1;

-- One row per (environment, integration, connection, model): the unit that is written, locked and
-- read. Writers of a scope lock its row (SELECT … FOR UPDATE) for the length of their transaction.
CREATE TABLE record_scopes (
  scope_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  model text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (environment_id, integration_id, connection_id, model)
);

-- No foreign key to record_scopes: the check would cost an index probe and a row lock per inserted
-- record, and the store itself is the only writer of both tables.
CREATE TABLE records (
  scope_id bigint NOT NULL,
  -- The record's `id` as text: the number 1 and the string "1" are the same record.
  id text NOT NULL,
  -- The sync that last wrote the record; a sync's records are erased by it.
  sync_name text NOT NULL,
  -- json, not jsonb: the store never queries inside a record, and json is stored and returned as
  -- the text it was given (the canonical JSON), which is cheaper both ways and allows U+0000.
  data json NOT NULL,
  -- md5 of the record's canonical JSON (keys sorted): an identical save changes nothing.
  data_hash uuid NOT NULL,
  first_seen_at timestamptz NOT NULL,
  last_modified_at timestamptz NOT NULL,
  last_action text NOT NULL CHECK (last_action IN ('ADDED', 'UPDATED', 'DELETED')),
  deleted_at timestamptz,
  -- The run that last saved the record, for track_deletes (markUnseenDeleted).
  last_run_id text NOT NULL,
  position bigint NOT NULL DEFAULT nextval('record_positions'),
  PRIMARY KEY (scope_id, id)
);

-- Pages are read in position order within one scope.
CREATE UNIQUE INDEX records_scope_position ON records (scope_id, position);

-- The run that currently owns each (environment, integration, connection, sync): a fencing token.
-- beginRun() replaces it; writes of any other run are then refused (run_superseded).
CREATE TABLE record_sync_runs (
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  sync_name text NOT NULL,
  run_id text NOT NULL,
  started_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, integration_id, connection_id, sync_name)
);
