-- Erasing by detaching (docs/records.md "Erase"): a scope whose records all belong to the erased sync
-- (or connection) loses its record_scopes row in one short transaction, which makes its records
-- unreachable at once, and is queued here; its records are then deleted in small chunks, outside any
-- lock on live data, by purgeErasedRecords().

-- Which syncs have written into each scope: a scope written by one sync only can be detached whole.
CREATE TABLE record_scope_syncs (
  scope_id bigint NOT NULL,
  sync_name text NOT NULL,
  PRIMARY KEY (scope_id, sync_name)
);

INSERT INTO record_scope_syncs (scope_id, sync_name) SELECT DISTINCT scope_id, sync_name FROM records;

CREATE TABLE record_scopes_detached (
  scope_id bigint PRIMARY KEY,
  detached_at timestamptz NOT NULL DEFAULT now()
);
