/**
 * What the runtime tests share: a worker over the real records cache with the runtime's data converter,
 * a client with the same converter, a fake external API on loopback, and small script bundles in the
 * compiled bundle format (CommonJS, `module.exports.default`).
 */
import { randomUUID } from 'node:crypto';

import { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { Encryptor } from '../../src/connections/encryption.js';
import type { ConnectionService } from '../../src/connections/types.js';
import type { Pool } from '../../src/db/pool.js';
import type { ActionDefinition, RunSyncInput, SyncDefinition, SyncRunResult } from '../../src/runtime/definitions.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { createPostgresScriptStore, type ScriptStore } from '../../src/runtime/scriptStore.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import type { CreateWorkerOptions } from '../../src/temporal/worker.js';
import { createServiceWorkers } from '../../src/service.js';
import { createDatabase, stack, uniqueName, type TestDatabase } from '../helpers/stack.js';
import { ENVIRONMENT, INTEGRATION, runtimeDeps, TestConnections } from './testConnections.js';
import { connectTemporal, connectWorker } from '../../src/temporal/connection.js';
import { deferCleanup, startOwned } from '../helpers/cleanup.js';
import { json, startFakeUpstream, type FakeUpstream, type UpstreamHandler } from '../helpers/fakeUpstream.js';
import { bundle } from '../helpers/scriptBundle.js';

export { ENVIRONMENT, INTEGRATION, TestConnections };

export interface RuntimeHarness {
  pool: Pool;
  dbUrl: string;
  client: Client;
  /** The main task queue; action runs go to actionTaskQueue(taskQueue), served by `actionWorker`. */
  taskQueue: string;
  worker: Worker;
  actionWorker: Worker;
  /** The script store: deploys to the test environment (ENVIRONMENT) unless told another. */
  scripts: ReturnType<typeof boundScripts>;
  connections: TestConnections;
  actions: Map<string, ActionDefinition>;
}

/** A client with the runtime's data converter (results kept in Postgres must be readable), closed by `close`. */
async function createRuntimeClient(
  pool: Pool,
  encryptor?: Encryptor,
): Promise<{ client: Client; close: () => Promise<void> }> {
  const { temporalAddress, temporalNamespace } = stack();
  const connection = await connectTemporal({ address: temporalAddress }, 3000);
  const client = new Client({
    connection,
    namespace: temporalNamespace,
    dataConverter: createDataConverter({ db: pool, ...(encryptor ? { encryptor } : {}) }),
  });
  return { client, close: () => connection.close() };
}

/** A client with the runtime's data converter, closed when the test file ends. */
export async function useRuntimeClient(pool: Pool, encryptor?: Encryptor): Promise<Client> {
  const { client, close } = await createRuntimeClient(pool, encryptor);
  deferCleanup(close);
  return client;
}

export interface RuntimeOptions {
  worker?: boolean;
  connections?: (pool: Pool) => ConnectionService;
  /** Tunables of both workers (each has its own slots). */
  tuning?: CreateWorkerOptions['tuning'];
  /** Payloads encrypted as the service does (src/main.ts); in clear when omitted. */
  encryptor?: Encryptor;
  /** The file's database (test/kit's `db`); one of its own, dropped at stop, when omitted. */
  database?: TestDatabase;
  /** A fake external API the test connections' provider points at (test/kit's `upstream`). */
  upstream?: FakeUpstream;
  /** More of the workers' runtime dependencies (run slots and their bound, a time limit). */
  runtime?: (pool: Pool) => Partial<Parameters<typeof createServiceWorkers>[0]['runtime']>;
}

/** Database, worker and client of one test file (createRuntime), all torn down after it. */
export async function useRuntime(options: RuntimeOptions = {}): Promise<RuntimeHarness> {
  const harness = await createRuntime(options);
  deferCleanup(harness.stop);
  return harness;
}

/**
 * Database, worker and client of one test file. The connection service is the plain test one unless
 * `connections` builds another (the real one) over the file's database. `stop` shuts the workers down
 * and closes or drops what the harness started itself (not a database or fake API it was given).
 */
export const createRuntime = (options: RuntimeOptions = {}): Promise<RuntimeHarness & { stop: () => Promise<void> }> =>
  startOwned((owned) => composeRuntime(options, owned));

async function composeRuntime(options: RuntimeOptions, owned: Array<() => Promise<void>>): Promise<RuntimeHarness> {
  const database = options.database ?? (await createDatabase());
  if (!options.database) owned.push(database.drop);
  const { pool, url } = database;
  const testConnections = new TestConnections();
  if (options.upstream) testConnections.setBaseUrl(options.upstream.url);
  const connections = options.connections ? options.connections(pool) : testConnections;
  const actions = new Map<string, ActionDefinition>();
  const taskQueue = uniqueName('tq');
  const { client, close } = await createRuntimeClient(pool, options.encryptor);
  owned.push(close);
  let worker: Worker | undefined;
  let actionWorker: Worker | undefined;
  if (options.worker !== false) {
    const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
    const connection = await connectWorker({ address: temporalAddress });
    owned.push(() => connection.close());
    const workers = await createServiceWorkers({
      db: pool,
      runtime: { ...runtimeDeps(pool, connections, actions, client), ...options.runtime?.(pool) },
      connection,
      namespace: temporalNamespace,
      taskQueue,
      workflowBundle: { codePath: workflowBundlePath },
      dataConverter: createDataConverter({ db: pool, ...(options.encryptor ? { encryptor: options.encryptor } : {}) }),
      ...(options.tuning ? { tuning: options.tuning } : {}),
    });
    worker = workers.main;
    actionWorker = workers.actions;
    const running = workers.run();
    owned.push(async () => {
      workers.shutdown();
      await running;
    });
  }
  return {
    pool,
    dbUrl: url,
    client,
    taskQueue,
    worker: worker!,
    actionWorker: actionWorker!,
    scripts: boundScripts(createPostgresScriptStore({ db: pool })),
    connections: testConnections,
    actions,
  };
}

/** Deploys bundles to the test environment, as a deployment would. */
export function boundScripts(store: ScriptStore): {
  put(code: string, environmentId?: string): Promise<string>;
  get: ScriptStore['get'];
} {
  return {
    put: (code, environmentId = ENVIRONMENT) => store.put(code, environmentId),
    get: (hash, environmentId) => store.get(hash, environmentId),
  };
}

export type { UpstreamHandler as Handler } from '../helpers/fakeUpstream.js';
export { json } from '../helpers/fakeUpstream.js';
export { bundle } from '../helpers/scriptBundle.js';

/** The fake external API (test/helpers/fakeUpstream.ts); every request is counted by `METHOD path?query`. */
export const startFakeApi = (handler: UpstreamHandler): Promise<FakeUpstream> => startFakeUpstream(handler);

export function syncDefinition(overrides: Partial<SyncDefinition> & { scriptHash: string }): SyncDefinition {
  return {
    environmentId: ENVIRONMENT,
    integrationId: INTEGRATION,
    syncName: 'issues',
    syncType: 'incremental',
    runsMs: 24 * 3600_000,
    autoStart: true,
    trackDeletes: false,
    models: ['Issue'],
    webhookSubscriptions: [],
    ...overrides,
  };
}

export function actionDefinition(actionName: string, scriptHash: string): ActionDefinition {
  return { environmentId: ENVIRONMENT, integrationId: INTEGRATION, actionName, scriptHash };
}

/** Runs a sync run to its end on the harness's queue: its workflow id and result. */
export async function executeSync(
  h: Pick<RuntimeHarness, 'client' | 'taskQueue'>,
  input: RunSyncInput,
): Promise<{ workflowId: string; result: SyncRunResult }> {
  const workflowId = syncRunId({ ...input.definition, connectionId: input.connectionId }, randomUUID());
  const result = await h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
    taskQueue: h.taskQueue,
    workflowId,
    args: [input],
  });
  return { workflowId, result };
}

