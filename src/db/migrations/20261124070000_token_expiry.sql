-- When a connection's access token expires, kept beside the encrypted credentials so that the
-- background refresher (src/connections/tokenRefresher.ts) finds the tokens about to expire without
-- decrypting every row. Set only for credentials the service can renew by itself: OAuth 2 with a
-- refresh token, and the minted kinds (OAUTH2_CC, JWT, APP); a minted connection without a token yet
-- is due at once. NULL for the rest, and for OAuth 2 rows stored before this column until their next
-- refresh.
ALTER TABLE connections ADD COLUMN credentials_expires_at timestamptz;

CREATE INDEX connections_credentials_expires_at ON connections (credentials_expires_at)
  WHERE credentials_expires_at IS NOT NULL AND refresh_error_permanent = false;
