/**
 * A migrated scratch database for a benchmark: on DATABASE_URL's server when it is set, else on an
 * ephemeral Postgres of the dev stack (no fsync, as for tests). The database is dropped (and the
 * server stopped, when this process started it) by `close()`.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { startPostgres } from '../../src/devstack/postgres.js';

export interface BenchDatabase {
  pool: Pool;
  url: string;
  /** `SELECT version()` of the server, to print beside the figures. */
  version: string;
  close(): Promise<void>;
}

export async function useBenchDatabase(options: { poolSize?: number } = {}): Promise<BenchDatabase> {
  // Only Postgres is needed: the Temporal half of the dev stack would just take CPU from the measurement.
  const server = await startPostgres({ ephemeral: true, database: 'bench_admin' });
  const name = `bench_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
  await adminQuery(server.adminUrl, `CREATE DATABASE ${name}`);
  const admin = new URL(server.adminUrl);
  admin.pathname = `/${name}`;
  const url = admin.toString();
  const pool = createPool({ url, max: options.poolSize ?? 4, applicationName: 'bench' });
  await migrate(pool);
  return {
    pool,
    url,
    version: server.version,
    close: async () => {
      await pool.end();
      await adminQuery(server.adminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
      await server.stop();
    },
  };
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
