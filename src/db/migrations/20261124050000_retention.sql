-- Retention (src/runtime/retention.ts): what the periodic purge finds by age, each by an index of its own.

-- svc.log lines, by when they were stored.
CREATE INDEX script_logs_created ON script_logs (created_at);

-- The delivery log of outbound webhooks.
CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);

-- The run history, by when each run ended (the latest run of each sync is always kept).
CREATE INDEX sync_runs_finished ON sync_runs (finished_at);

-- Claim-checked payloads are content-addressed: writing a payload that is already stored changes no
-- row, so created_at says when it was first written, not when a history last came to refer to it.
-- last_written_at is the latter (a trigger moves it on every write, whatever the code that writes),
-- and retention reasons from it: a history that refers to a blob was open when the blob was last
-- written. Rows stored before this migration count as written now.
ALTER TABLE payload_blobs ADD COLUMN last_written_at timestamptz NOT NULL DEFAULT now();
CREATE INDEX payload_blobs_last_written ON payload_blobs (last_written_at);

CREATE FUNCTION payload_blobs_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  -- The write that follows finds the row and does nothing (ON CONFLICT DO NOTHING), or inserts it.
  UPDATE payload_blobs SET last_written_at = now() WHERE hash = NEW.hash;
  RETURN NEW;
END
$$;

CREATE TRIGGER payload_blobs_written BEFORE INSERT ON payload_blobs
  FOR EACH ROW EXECUTE FUNCTION payload_blobs_written();
