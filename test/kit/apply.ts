/**
 * What the deploy apply tests share (applyCrash.test.ts, applyReplay.test.ts): an environment with
 * connections of one integration, deployments over it whose apply runs on the action queue of a worker
 * child process the test starts (test/kit/processWorker.ts, WORKER_DEPLOY=1), and the deploy request.
 */
import { createConnections } from '../../src/connections/index.js';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import { createDeployments, type DeployRequest } from '../../src/deploy/deployments.js';
import { createPostgresDeploymentStore } from '../../src/deploy/store.js';
import { mapLimit } from '../../src/mapLimit.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { syncWorkflowId } from '../../src/temporal/connection.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { uniqueName } from './stack.js';
import { useDatabase } from './db.js';
import { useRuntimeClient } from './runtime.js';
import { startWorkerProcess } from './processWorker.js';
import { apiKeyProvider } from './upstream.js';
import { runtimeDeps, TestConnections } from './testConnections.js';
import { bundle } from './scripts.js';

export const INTEGRATION = 'crm';
export const SYNC = 'people';
// Nothing is fetched (the syncs are created paused); the worker's outbound policy needs an address.
export const UNUSED_API = 'http://127.0.0.1:9';

export const request = (runs: string): DeployRequest => ({
  yaml: `
integrations:
  ${INTEGRATION}:
    syncs:
      ${SYNC}:
        description: People
        output: Person
        endpoint: GET /people
        sync_type: full
        runs: ${runs}
        auto_start: false
models:
  Person:
    id: string
`,
  scripts: [
    {
      integration: INTEGRATION,
      kind: 'sync',
      name: SYNC,
      code: bundle(`async function (svc) { await svc.batchSave([], 'Person'); }`),
    },
  ],
});

/** How each entity was configured, from its history: started (by whom) and `reconfigure` signals. */
/** An environment with `count` connections of one integration, and deployments over it. */
export async function deployEnvironment(count: number, applyTimeoutMs: number) {
  const { pool, url } = await useDatabase();
  const client = await useRuntimeClient(pool);
  const taskQueue = uniqueName('tq');
  // The worker child's encryptor and records store (test/kit/testConnections.ts).
  const shared = runtimeDeps(pool, new TestConnections(), new Map(), client);
  const connections = createConnections({
    db: pool,
    encryptor: shared.encryptor,
    callbackUrl: 'http://127.0.0.1/oauth/callback',
    catalog: loadProviderCatalog({
      extra: {
        'fake-crm': apiKeyProvider(UNUSED_API, 'Fake CRM'),
      },
    }),
  });
  const { environment } = await connections.environments.create({ name: 'deploy-crash' });
  const env = environment.id;
  await connections.integrations.upsert(env, { id: INTEGRATION, provider: 'fake-crm' });
  const connectionIds = Array.from({ length: count }, (_, i) => `c${String(i).padStart(4, '0')}`);
  await mapLimit(connectionIds, 8, (connectionId) =>
    connections.service.importConnection({
      environmentId: env,
      integrationId: INTEGRATION,
      connectionId,
      credentials: { type: 'API_KEY', apiKey: `key-${connectionId}` },
    }),
  );
  const store = createPostgresDeploymentStore({ db: pool });
  const deploymentsDeps = {
    store,
    scripts: createPostgresScriptStore({ db: pool }),
    records: shared.records,
    temporal: client,
    applyTaskQueue: actionTaskQueue(taskQueue),
    connectionIds: async (environmentId: string, integrationId: string) =>
      (await connections.service.listConnections(environmentId, { integrationId })).map((c) => c.connection_id),
  };
  const deployments = createDeployments({ ...deploymentsDeps, applyTimeoutMs });
  const entityIds = connectionIds.map((connectionId) =>
    syncWorkflowId({ environmentId: env, integrationId: INTEGRATION, connectionId, syncName: SYNC }),
  );
  const waitingAtMost = (ms: number) => createDeployments({ ...deploymentsDeps, applyTimeoutMs: ms });
  /** A worker child process serving the apply (and the entities) on this environment's queues. */
  const startWorker = () =>
    startWorkerProcess({ databaseUrl: url, taskQueue, apiBaseUrl: UNUSED_API, env: { WORKER_DEPLOY: '1' } });
  /** Stops every entity the deploys started (the test's cleanup). */
  const terminateEntities = () =>
    mapLimit(entityIds, 8, (id) =>
      client.workflow
        .getHandle(id)
        .terminate('test over')
        .catch(() => undefined),
    );
  return { client, env, store, deployments, waitingAtMost, entityIds, startWorker, terminateEntities };
}