/** The step names (summaries) of a run's history, as the Web UI shows them. */
export function stepSummaries(history: {
  events?: { userMetadata?: { summary?: { data?: unknown } | null } | null }[] | null;
}): string[] {
  return (history.events ?? [])
    .map((event) => event.userMetadata?.summary?.data)
    .filter((data): data is Uint8Array => data instanceof Uint8Array)
    .map((data) => JSON.parse(Buffer.from(data).toString('utf8')) as string);
}

/**
 * The sync control as the service composes it (src/service.ts): an action whose bundle is small is
 * handed it with its input (scriptOf).
 */
export function serviceControl(h: Pick<RuntimeHarness, 'client' | 'taskQueue' | 'scripts'>) {
  return createSyncControl({ client: h.client, taskQueue: h.taskQueue, scripts: h.scripts });
}

/** Runs an action script to its end through the sync control: `completed`, or the code it failed with. */
export function actionOutcomes(h: Pick<RuntimeHarness, 'client' | 'taskQueue' | 'scripts'>) {
  const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
  return async (name: string, source: string): Promise<{ code: string | undefined }> => {
    const hash = await h.scripts.put(bundle(source));
    return control.runAction({ definition: actionDefinition(name, hash), connectionId: 'c', input: {} }).then(
      () => ({ code: 'completed' }),
      (error: unknown) => ({ code: (error as { code?: string }).code }),
    );
  };
}

/**
 * A cursor-paginated fake API of `total` records (`GET /records?cursor=&limit=`), counting the requests
 * of each page (by its cursor) and when they came, and the sync script that walks it at pages of
 * `page`: the crash tests' (test/runtime/crash.test.ts, entityCrash.test.ts).
 */
export async function startCursorApi(
  total: number,
  page: number,
): Promise<{ url: string; pageHits: Map<number, number>; hitTimes: number[]; script: string }> {
  const pageHits = new Map<number, number>();
  const hitTimes: number[] = [];
  const api = await startFakeApi((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const start = Number(url.searchParams.get('cursor') ?? '0');
    const limit = Number(url.searchParams.get('limit'));
    pageHits.set(start, (pageHits.get(start) ?? 0) + 1);
    hitTimes.push(Date.now());
    const items = Array.from({ length: Math.min(limit, total - start) }, (_, i) => ({
      id: `r${start + i}`,
      title: `record ${start + i}`,
      n: start + i,
    }));
    json(response, 200, { items, next: start + limit < total ? String(start + limit) : null });
  });
  const script = bundle(`async function sync(svc) {
  for await (const page of svc.paginate({ endpoint: '/records', paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items', limit: ${page}, limitNameInRequest: 'limit' } })) {
    await svc.batchSave(page.map((r) => ({ id: r.id, title: r.title, n: r.n })), 'Record');
  }
}`);
  return { url: api.url, pageHits, hitTimes, script };
}
