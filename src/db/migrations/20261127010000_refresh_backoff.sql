-- The background token refresher's claim and back-off (src/connections/tokenRefresher.ts, issue 29): a
-- round claims a connection by moving refresh_retry_at past now, by a delay that doubles with each
-- attempt that did not renew the token (a token URL that never answers is tried again later, not
-- every round); a renewed token clears both. Other worker processes skip a claimed connection.
ALTER TABLE connections ADD COLUMN refresh_attempts integer NOT NULL DEFAULT 0;
ALTER TABLE connections ADD COLUMN refresh_retry_at timestamptz;
