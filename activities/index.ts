import type { Pool } from '../src/db/pool.js';

export interface ActivityDeps {
  db: Pool;
}

export interface HealthCheckRow {
  id: string;
  token: string;
  checkedAt: string;
}

/**
 * The activity map of the worker. Dependencies come in, so tests build the same map over their own
 * database (samples-typescript `activities-dependency-injection`).
 */
export function createActivities({ db }: ActivityDeps) {
  return {
    /** Writes a row and reads it back: the worker's proof that Postgres is there. */
    async recordHealthCheck(token: string): Promise<HealthCheckRow> {
      const inserted = await db.query<{ id: string }>('INSERT INTO health_checks (token) VALUES ($1) RETURNING id', [
        token,
      ]);
      const id = inserted.rows[0]?.id;
      const read = await db.query<{ id: string; token: string; checked_at: Date }>(
        'SELECT id, token, checked_at FROM health_checks WHERE id = $1',
        [id],
      );
      const row = read.rows[0];
      if (!row) throw new Error(`health check row ${String(id)} vanished between insert and read`);
      return { id: row.id, token: row.token, checkedAt: row.checked_at.toISOString() };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
