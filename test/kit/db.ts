/**
 * A database per test file: cloned from the migrated template the test run made (test/globalSetup.ts),
 * dropped by its owner (a kit fixture, or the file's end through useDatabase).
 */
import pg from 'pg';
import { createPool, type Pool } from '../../src/db/pool.js';
import { assertPostgresReachable } from '../../src/devstack/postgres.js';
import { deferCleanup } from './cleanup.js';
import { stack, uniqueName } from './stack.js';

/** A database of its own, cloned from the migrated template; `drop` ends its pool and drops it. */
export interface TestDatabase {
  pool: Pool;
  url: string;
  name: string;
  drop: () => Promise<void>;
}

/**
 * A database cloned from the migrated template, for a fixture that drops it itself (test/kit).
 * Fails with a message naming Postgres when the harness's server is gone, instead of hanging.
 */
export async function createDatabase(): Promise<TestDatabase> {
  const { postgresAdminUrl, templateDatabase } = stack();
  await assertPostgresReachable(postgresAdminUrl, 3000).catch((error: unknown) => {
    throw new Error(`the test harness's Postgres is gone: ${(error as Error).message}`);
  });
  const name = uniqueName('test');
  await adminQuery(postgresAdminUrl, `CREATE DATABASE ${name} TEMPLATE ${templateDatabase}`);
  const url = postgresAdminUrl.replace(/\/postgres$/, `/${name}`);
  const pool = createPool({ url, max: 10, applicationName: name });
  let dropped: Promise<void> | undefined;
  const drop = (): Promise<void> =>
    (dropped ??= (async () => {
      await pool.end();
      await adminQuery(postgresAdminUrl, `DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    })());
  return { pool, url, name, drop };
}

/** A database of this test file's own (createDatabase), dropped after the file. */
export async function useDatabase(): Promise<TestDatabase> {
  const database = await createDatabase();
  deferCleanup(database.drop);
  return database;
}

async function adminQuery(url: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  client.on('error', () => undefined); // the query fails on its own; the event must not end the process
  await client.connect();
  try {
    // CREATE DATABASE … TEMPLATE fails when another session is connected to the template; retry briefly.
    for (let attempt = 0; ; attempt++) {
      try {
        await client.query(sql);
        return;
      } catch (error) {
        if (attempt >= 20 || !/being accessed by other users/.test((error as Error).message)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }
  } finally {
    await client.end();
  }
}
