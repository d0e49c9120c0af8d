import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import pg from 'pg';
import { createPool, type Pool } from '../../src/db/pool.js';
import { assertPostgresReachable } from '../../src/devstack/postgres.js';
import { assertTemporalReachable } from '../../src/devstack/temporal.js';
import { createLogger } from '../../src/log.js';
import { installServiceRuntime } from '../../src/temporal/logger.js';
import { connectTemporal, connectWorker } from '../../src/temporal/connection.js';
import { deferCleanup } from './cleanup.js';

// Worker state changes at INFO drown the test output; warnings and errors still show.
installServiceRuntime({ logger: createLogger({ level: 'warn', destination: 'stderr' }) });

/** The servers the test run started (test/globalSetup.ts). */
export function stack() {
  return inject('stack');
}

/** A short unique suffix for names that must not collide between test files run in parallel. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomUUID().replace(/-/g, '').slice(0, 12)}`;
}

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

/** A Temporal client on the harness's server; fails naming Temporal when it is gone. */
export async function useTemporalClient(): Promise<Client> {
  const { temporalAddress, temporalNamespace } = stack();
  await assertTemporalReachable(temporalAddress, temporalNamespace, 3000).catch((error: unknown) => {
    throw new Error(`the test harness's Temporal server is gone: ${(error as Error).message}`);
  });
  const connection = await connectTemporal({ address: temporalAddress }, 3000);
  deferCleanup(() => connection.close());
  return new Client({ connection, namespace: temporalNamespace });
}

/**
 * A worker on a task queue of this test file's own, running the prebuilt workflow bundle with the
 * activities given; shut down after the file.
 */
export async function useWorker(
  activities: object,
  options: { taskQueue?: string } = {},
): Promise<{ taskQueue: string; worker: Worker }> {
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  const taskQueue = options.taskQueue ?? uniqueName('tq');
  const connection = await connectWorker({ address: temporalAddress });
  const worker = await Worker.create({
    connection,
    namespace: temporalNamespace,
    taskQueue,
    activities,
    workflowBundle: { codePath: workflowBundlePath },
  });
  const running = worker.run();
  deferCleanup(async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
    await connection.close();
  });
  return { taskQueue, worker };
}
