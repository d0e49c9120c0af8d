-- The runs an environment has going at once, bounded per environment (src/runtime/runSlots.ts, issue
-- 29): an action takes a slot when the API starts it, a sync run when it begins (its first step), and
-- gives it back when it ends. A slot whose holder vanished (a process killed) lapses at expires_at.
CREATE TABLE run_slots (
  run_id text PRIMARY KEY,
  environment_id text NOT NULL,
  kind text NOT NULL CHECK (kind IN ('action', 'sync')),
  expires_at timestamptz NOT NULL
);
CREATE INDEX run_slots_environment ON run_slots (environment_id, kind);
