/**
 * The servers of the test run (test/globalSetup.ts starts them) and the one way the kit connects to
 * Temporal: a client (createTemporalClient: the runtime harness's, the chaos stack's, useTemporalClient)
 * and a worker's connection (connectTestWorker: useWorker's, the runtime harness's).
 */
import { randomUUID } from 'node:crypto';
import { inject } from 'vitest';
import { Client, type DataConverter } from '@temporalio/client';
import { Worker, type NativeConnection } from '@temporalio/worker';
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

/**
 * A Temporal client (on the test run's server unless `address` and `namespace` say another), with
 * `dataConverter` when given; `close` closes its connection.
 */
export async function createTemporalClient(
  options: { address?: string; namespace?: string; dataConverter?: DataConverter; timeoutMs?: number } = {},
): Promise<{ client: Client; close: () => Promise<void> }> {
  const address = options.address ?? stack().temporalAddress;
  const namespace = options.namespace ?? stack().temporalNamespace;
  const connection = await connectTemporal({ address }, options.timeoutMs ?? 3000);
  const client = new Client({
    connection,
    namespace,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
  });
  return { client, close: () => connection.close() };
}

/** A Temporal client on the harness's server, closed when the file ends; fails naming Temporal when it is gone. */
export async function useTemporalClient(): Promise<Client> {
  const { temporalAddress, temporalNamespace } = stack();
  await assertTemporalReachable(temporalAddress, temporalNamespace, 3000).catch((error: unknown) => {
    throw new Error(`the test harness's Temporal server is gone: ${(error as Error).message}`);
  });
  const { client, close } = await createTemporalClient();
  deferCleanup(close);
  return client;
}

/** A worker's connection to the test run's server, with its namespace and the prebuilt workflow bundle. */
export async function connectTestWorker(): Promise<{
  connection: NativeConnection;
  namespace: string;
  workflowBundle: { codePath: string };
}> {
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  const connection = await connectWorker({ address: temporalAddress });
  return { connection, namespace: temporalNamespace, workflowBundle: { codePath: workflowBundlePath } };
}

/**
 * A worker on a task queue of this test file's own, running the prebuilt workflow bundle with the
 * activities given; shut down after the file.
 */
export async function useWorker(
  activities: object,
  options: { taskQueue?: string } = {},
): Promise<{ taskQueue: string; worker: Worker }> {
  const taskQueue = options.taskQueue ?? uniqueName('tq');
  const { connection, namespace, workflowBundle } = await connectTestWorker();
  deferCleanup(() => connection.close());
  const worker = await Worker.create({ connection, namespace, taskQueue, activities, workflowBundle });
  const running = worker.run();
  deferCleanup(async () => {
    if (worker.getState() === 'RUNNING') worker.shutdown();
    await running;
  });
  return { taskQueue, worker };
}
