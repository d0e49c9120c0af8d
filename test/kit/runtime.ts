/**
 * What the runtime tests share: a worker over the real records cache with the runtime's data converter,
 * a client with the same converter, a fake external API on loopback, and small script bundles in the
 * compiled bundle format (CommonJS, `module.exports.default`).
 */
import { randomUUID } from 'node:crypto';

import type { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { Encryptor } from '../../src/connections/encryption.js';
import type { ConnectionService } from '../../src/connections/types.js';
import type { Pool } from '../../src/db/pool.js';
import type {
  ActionDefinition,
  RunSyncInput,
  SyncDefinition,
  SyncRunResult,
  SyncStatus,
} from '../../src/runtime/definitions.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { createPostgresScriptStore, type ScriptStore } from '../../src/runtime/scriptStore.js';
import { createSyncControl, type SyncControl, type SyncRef } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import type { CreateWorkerOptions } from '../../src/temporal/worker.js';
import { createServiceWorkers } from '../../src/service.js';
import { connectTestWorker, createTemporalClient, uniqueName } from './stack.js';
import { createDatabase, type TestDatabase } from './db.js';
import { ENVIRONMENT, INTEGRATION, runtimeDeps, TestConnections } from './testConnections.js';
import { deferCleanup, givenOrStarted, startOwned } from './cleanup.js';
import { cursorPage, json, startFakeUpstream, type FakeUpstream } from './upstream.js';
import { bundle, cursorSync } from './scripts.js';

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

/** The runtime's data converter: payloads kept in Postgres, encrypted when `encryptor` is given. */
const runtimeConverter = (pool: Pool, encryptor?: Encryptor) =>
  createDataConverter({ db: pool, ...(encryptor ? { encryptor } : {}) });

/** A client with the runtime's data converter (results kept in Postgres must be readable), closed by `close`. */
const createRuntimeClient = (pool: Pool, encryptor?: Encryptor) =>
  createTemporalClient({ dataConverter: runtimeConverter(pool, encryptor) });

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
  const { pool, url } = await givenOrStarted(options.database, createDatabase, (db) => db.drop(), owned);
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
    const { connection, namespace, workflowBundle } = await connectTestWorker();
    owned.push(() => connection.close());
    const workers = await createServiceWorkers({
      db: pool,
      runtime: { ...runtimeDeps(pool, connections, actions, client), ...options.runtime?.(pool) },
      connection,
      namespace,
      taskQueue,
      workflowBundle,
      dataConverter: runtimeConverter(pool, options.encryptor),
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

/** The sync's status once its `runs`-th execution has finished (within `timeoutMs`). */
export function settledSync(
  control: Pick<SyncControl, 'status'>,
  ref: { connectionId: string } & SyncDefinition,
  runs: number,
  timeoutMs: number,
): Promise<SyncStatus> {
  return eventually(
    async () => {
      const status = await control.status(ref);
      return status.executions >= runs && status.status !== 'running' && status.finishedAt !== null
        ? status
        : undefined;
    },
    timeoutMs,
    `run ${runs} of ${ref.syncName}`,
  );
}

/** The sync definition of the cursor-paginated records (startCursorApi's): a full sync of `Record`. */
export function recordsSync(overrides: Partial<SyncDefinition> & { scriptHash: string }): SyncDefinition {
  return syncDefinition({ syncName: 'records', syncType: 'full', models: ['Record'], ...overrides });
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
  const api = await startFakeUpstream((request, response) => {
    const { start, answer } = cursorPage(request, total, (n) => ({ id: `r${n}`, title: `record ${n}`, n }));
    pageHits.set(start, (pageHits.get(start) ?? 0) + 1);
    hitTimes.push(Date.now());
    json(response, 200, answer);
  });
  const script = cursorSync(page, 'Record', ['id', 'title', 'n']);
  return { url: api.url, pageHits, hitTimes, script };
}

/** The sync's status once its latest run has ended (waited for up to 4 minutes: a run with kills in it). */
export function runEnded(control: SyncControl, ref: SyncRef): Promise<SyncStatus> {
  return eventually<SyncStatus>(
    async () => {
      const current = await control.status(ref);
      return current.finishedAt !== null && current.status !== 'running' ? current : undefined;
    },
    240_000,
    'the run to end',
  );
}
