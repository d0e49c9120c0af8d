-- Webhooks of the REST API (src/api/webhooks, docs/api.md "Webhooks").

-- How inbound webhooks of an integration are read (POST /webhook/:environment/:integration): where the
-- webhook type and the connection are found in the request, and the HMAC secret that signs them.
CREATE TABLE integration_webhook_settings (
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  -- Encrypted (src/connections/encryption.ts); when set, unsigned or badly signed webhooks are refused.
  secret_encrypted text,
  signature_header text NOT NULL DEFAULT 'X-Signature-256',
  -- The type comes from this header when set, else from the dotted path of the JSON body.
  type_header text,
  type_path text NOT NULL DEFAULT 'type',
  -- Dotted path of the body whose value identifies the connection, and what it is compared with:
  -- 'connection_id', 'metadata.<key>' or 'connection_config.<key>'. A `connection_id` query
  -- parameter wins over both.
  connection_path text,
  connection_field text NOT NULL DEFAULT 'connection_id',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, integration_id),
  FOREIGN KEY (environment_id, integration_id) REFERENCES integrations (environment_id, id) ON DELETE CASCADE
);

-- Where the application receives the service's webhooks (sync run ended), and the HMAC-SHA256 secret
-- they are signed with (X-Service-Hmac-Sha256).
CREATE TABLE outbound_webhook_settings (
  environment_id text PRIMARY KEY REFERENCES environments (id) ON DELETE CASCADE,
  url text,
  secret_encrypted text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

-- Every outbound webhook and what became of it; GET /webhook-deliveries reads it.
CREATE TABLE webhook_deliveries (
  id bigserial PRIMARY KEY,
  -- Business key of the delivery (the delivering workflow's id and the model): a replayed activity
  -- finds its row instead of creating a second one.
  delivery_key text NOT NULL UNIQUE,
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  event_type text NOT NULL,
  integration_id text,
  connection_id text,
  sync_name text,
  model text,
  url text NOT NULL,
  payload jsonb NOT NULL,
  status text NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
  attempts integer NOT NULL DEFAULT 0,
  last_status_code integer,
  last_error text,
  created_at timestamptz NOT NULL DEFAULT now(),
  last_attempt_at timestamptz,
  delivered_at timestamptz
);
CREATE INDEX webhook_deliveries_environment ON webhook_deliveries (environment_id, id DESC);
