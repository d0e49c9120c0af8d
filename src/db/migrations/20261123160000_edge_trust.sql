-- Trust at the edges (issue 16; docs/connections.md "Connect sessions", docs/api.md "Inbound webhooks").

-- Per-environment opt-ins, both off: connect links that name the environment by its public key alone,
-- and inbound webhooks of integrations without a webhook secret.
ALTER TABLE environments
  ADD COLUMN allow_public_key_connect boolean NOT NULL DEFAULT false,
  ADD COLUMN allow_unsigned_webhooks boolean NOT NULL DEFAULT false;

-- Connect sessions: made by the application's backend (POST /connect/sessions), used once by the end
-- user's browser to start the connect flow of one connection. Only a hash of the token is kept.
CREATE TABLE connect_sessions (
  token_hash text PRIMARY KEY,
  environment_id text NOT NULL,
  integration_id text NOT NULL,
  connection_id text NOT NULL,
  -- Settings the session fixes; the end user may add the ones it leaves open.
  connection_config jsonb NOT NULL DEFAULT '{}',
  -- The connection's tags (with those derived from the end user the application named), set on the
  -- connection the session makes.
  tags jsonb NOT NULL DEFAULT '{}',
  -- Whether the session may re-authorise (replace the credentials of) an existing connection.
  allow_reconnect boolean NOT NULL DEFAULT false,
  expires_at timestamptz NOT NULL,
  used_at timestamptz,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (environment_id, integration_id) REFERENCES integrations (environment_id, id) ON DELETE CASCADE
);
CREATE INDEX connect_sessions_expiry ON connect_sessions (expires_at);

-- What a connect attempt may do when it completes: replace an existing connection only when its
-- session said so; the session's tags travel with it to the connection.
ALTER TABLE oauth_sessions
  ADD COLUMN allow_reconnect boolean NOT NULL DEFAULT false,
  ADD COLUMN tags jsonb;

-- Inbound webhook signatures carry a timestamp (HMAC over `<timestamp>.<body>`), refused outside the
-- tolerance; a signature already seen within it is a replay.
ALTER TABLE integration_webhook_settings
  ADD COLUMN timestamp_header text NOT NULL DEFAULT 'X-Signature-Timestamp',
  ADD COLUMN tolerance_seconds integer NOT NULL DEFAULT 300;
CREATE TABLE inbound_webhook_signatures (
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  -- SHA-256 (hex) of the presented signature.
  signature_hash text NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (environment_id, signature_hash)
);
CREATE INDEX inbound_webhook_signatures_expiry ON inbound_webhook_signatures (expires_at);
