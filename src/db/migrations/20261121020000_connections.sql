-- Connections and credentials (src/connections). Every secret column holds ciphertext made by
-- src/connections/encryption.ts (AES-256-GCM, `v1.<key id>.<iv>.<tag>.<data>`); the environment's
-- secret key is kept only as a SHA-256 hash.

CREATE TABLE environments (
  id text PRIMARY KEY,
  name text NOT NULL UNIQUE,
  -- SHA-256 (hex) of the secret key that authenticates API calls; the key itself is shown once.
  secret_key_hash text NOT NULL UNIQUE,
  -- Identifies the environment to end users' browsers in the connect flow; not a secret.
  public_key text NOT NULL UNIQUE,
  account_id integer NOT NULL DEFAULT 0,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE environment_variables (
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  name text NOT NULL,
  value_encrypted text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, name)
);

CREATE TABLE integrations (
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  -- The integration id of service.yaml, a.k.a. provider_config_key.
  id text NOT NULL,
  -- Name of the provider in the catalog (src/connections/providers).
  provider text NOT NULL,
  oauth_client_id text,
  oauth_client_secret_encrypted text,
  oauth_scopes text[] NOT NULL DEFAULT '{}',
  -- Per-integration overrides of the catalog entry (base URL of a self-hosted instance, say).
  provider_settings jsonb NOT NULL DEFAULT '{}',
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (environment_id, id)
);

CREATE TABLE connections (
  -- The integer id of SPEC.md's connection record.
  id integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  environment_id text NOT NULL,
  provider_config_key text NOT NULL,
  connection_id text NOT NULL,
  credentials_encrypted text NOT NULL,
  connection_config jsonb NOT NULL DEFAULT '{}',
  metadata jsonb NOT NULL DEFAULT '{}',
  -- When the access token was last obtained or refreshed; lets a forced refresh that waited on another
  -- caller's refresh reuse it instead of refreshing twice.
  credentials_refreshed_at timestamptz,
  -- The last failed refresh, shown by status and the API; cleared by a successful refresh or reconnect.
  refresh_error_code text,
  refresh_error_message text,
  refresh_error_at timestamptz,
  -- True when retrying cannot help (invalid_grant, say): the user must reconnect.
  refresh_error_permanent boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (environment_id, provider_config_key, connection_id),
  FOREIGN KEY (environment_id, provider_config_key) REFERENCES integrations (environment_id, id) ON DELETE RESTRICT
);

-- Pending OAuth authorizations: one row per connect attempt, consumed (deleted) by its callback.
CREATE TABLE oauth_sessions (
  -- SHA-256 (hex) of the `state` sent to the provider; the state itself is never stored.
  state_hash text PRIMARY KEY,
  environment_id text NOT NULL,
  provider_config_key text NOT NULL,
  connection_id text NOT NULL,
  connection_config jsonb NOT NULL DEFAULT '{}',
  -- PKCE code verifier (OAuth 2) or the temporary token secret (OAuth 1), encrypted.
  secret_encrypted text,
  redirect_uri text NOT NULL,
  expires_at timestamptz NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  FOREIGN KEY (environment_id, provider_config_key) REFERENCES integrations (environment_id, id) ON DELETE CASCADE
);
CREATE INDEX oauth_sessions_expires_at ON oauth_sessions (expires_at);
