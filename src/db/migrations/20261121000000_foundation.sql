-- Round trips of the health check workflow: proves that worker, Temporal and Postgres work together.
CREATE TABLE health_checks (
  id bigserial PRIMARY KEY,
  token text NOT NULL,
  checked_at timestamptz NOT NULL DEFAULT now()
);
