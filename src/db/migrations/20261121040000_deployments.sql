-- Deployments (src/deploy): every `service deploy` is a version of an environment's configuration.
-- A version is never changed after it is written; deploying an old version again writes a new
-- version with the old content, so the history reads as what happened.
CREATE TABLE deployments (
  environment_id text NOT NULL REFERENCES environments (id) ON DELETE CASCADE,
  version integer NOT NULL,
  -- The normalized service.yaml (src/config/types.ts ServiceConfig) and its source text.
  config jsonb NOT NULL,
  yaml text NOT NULL,
  -- [{ integration, kind, name, hash, source_path, source }]: hash keys script_bundles; source is the
  -- TypeScript the bundle was built from, shown by the dashboard's Script tab.
  scripts jsonb NOT NULL,
  -- The changes relative to the version before (src/deploy/diff.ts DeployChange[]).
  changes jsonb NOT NULL,
  -- applying: the new state is recorded and workflows are being brought in line; active: done;
  -- superseded: a later version became active. A version left 'applying' by a crash is finished by
  -- the next deploy of the environment (every step is idempotent).
  status text NOT NULL CHECK (status IN ('applying', 'active', 'superseded')),
  -- Which version this one re-deployed, if it was a rollback.
  redeploy_of integer,
  created_at timestamptz NOT NULL DEFAULT now(),
  activated_at timestamptz,
  PRIMARY KEY (environment_id, version)
);
CREATE UNIQUE INDEX deployments_one_current ON deployments (environment_id) WHERE status IN ('applying', 'active');
