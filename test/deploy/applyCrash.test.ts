/**
 * A deploy's apply survives SIGKILL of its worker: two deploys over 300 connections (the first
 * starts a sync entity for each, the second changes its frequency), the worker process killed with
 * SIGKILL in the middle of each apply and started again. Each apply finishes, its version ends
 * `active` (never left `applying`), and every connection's entity is configured exactly once per
 * deploy: started once by the first, handed its new definition by exactly one `reconfigure` signal
 * by the second, even for the batch that was in flight at the kill. And a caller that stops waiting
 * (504 deploy_timeout) does not stop the apply.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { createConnections } from '../../src/connections/index.js';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import { createDeployments, type DeployRequest } from '../../src/deploy/deployments.js';
import { applyWorkflowId } from '../../src/deploy/plan.js';
import { createPostgresDeploymentStore } from '../../src/deploy/store.js';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { syncWorkflowId } from '../../src/temporal/connection.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import type { ApplyProgress } from '../../workflows/applyDeployment.js';
import { uniqueName, useDatabase } from '../helpers/stack.js';
import { bundle, useRuntimeClient } from '../runtime/helpers.js';
import { startWorkerProcess, type WorkerChild } from '../runtime/processWorker.js';
import { runtimeDeps, TestConnections } from '../runtime/testConnections.js';

const CONNECTIONS = 300;
const INTEGRATION = 'crm';
const SYNC = 'people';
// Nothing is fetched (the syncs are created paused); the worker's outbound policy needs an address.
const UNUSED_API = 'http://127.0.0.1:9';

const request = (runs: string): DeployRequest => ({
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

async function until<T>(what: string, probe: () => Promise<T | undefined>, limitMs: number): Promise<T> {
  const deadline = Date.now() + limitMs;
  let lastError: unknown;
  for (;;) {
    // The workflow may not exist yet, or be between workers: try again.
    const value = await probe().catch((error: unknown) => {
      lastError = error;
      return undefined;
    });
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${limitMs} ms (last error: ${String(lastError)})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function mapLimit<T, R>(items: readonly T[], limit: number, work: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: limit }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await work(items[index] as T);
      }
    }),
  );
  return results;
}

/** How each entity was configured, from its history: started (by whom) and `reconfigure` signals. */
async function configurations(client: Client, ids: readonly string[]) {
  return mapLimit(ids, 8, async (workflowId) => {
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    const events = history.events ?? [];
    return {
      workflowId,
      starts: events.filter((event) => event.workflowExecutionStartedEventAttributes).length,
      reconfigures: events.filter(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'reconfigure',
      ).length,
    };
  });
}

