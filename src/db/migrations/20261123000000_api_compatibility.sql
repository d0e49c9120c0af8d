-- What the REST API keeps so that it answers in the de-facto shapes (docs/api.md "Compatibility").

-- Connection tags: string values under lower-case keys, at most 10 (POST /connections, PATCH
-- /connections/:id). The deprecated `end_user` of the de-facto API is kept as tags too
-- (end_user_id, end_user_email, end_user_display_name, organization_id, organization_display_name).
ALTER TABLE connections ADD COLUMN tags jsonb NOT NULL DEFAULT '{}';
CREATE INDEX connections_tags ON connections USING gin (tags jsonb_path_ops);

-- The integration's display name; null shows the provider's.
ALTER TABLE integrations ADD COLUMN display_name text;
