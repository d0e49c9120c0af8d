/**
 * What the runtime benchmarks (bench/sync.ts, bench/action.ts) share: an ephemeral dev stack
 * (Temporal CLI dev server + Postgres, durability off as in tests), a migrated database, the runtime's
 * workers (main and action queue) with the runtime's activities and data converter in this process, a client, and a fake API on loopback.
 * The connection service is the plain one of the runtime tests (API key, base URL from the fake API).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { migrate } from '../src/db/migrate.js';
import { createPool, type Pool } from '../src/db/pool.js';
import { startStack } from '../src/devstack/index.js';
import type { ActionDefinition } from '../src/runtime/definitions.js';
import { outboundPolicy } from '../src/runtime/outbound.js';
import { createDataConverter } from '../src/runtime/payloadStorage.js';
import { createPostgresScriptStore, type ScriptStore } from '../src/runtime/scriptStore.js';
import { createRuntimeWorkers } from '../src/temporal/worker.js';
import { runtimeDeps, TestConnections } from '../test/runtime/testConnections.js';

export interface RuntimeBench {
  pool: Pool;
  client: Client;
  taskQueue: string;
  scripts: ScriptStore;
  apiUrl: string;
  versions: string;
  close(): Promise<void>;
}

export async function startRuntimeBench(options: {
  api: (request: IncomingMessage, response: ServerResponse) => void;
  extraActivities?: Record<string, (...args: never[]) => Promise<unknown>>;
}): Promise<RuntimeBench> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const stack = await startStack({ ephemeral: true, database: 'bench_runtime' });
  const pool = createPool({ url: stack.postgres.url, max: 10, applicationName: 'bench-runtime' });
  await migrate(pool);
  const server = createServer(options.api);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The fake API only: the outbound request policy keeps refusing every other local address.
  outboundPolicy().allow(new URL(apiUrl).host);

  const clientConnection = await Connection.connect({ address: stack.temporal.address });
  const client = new Client({
    connection: clientConnection,
    namespace: stack.temporal.namespace,
    dataConverter: createDataConverter({ db: pool }),
  });
  const workerConnection = await NativeConnection.connect({ address: stack.temporal.address });
  const taskQueue = 'bench-runtime';
  // Both queues, as the service's worker process serves them: action runs go to the action queue.
  const workers = await createRuntimeWorkers({
    connection: workerConnection,
    namespace: stack.temporal.namespace,
    taskQueue,
    activities: {
      ...createActivities({
        db: pool,
        runtime: runtimeDeps(
          pool,
          new TestConnections({ baseUrl: apiUrl }),
          new Map<string, ActionDefinition>(),
          client,
        ),
      }),
      ...options.extraActivities,
    },
    dataConverter: createDataConverter({ db: pool }),
  });
  const running = workers.run();
  return {
    pool,
    client,
    taskQueue,
    scripts: createPostgresScriptStore({ db: pool }),
    apiUrl,
    versions: `${stack.temporal.version}; ${stack.postgres.version}`,
    async close() {
      workers.shutdown();
      await running;
      await workerConnection.close();
      await clientConnection.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.end();
      await stack.stop();
    },
  };
}

/** A script bundle in the compiled format from the source of its default-exported function. */
export function bundle(functionSource: string): string {
  return `"use strict";\nmodule.exports.default = ${functionSource};\n`;
}