/** An environment with `count` connections of one integration, and deployments over it. */
async function deployEnvironment(count: number, applyTimeoutMs: number) {
  const { pool, url } = await useDatabase();
  const client = await useRuntimeClient(pool);
  const taskQueue = uniqueName('tq');
  // The worker child's encryptor and records store (test/runtime/testConnections.ts).
  const shared = runtimeDeps(pool, new TestConnections(), new Map(), client);
  const connections = createConnections({
    db: pool,
    encryptor: shared.encryptor,
    callbackUrl: 'http://127.0.0.1/oauth/callback',
    catalog: loadProviderCatalog({
      extra: {
        'fake-crm': {
          display_name: 'Fake CRM',
          auth_mode: 'API_KEY',
          api_key: { in: 'header', name: 'Authorization', format: 'Bearer ${apiKey}' },
          base_url: `${UNUSED_API}/api`,
        },
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
  const store = createPostgresDeploymentStore(pool);
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
  return { url, client, taskQueue, env, store, deployments, waitingAtMost, entityIds };
}

describe('a deploy’s apply survives SIGKILL of its worker process', () => {
  it(`${CONNECTIONS} connections, a kill in each of two applies: both versions end active, each entity configured exactly once per deploy`, async () => {
    const { url, client, taskQueue, env, store, deployments, entityIds } = await deployEnvironment(
      CONNECTIONS,
      240_000,
    );
    const startWorker = () =>
      startWorkerProcess({ databaseUrl: url, taskQueue, apiBaseUrl: UNUSED_API, env: { WORKER_DEPLOY: '1' } });
    let worker: WorkerChild = await startWorker();
    afterAll(async () => {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await mapLimit(entityIds, 8, (id) =>
        client.workflow
          .getHandle(id)
          .terminate('test over')
          .catch(() => undefined),
      );
    });

    const exists = (id: string): Promise<boolean> =>
      client.workflow
        .getHandle(id)
        .describe()
        .then(
          () => true,
          () => false,
        );
    /** Runs a deploy, kills the worker once the apply is past its first batch and `ready`, restarts it. */
    async function deployWithKill(
      runs: string,
      previousRunId: string | undefined,
      ready: () => Promise<boolean>,
    ): Promise<{ version: number; runId: string; killedAtDone: number; startedAtKill: number; recoveryMs: number }> {
      const applying = deployments.apply(env, request(runs));
      applying.catch(() => undefined);
      const handle = client.workflow.getHandle(applyWorkflowId(env));
      const atKill = await until(
        'the apply past its first batch',
        async () => {
          const { runId } = await handle.describe();
          if (runId === previousRunId) return undefined;
          const progress = await client.workflow
            .getHandle(applyWorkflowId(env), runId)
            .query<ApplyProgress>('progress');
          return progress.done > 0 && (await ready()) ? progress : undefined;
        },
        120_000,
      );
      worker.child.kill('SIGKILL');
      const killedAt = Date.now();
      await worker.exited;
      // Nothing starts an entity until the worker is back.
      const startedAtKill = (await mapLimit(entityIds, 8, exists)).filter(Boolean).length;
      // Killed in the middle: the apply had not finished, and its version was recorded, not active.
      expect(atKill.done).toBeLessThan(CONNECTIONS);
      const described = await handle.describe();
      expect(described.status.name).toBe('RUNNING');
      expect((await store.current(env))?.status).toBe('applying');
      worker = await startWorker();
      const { deployment } = await applying;
      return {
        version: deployment.version,
        runId: described.runId,
        killedAtDone: atKill.done,
        startedAtKill,
        recoveryMs: Date.now() - killedAt,
      };
    }

    // The first kill in the middle of the second batch's starts (connections 50 to 99), so that its
    // repeated attempt meets entities its first attempt started.
    const first = await deployWithKill('1h', undefined, () => exists(entityIds[55]!));
    expect(first.startedAtKill).toBeGreaterThan(50);
    expect(first.startedAtKill).toBeLessThan(100);
    expect(first.version).toBe(1);
    expect(await store.current(env)).toMatchObject({ version: 1, status: 'active' });
    const afterFirst = await configurations(client, entityIds);
    // Every entity started once, and none re-configured by the batch repeated after the kill.
    expect(afterFirst.filter((entity) => entity.starts !== 1 || entity.reconfigures !== 0)).toEqual([]);

    const second = await deployWithKill('2h', first.runId, () => Promise.resolve(true));
    expect(second.version).toBe(2);
    expect(await store.current(env)).toMatchObject({ version: 2, status: 'active' });
    expect((await store.get(env, 1))?.status).toBe('superseded');
    const afterSecond = await configurations(client, entityIds);
    expect(afterSecond.filter((entity) => entity.starts !== 1 || entity.reconfigures !== 1)).toEqual([]);
    // And each holds the new definition.
    const frequencies = await mapLimit(entityIds, 8, async (id) =>
      client.workflow.getHandle(id).query<SyncStatus>('status'),
    );
    expect(frequencies.filter((status) => status.frequencyMs !== 2 * 3_600_000)).toEqual([]);

    // What the kills cost each apply: activity attempts repeated, workflow tasks that timed out.
    const repeats = await Promise.all(
      [first, second].map(async ({ runId }) => {
        const events = (await client.workflow.getHandle(applyWorkflowId(env), runId).fetchHistory()).events ?? [];
        return {
          activities: events.filter((event) => (event.activityTaskStartedEventAttributes?.attempt ?? 1) > 1).length,
          tasks: events.filter((event) => event.workflowTaskTimedOutEventAttributes).length,
        };
      }),
    );
    console.log(
      `[deploy crash] ${CONNECTIONS} connections; killed at ${first.killedAtDone} (${first.startedAtKill} entities started) and ${second.killedAtDone} done; ` +
        `versions active ${Math.round(first.recoveryMs / 100) / 10} s and ${Math.round(second.recoveryMs / 100) / 10} s after each kill; ` +
        `repeated activity attempts ${repeats.map((r) => r.activities).join(' and ')}, timed-out workflow tasks ${repeats.map((r) => r.tasks).join(' and ')}`,
    );
  }, 600_000);

  it('a caller that stops waiting does not stop the apply: 504, then 409 while it waits, then active once a worker serves it', async () => {
    const { url, client, taskQueue, env, store, deployments, waitingAtMost, entityIds } = await deployEnvironment(
      3,
      3000,
    );
    // No worker yet: the apply waits in Temporal, and the request stops waiting after 3 s.
    const timedOut: unknown = await deployments.apply(env, request('1h')).catch((error: unknown) => error);
    expect(timedOut).toMatchObject({ code: 'deploy_timeout', status: 504 });
    expect(await store.current(env)).toMatchObject({ version: 1, status: 'applying' });
    // The next deploy waits for that apply first, within the same limit, and records nothing.
    const refused: unknown = await deployments.apply(env, request('2h')).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'deploy_in_progress', status: 409 });
    expect(await store.latestVersion(env)).toBe(1);

    const worker = await startWorkerProcess({
      databaseUrl: url,
      taskQueue,
      apiBaseUrl: UNUSED_API,
      env: { WORKER_DEPLOY: '1' },
    });
    try {
      // The first apply finishes on its own, and the next deploy goes through after it.
      await until(
        'version 1 active',
        async () => ((await store.current(env))?.status === 'active' ? true : undefined),
        120_000,
      );
      const { deployment } = await waitingAtMost(120_000).apply(env, request('2h'));
      expect(deployment).toMatchObject({ version: 2, status: 'active' });
      const statuses = await Promise.all(
        entityIds.map((id) => client.workflow.getHandle(id).query<SyncStatus>('status')),
      );
      expect(statuses.map((status) => status.frequencyMs)).toEqual([7_200_000, 7_200_000, 7_200_000]);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await Promise.all(
        entityIds.map((id) =>
          client.workflow
            .getHandle(id)
            .terminate('test over')
            .catch(() => undefined),
        ),
      );
    }
  }, 300_000);
});
