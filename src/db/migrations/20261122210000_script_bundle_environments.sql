-- Which environments a script bundle was deployed to (issue 15). Bundles are content-addressed and
-- shared (the same code deployed to dev and prod is one row of script_bundles), but a run may load
-- only a bundle deployed to its own environment: the loadScript step checks this table.
CREATE TABLE script_bundle_environments (
  hash text NOT NULL REFERENCES script_bundles (hash) ON DELETE CASCADE,
  environment_id text NOT NULL,
  PRIMARY KEY (hash, environment_id)
);

INSERT INTO script_bundle_environments (hash, environment_id)
SELECT DISTINCT script ->> 'hash', d.environment_id
FROM deployments d, jsonb_array_elements(d.scripts) AS script
WHERE script ->> 'hash' IN (SELECT hash FROM script_bundles)
ON CONFLICT DO NOTHING;
