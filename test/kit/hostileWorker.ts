/**
 * The service's workers serving a replaced workflow bundle (an attacker's, test/runtime/fixtures/), over
 * the real stores and the deploy activities, so that every refusal the attack tests see is the service's
 * own (the run authority's or the command policy's), not a missing activity's.
 */
import type { Pool } from '../../src/db/pool.js';
import { createPostgresDeploymentStore } from '../../src/deploy/store.js';
import type { RecordStore } from '../../src/records/types.js';
import type { ActionDefinition } from '../../src/runtime/definitions.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { createServiceWorkers } from '../../src/service.js';
import { connectWorker } from '../../src/temporal/connection.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { bundleWorkflows } from '../../src/temporal/worker.js';
import type { Client } from '@temporalio/client';
import { deferCleanup } from './cleanup.js';
import { stack, uniqueName } from './stack.js';
import { runtimeDeps, type TestConnections } from './testConnections.js';

/** Starts the workers on a task queue of their own (returned); they stop when the test ends. */
export async function startHostileWorkers(options: {
  workflowsPath: string;
  pool: Pool;
  client: Client;
  connections: TestConnections;
  actions: Map<string, ActionDefinition>;
  records: RecordStore;
  /** The connections a deploy's apply finds (its `connectionIds`). */
  connectionIds: string[];
  queuePrefix: string;
}): Promise<string> {
  const { pool, client } = options;
  const workflowBundle = await bundleWorkflows(options.workflowsPath);
  const { temporalAddress, temporalNamespace } = stack();
  const connection = await connectWorker({ address: temporalAddress });
  const taskQueue = uniqueName(options.queuePrefix);
  const workers = await createServiceWorkers({
    db: pool,
    runtime: {
      ...runtimeDeps(pool, options.connections, options.actions, client),
      deploy: {
        deployments: createPostgresDeploymentStore({ db: pool }),
        records: options.records,
        syncs: createSyncControl({ client, taskQueue }),
        connectionIds: () => Promise.resolve(options.connectionIds),
      },
    },
    connection,
    namespace: temporalNamespace,
    taskQueue,
    workflowBundle,
    dataConverter: createDataConverter({ db: pool }),
  });
  const running = workers.run();
  deferCleanup(async () => {
    workers.shutdown();
    await running;
    await connection.close();
  });
  return taskQueue;
}
