-- Inbound webhooks queued for sync entities (docs/api.md "Inbound webhooks", issue 29). A webhook's
-- body is stored once however many syncs it goes to; each sync's entry refers to it, and the sync's
-- entity workflow keeps only the entry's id: a body above a few KiB is never in a workflow's memory or
-- history. The bytes queued per sync and per environment are bounded (src/webhooks/inboundQueue.ts).
CREATE TABLE inbound_webhook_bodies (
  id uuid PRIMARY KEY,
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  bytes integer NOT NULL CHECK (bytes >= 0),
  -- The payload as JSON, encrypted (purpose inbound_webhook); null when it travels in the signal itself.
  body text,
  received_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inbound_webhook_bodies_environment ON inbound_webhook_bodies (environment_id);
CREATE INDEX inbound_webhook_bodies_received ON inbound_webhook_bodies (received_at);

CREATE TABLE inbound_webhook_queue (
  id uuid PRIMARY KEY,
  body_id uuid NOT NULL REFERENCES inbound_webhook_bodies (id) ON DELETE CASCADE,
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  sync_name text NOT NULL,
  bytes integer NOT NULL CHECK (bytes >= 0)
);
CREATE INDEX inbound_webhook_queue_sync ON inbound_webhook_queue (environment_id, integration_id, connection_id, sync_name);
CREATE INDEX inbound_webhook_queue_body ON inbound_webhook_queue (body_id);

-- The bytes of bodies each environment holds, kept by the same statements that add and remove bodies:
-- the bound is checked without summing the queue, and the row's lock orders an environment's enqueues.
CREATE TABLE inbound_webhook_usage (
  environment_id text PRIMARY KEY REFERENCES environments (id) ON DELETE CASCADE,
  bytes bigint NOT NULL DEFAULT 0 CHECK (bytes >= 0)
);
