import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { inTransaction, type Pool } from './pool.js';

/** Folder of the timestamped SQL migrations (`YYYYMMDDHHMMSS_name.sql`), applied in name order. */
export const MIGRATIONS_DIR = join(dirname(fileURLToPath(import.meta.url)), 'migrations');

// Any fixed number works; it only has to be the same for every process of the service.
const MIGRATION_LOCK = 7_411_100;

export interface Migration {
  name: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d{14}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({ name: file.replace(/\.sql$/, ''), sql: readFileSync(join(dir, file), 'utf8') }));
}

/**
 * Applies every migration not yet applied, all in one transaction: when one fails, the error names it
 * and every migration of this call is rolled back, so the schema is never left between two of them.
 * A transaction-scoped advisory lock serialises processes that start at once (several workers and API
 * servers), so each migration runs exactly once. Returns the names applied by this call.
 */
export async function migrate(pool: Pool, migrations = loadMigrations()): Promise<string[]> {
  const applied: string[] = [];
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    await client.query(
      'CREATE TABLE IF NOT EXISTS service_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())',
    );
    const done = new Set(
      (await client.query<{ name: string }>('SELECT name FROM service_migrations')).rows.map((row) => row.name),
    );
    for (const migration of migrations) {
      if (done.has(migration.name)) continue;
      try {
        await client.query(migration.sql);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        throw new Error(`migration ${migration.name} failed: ${reason}`, { cause: error });
      }
      await client.query('INSERT INTO service_migrations (name) VALUES ($1)', [migration.name]);
      applied.push(migration.name);
    }
  });
  return applied;
}
