/**
 * The composition root: the whole service built from its settings, in one place, for `npm start`
 * (src/main.ts), the test harnesses and the benchmarks alike.
 *
 * `createService(settings, overrides?)` connects and builds, and serves nothing yet:
 * - `db` (a pool on DATABASE_URL), `encryptor` (SERVICE_ENCRYPTION_KEY[S]), `dataConverter` (the claim
 *   check, encrypted), `temporal` (a client on TEMPORAL_ADDRESS through src/temporal/connection.ts);
 * - `parts`: the stores and services the API and the worker share (connections, deployments, records,
 *   logs, run history, sync control, connection events);
 * - `api`: the API's dependencies (`createApi(service.api)`), with the settings' rate limit, body limit,
 *   admin key and readiness checks;
 * - the worker, built by `createServiceWorkers` (its activity map over the same parts, both task queues'
 *   Workers), which the tests that run a worker of their own use too.
 *
 * `start()` then serves what this process's role asks (SERVICE_ROLE, unless overridden): the worker
 * (its health port, both runtime workers, and the background jobs: records maintenance, retention and
 * token refresh), then the API (listening on HOST:PORT, or on a server the caller already listens on).
 * `prepare()` before it does all of the worker's start but polling (main's warm standby).
 * `workers` is set once the workers run; `done` settles when they stop (a failure rejects it). `stop()`
 * undoes everything `createService` and `start()` did, in reverse order; a pool passed in `overrides.db`
 * is the caller's and stays open.
 *
 * @example
 * const service = await createService(loadSettings());
 * await migrate(service.db);
 * await service.start();
 * // …
 * await service.stop();
 */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import type { WorkerOptions } from '@temporalio/worker';
import { createActivities, type ActivityDeps } from '../activities/index.js';
import type { ApiDeps } from './api/deps.js';
import { createGeneratedRouting } from './api/generatedRouting.js';
import { createApi } from './api/index.js';
import { createMcpSessionRegistry } from './api/mcp/sessions.js';
import { webhookDeployWarnings } from './api/webhooks/inbound.js';
import type { ConnectionSavedEvent, NeedsReauthEvent } from './connections/resources.js';
import { loadEncryptor, type Encryptor } from './connections/encryption.js';
import { createConnections, type CreateConnectionsOptions } from './connections/index.js';
import { loadProviderCatalog } from './connections/providers/catalog.js';
import { createSyncFrequencyStore, type SyncFrequencyStore } from './connections/syncFrequencyStore.js';
import { startTokenRefresher } from './connections/tokenRefresher.js';
import { createPool, type Pool } from './db/pool.js';
import { createDeployments } from './deploy/deployments.js';
import { createPostgresDeploymentStore } from './deploy/store.js';
import { ServiceError } from './errors.js';
import { databaseCheck, startHealthServer, temporalCheck, type ReadinessChecks } from './health.js';
import { startRecordsMaintenance } from './records/maintenance.js';
import { createPostgresRecordStore, recordEnvironmentHoldings } from './records/postgresRecordStore.js';
import { createPostgresLogStore, logEnvironmentHoldings } from './runtime/logStore.js';
import { createDataConverter, createPayloadBlobStore } from './runtime/payloadStorage.js';
import { purgeExpired, temporalHorizon, type RetentionPolicy, type RetentionStores } from './runtime/retention.js';
import { createRunHistory, runHistoryEnvironmentHoldings } from './runtime/runHistory.js';
import { createRunSlots, runSlotEnvironmentHoldings } from './runtime/runSlots.js';
import { createPostgresScriptStore, scriptEnvironmentHoldings } from './runtime/scriptStore.js';
import { createStepLedger, readRunCommit } from './steps/stepLedger.js';
import { CheckpointStore, checkpointEnvironmentHoldings } from './syncs/checkpointStore.js';
import type { Settings } from './settings.js';
import {
  checksConnection,
  connectTemporal,
  connectWorker,
  syncWorkflowId,
  temporalConnectionOptions,
  type TemporalConnectionOptions,
} from './temporal/connection.js';
import { threadMarksDirFor } from './temporal/scriptThreads.js';
import { ensureConnectionSyncs } from './syncs/selection.js';
import { createSyncControl } from './temporal/syncControl.js';
import { createRuntimeWorkers, type CreateWorkerOptions, type RuntimeWorkers } from './temporal/worker.js';
import { loadWorkflowBundle } from './temporal/workflowBundle.js';
import { createConnectionEvents } from './webhooks/connectionEvents.js';
import { createWebhookDeliveryStore, type WebhookDeliveryStore } from './webhooks/deliveries.js';
import { createWebhookSettingsStore, type WebhookSettingsStore } from './webhooks/settings.js';
import { createInboundSignatureStore } from './webhooks/inboundSignatures.js';
import {
  createInboundWebhookQueue,
  DEFAULT_INBOUND_QUEUE_LIMITS,
  type InboundQueueLimits,
  type InboundWebhookQueue,
} from './webhooks/inboundQueue.js';
import { actionTaskQueue } from '../workflows/taskQueues.js';

/** What a caller (a test, a benchmark, main's local mode) gives instead of what the settings say. */
export interface ServiceOverrides {
  /** A pool of the caller's (a test's own database); not closed by `stop()`. Default: DATABASE_URL. */
  db?: Pool;
  /** Default: SERVICE_ENCRYPTION_KEY (and SERVICE_ENCRYPTION_KEYS), or the key in `encryptionKeyFile`. */
  encryptor?: Encryptor;
  /** Local mode only: without SERVICE_ENCRYPTION_KEY a key is generated once into this file and reused. */
  encryptionKeyFile?: string;
  /** TLS and API key of TEMPORAL_ADDRESS, when the caller already read them (main checks them before the stack starts). */
  temporalConnection?: Omit<TemporalConnectionOptions, 'address'>;
  /** Default: the built-in providers and SERVICE_PROVIDERS_FILE's. */
  catalog?: CreateConnectionsOptions['catalog'];
  log?: (message: string) => void;
  /** Runs the worker in this process on `start()`. Default: SERVICE_ROLE is `all` or `worker`. */
  workers?: boolean;
  /** With the worker: records maintenance, retention and token refresh. Default: true. */
  backgroundJobs?: boolean;
  /** Serves the API on `start()`. Default: SERVICE_ROLE is `all` or `api`. */
  api?: boolean;
  /** A server that already listens (tests need its URL before the service exists): the API is its handler. */
  server?: Server;
  /** Replaces or adds to the API's dependencies (a test's logger, proxy back-off, dashboard links). */
  apiDeps?: Partial<ApiDeps>;
  /** Default: the prebuilt bundle of SERVICE_WORKFLOW_BUNDLE (or dist/), else bundled on the spot. */
  workflowBundle?: CreateWorkerOptions['workflowBundle'];
  workerTuning?: Partial<WorkerOptions>;
  /**
   * The claim-check threshold of the data converter (bytes): at most its default, 64 KiB
   * (EXTERNAL_PAYLOAD_THRESHOLD, which the task cut's weights assume; a higher one is refused at start).
   */
  payloadThreshold?: number;
  /** Default: 10 s. */
  connectTimeoutMs?: number;
}

/** The stores and services the API and the worker share, built once over one database and one Temporal client. */
export interface ServiceParts {
  connections: ReturnType<typeof createConnections>;
  deployments: ReturnType<typeof createDeployments>;
  records: ReturnType<typeof createPostgresRecordStore>;
  scripts: ReturnType<typeof createPostgresScriptStore>;
  logs: ReturnType<typeof createPostgresLogStore>;
  runHistory: ReturnType<typeof createRunHistory>;
  syncs: ReturnType<typeof createSyncControl>;
  /** Inbound webhooks waiting for their syncs, with their bounds. */
  inboundQueue: InboundWebhookQueue;
  events: ReturnType<typeof createConnectionEvents>;
  webhookSettings: WebhookSettingsStore;
  /** The delivery log of outbound webhooks. */
  webhookDeliveries: WebhookDeliveryStore;
  /** Per-connection sync frequencies. */
  syncFrequencies: SyncFrequencyStore;
  /** The checkpoints sync scripts saved. */
  checkpoints: CheckpointStore;
  /** What createActivities takes besides the pool. */
  runtime: NonNullable<ActivityDeps['runtime']>;
}

export interface Service {
  settings: Settings;
  db: Pool;
  encryptor: Encryptor;
  dataConverter: DataConverter;
  /** A client with the service's data converter. */
  temporal: Client;
  taskQueue: string;
  parts: ServiceParts;
  api: ApiDeps;
  /** The runtime's workers, once `start()` started them in this process. */
  readonly workers: RuntimeWorkers | undefined;
  /** The API's URL once `start()` listens (`http://HOST:PORT`, the bound port when PORT is 0). */
  readonly apiUrl: string | undefined;
  /** Settles when the workers stop; a failure of either rejects it. Never settles without workers. */
  done: Promise<void>;
  /**
   * Everything of the worker but polling (connected, the workflow bundle loaded): a warm standby
   * (src/main.ts) prepares, then starts when told to. Nothing without workers; `start()` prepares too.
   */
  prepare(): Promise<void>;
  /** The worker (its health port, then polling, then the background jobs), then the API. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

export interface ServiceWorkerOptions extends Omit<CreateWorkerOptions, 'activities' | 'onRunaway'> {
  db: Pool;
  /**
   * What the script runtime's activities use: the service's parts (`ServiceParts['runtime']`), or a
   * test's stores and fakes over its own database.
   */
  runtime: ServiceParts['runtime'];
}

/**
 * The worker's wiring: the activity map over `runtime` (activities/index.ts) and the Workers of both
 * task queues, sync runs and action runs (src/temporal/worker.ts). createService builds its workers
 * with it, and so do the tests that run a worker of their own (test/kit/runtime.ts, and
 * test/kit/workerProcess.ts, the worker process of the crash and chaos tests), so that a test's
 * worker is wired as the service's is.
 */
export function createServiceWorkers({ db, runtime, ...options }: ServiceWorkerOptions): Promise<RuntimeWorkers> {
  return createRuntimeWorkers({ ...options, activities: createActivities({ db, runtime }) });
}

/** What the API, the worker and the tests share: the composition of the stores over one pool and client. */
function composeParts(options: {
  db: Pool;
  encryptor: Encryptor;
  temporal: Client;
  taskQueue: string;
  callbackUrl: string;
  publicUrl?: string;
  catalog?: CreateConnectionsOptions['catalog'];
  log?: (message: string) => void;
  inboundQueueLimits?: InboundQueueLimits;
  syncRunConcurrency?: number;
  executionTimeLimitMs?: number | null;
  maxExecutions?: number;
  executionOperationLimit?: number;
}): ServiceParts {
  const { db, encryptor, temporal, taskQueue } = options;
  // Late-bound: deployments needs the connections, and a saved connection needs the deployment's syncs.
  let onConnectionSaved: (event: ConnectionSavedEvent) => Promise<void> = async () => undefined;
  let onNeedsReauth: (event: NeedsReauthEvent) => Promise<void> = async () => undefined;
  const connections = createConnections({
    db,
    encryptor,
    callbackUrl: options.callbackUrl,
    ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}),
    onConnectionSaved: (event) => onConnectionSaved(event),
    onNeedsReauth: (event) => onNeedsReauth(event),
    ...(options.catalog ? { catalog: options.catalog } : {}),
    ...(options.log ? { log: options.log } : {}),
    environmentHoldings: [
      recordEnvironmentHoldings,
      logEnvironmentHoldings,
      runHistoryEnvironmentHoldings,
      scriptEnvironmentHoldings,
      runSlotEnvironmentHoldings,
      checkpointEnvironmentHoldings,
    ],
  });
  const records = createPostgresRecordStore({ db });
  // A script's svc.log lines are stored without its connection's credential values.
  const logs = createPostgresLogStore({ db, secretsOf: (scope) => connections.service.credentialSecrets(scope) });
  const runHistory = createRunHistory({ db });
  const scripts = createPostgresScriptStore({ db });
  const frequencies = createSyncFrequencyStore({ db });
  const runSlots = createRunSlots({ db });
  const inboundQueue = createInboundWebhookQueue({
    db,
    encryptor,
    ...(options.inboundQueueLimits ? { limits: options.inboundQueueLimits } : {}),
  });
  const syncs = createSyncControl({
    client: temporal,
    taskQueue,
    committedRun: (executionRunId) => readRunCommit(db, executionRunId),
    frequencyOf: (ref) => frequencies.get(ref),
    scripts,
    onStop: async (ref) => {
      await inboundQueue.erase(ref);
      // Its run, stopped with it, never records itself and never gives its slot back.
      await runSlots.releaseEntity(syncWorkflowId(ref));
    },
  });
  const webhookSettings = createWebhookSettingsStore({ db, encryptor });
  const webhookDeliveries = createWebhookDeliveryStore({ db, settings: webhookSettings });
  const connectionIds = async (environmentId: string, integrationId: string) =>
    (await connections.service.listConnections(environmentId, { integrationId })).map((c) => c.connection_id);
  const deploymentStore = createPostgresDeploymentStore({ db });
  const deployments = createDeployments({
    store: deploymentStore,
    scripts,
    records,
    temporal,
    applyTaskQueue: actionTaskQueue(taskQueue),
    connectionIds,
    warnings: async (environmentId, config) =>
      webhookDeployWarnings(
        await connections.environments.get(environmentId),
        config,
        async (integrationId) => (await webhookSettings.inboundView(environmentId, integrationId))?.has_secret ?? false,
      ),
  });
  const events = createConnectionEvents({
    db,
    settings: webhookSettings,
    temporal,
    taskQueue,
    describe: async (scope) => {
      const status = await connections.service.getConnectionStatus(scope).catch(() => undefined);
      return status && { provider: status.provider, authMode: status.auth_mode };
    },
    ...(options.log ? { log: options.log } : {}),
  });
  onConnectionSaved = async (event) => {
    // The application hears of the connection even when starting its syncs fails (that failure is reported).
    await events.connectionSaved(event);
    await ensureConnectionSyncs({ deployments, syncs }, event.scope);
  };
  onNeedsReauth = (event) => events.needsReauth(event);
  const runtime: ServiceParts['runtime'] = {
    records,
    connections: connections.service,
    environmentVariables: connections.variables,
    scripts,
    logs,
    temporal,
    encryptor,
    inboundQueue,
    runSlots,
    ...(options.syncRunConcurrency === undefined ? {} : { syncRunConcurrency: options.syncRunConcurrency }),
    ...(options.executionTimeLimitMs == null ? {} : { executionTimeLimitMs: options.executionTimeLimitMs }),
    ...(options.maxExecutions === undefined ? {} : { maxExecutions: options.maxExecutions }),
    ...(options.executionOperationLimit === undefined
      ? {}
      : { executionOperationLimit: options.executionOperationLimit }),
    resolveAction: ({ environmentId, integrationId, actionName }) =>
      deployments.actionDefinition(environmentId, integrationId, actionName).catch(() => null),
    // The apply workflow's activities (activities/deploy.ts).
    deploy: { deployments: deploymentStore, records, syncs, connectionIds },
  };
  return {
    connections,
    deployments,
    records,
    scripts,
    logs,
    runHistory,
    syncs,
    inboundQueue,
    events,
    webhookSettings,
    webhookDeliveries,
    syncFrequencies: frequencies,
    checkpoints: new CheckpointStore(db),
    runtime,
  };
}

/** The service's public URL (no trailing slash) and OAuth callback, from the settings. */
export function publicUrls(settings: Settings): { publicUrl: string; callbackUrl: string } {
  const publicUrl = (settings.SERVICE_PUBLIC_URL ?? `http://${settings.HOST}:${settings.PORT}`).replace(/\/+$/, '');
  return { publicUrl, callbackUrl: settings.SERVICE_CALLBACK_URL ?? `${publicUrl}/oauth/callback` };
}

/** How long each kind of row is kept (docs/configuration.md "Retention"), from the settings. */
function retentionPolicy(settings: Settings): RetentionPolicy {
  return {
    syncRuns: settings.RETENTION_SYNC_RUNS,
    scriptLogs: settings.RETENTION_SCRIPT_LOGS,
    webhookDeliveries: settings.RETENTION_WEBHOOK_DELIVERIES,
    payloadBlobs: settings.RETENTION_PAYLOAD_BLOBS,
    stepLedger: settings.RETENTION_STEP_LEDGER,
  };
}

export async function createService(settings: Settings, overrides: ServiceOverrides = {}): Promise<Service> {
  const address = settings.TEMPORAL_ADDRESS;
  if (address === undefined) {
    throw new ServiceError('invalid_settings', 'TEMPORAL_ADDRESS is not set: the service needs a Temporal server.');
  }
  if (overrides.db === undefined && settings.DATABASE_URL === undefined) {
    throw new ServiceError('invalid_settings', 'DATABASE_URL is not set: the service needs a Postgres database.');
  }
  // Undone in reverse order by stop(), and by a createService that fails half-way.
  const cleanups: (() => Promise<void>)[] = [];
  const stopAll = async (): Promise<void> => {
    const log = overrides.log ?? ((line: string) => console.error(line));
    for (const cleanup of cleanups.splice(0).reverse())
      await cleanup().catch((error: unknown) => log(`stopping: ${String(error)}`));
  };
  try {
    const db = overrides.db ?? createPool({ url: settings.DATABASE_URL ?? '', max: settings.DATABASE_POOL_SIZE });
    if (!overrides.db) cleanups.push(() => db.end());
    const encryptor =
      overrides.encryptor ??
      loadEncryptor({
        env: settings,
        ...(overrides.encryptionKeyFile ? { generatedKeyFile: overrides.encryptionKeyFile } : {}),
      });
    const dataConverter = createDataConverter({
      db,
      encryptor,
      ...(overrides.payloadThreshold !== undefined ? { threshold: overrides.payloadThreshold } : {}),
    });
    const reach: TemporalConnectionOptions = {
      ...(overrides.temporalConnection ?? temporalConnectionOptions(address, settings)),
      address,
    };
    const clientConnection = await connectTemporal(reach, overrides.connectTimeoutMs);
    cleanups.push(() => clientConnection.close());
    // Readiness checks on a connection of their own: one call each, ended by its deadline.
    const temporalChecks = checksConnection(reach);
    cleanups.push(() => temporalChecks.close());
    const namespace = settings.TEMPORAL_NAMESPACE;
    const temporal = new Client({ connection: clientConnection, namespace, dataConverter });
    const taskQueue = settings.TEMPORAL_TASK_QUEUE;
    const { publicUrl, callbackUrl } = publicUrls(settings);
    const parts = composeParts({
      db,
      encryptor,
      temporal,
      taskQueue,
      callbackUrl,
      publicUrl,
      catalog: overrides.catalog ?? loadProviderCatalog({ extraFile: settings.SERVICE_PROVIDERS_FILE }),
      ...(overrides.log ? { log: overrides.log } : {}),
      syncRunConcurrency: settings.SYNC_RUN_CONCURRENCY_PER_ENVIRONMENT,
      executionTimeLimitMs: settings.SYNC_EXECUTION_TIME_LIMIT,
      maxExecutions: settings.SYNC_RUN_MAX_EXECUTIONS,
      executionOperationLimit: settings.SYNC_EXECUTION_OPERATION_LIMIT,
      inboundQueueLimits: {
        ...DEFAULT_INBOUND_QUEUE_LIMITS,
        syncBytes: settings.WEBHOOK_QUEUE_SYNC_BYTES,
        environmentBytes: settings.WEBHOOK_QUEUE_ENVIRONMENT_BYTES,
      },
    });
    const { connections } = parts;
    // The MCP sessions of the API (POST /mcp), closed with the service.
    const mcpSessions = createMcpSessionRegistry(
      {
        perEnvironment: settings.SERVICE_MCP_SESSIONS_PER_ENVIRONMENT,
        idleMs: settings.SERVICE_MCP_SESSION_IDLE_SECONDS * 1000,
      },
      {
        onError: (error) => (overrides.log ?? ((line: string) => console.error(line)))(`mcp session: ${String(error)}`),
      },
    );
    cleanups.push(() => mcpSessions.closeAll());
    const api: ApiDeps = {
      database: databaseCheck(db),
      environments: connections.environments,
      connections: connections.service,
      integrations: connections.integrations,
      variables: connections.variables,
      records: parts.records,
      logs: parts.logs,
      runHistory: parts.runHistory,
      syncs: parts.syncs,
      syncFrequencies: parts.syncFrequencies,
      checkpoints: parts.checkpoints,
      temporal,
      deployments: parts.deployments,
      generated: createGeneratedRouting({ deployments: overrides.apiDeps?.deployments ?? parts.deployments }),
      webhookSettings: parts.webhookSettings,
      inboundSignatures: createInboundSignatureStore({ db }),
      inboundQueue: parts.inboundQueue,
      webhookDeliveries: parts.webhookDeliveries,
      runSlots: parts.runtime.runSlots,
      actionConcurrency: settings.ACTION_CONCURRENCY_PER_ENVIRONMENT,
      webhookRateLimit: { perSecond: settings.WEBHOOK_RATE_LIMIT_PER_SECOND },
      encryptor,
      oauthFlow: connections.oauthFlow,
      readiness: { database: databaseCheck(db), temporal: temporalCheck(temporalChecks) },
      publicUrl,
      rateLimit: { perSecond: settings.RATE_LIMIT_PER_SECOND },
      bodyLimit: settings.BODY_LIMIT,
      mcpSessions,
      adminKey: settings.SERVICE_ADMIN_KEY,
      ...overrides.apiDeps,
    };

    let workers: RuntimeWorkers | undefined;
    let apiUrl: string | undefined;
    let settle: { resolve: () => void; reject: (error: unknown) => void } = {
      resolve: () => undefined,
      reject: () => undefined,
    };
    const done = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    // A caller that never waits for `done` must not see an unhandled rejection.
    done.catch(() => undefined);

    // Both workers poll their task queues while RUNNING; a failed or draining worker is not ready.
    const pollers: ReadinessChecks[string] = async () =>
      workers?.main.getState() === 'RUNNING' && workers.actions.getState() === 'RUNNING';
    const startHealth = async (): Promise<void> => {
      if (settings.SERVICE_HEALTH_PORT === undefined) return;
      const health = await startHealthServer({
        host: settings.HOST,
        port: settings.SERVICE_HEALTH_PORT,
        checks: () => ({ database: databaseCheck(db), temporal: temporalCheck(temporalChecks), pollers }),
      });
      cleanups.push(() => health.close());
    };
    // Connected, the workflow bundle loaded, the Workers created: everything but polling.
    let prepared: Promise<RuntimeWorkers> | undefined;
    const prepareWorkers = (): Promise<RuntimeWorkers> =>
      (prepared ??= (async () => {
        const workerConnection = await connectWorker(reach);
        cleanups.push(() => workerConnection.close());
        // Sync runs and action runs on queues of their own, both served by this process: a failure of
        // either worker ends `done`, and with it main's process (a supervisor starts it again).
        return createServiceWorkers({
          db,
          runtime: parts.runtime,
          connection: workerConnection,
          namespace,
          taskQueue,
          workflowBundle:
            overrides.workflowBundle ?? (await loadWorkflowBundle({ bundlePath: settings.SERVICE_WORKFLOW_BUNDLE })),
          dataConverter,
          // Thread marks (src/temporal/scriptThreads.ts) of this install only, unless the operator chose a folder.
          threadMarksDir:
            settings.SERVICE_THREAD_MARKS_DIR ??
            threadMarksDirFor({
              databaseUrl: settings.DATABASE_URL ?? '',
              temporalAddress: address,
              namespace,
              taskQueue,
            }),
          ...(overrides.workerTuning ? { tuning: overrides.workerTuning } : {}),
        });
      })());

    const startWorkers = async (): Promise<void> => {
      // The health port first: unless prepared already (a standby), before the workflow bundle is
      // loaded (seconds), so that a probe sees the process alive, and not ready.
      await startHealth();
      const started = await prepareWorkers();
      workers = started;
      const running = started.run();
      running.then(settle.resolve, settle.reject);
      cleanups.push(async () => {
        started.shutdown();
        await running.catch(() => undefined);
      });
      if (overrides.backgroundJobs === false) return;
      // Every worker process also deletes what interrupted erases left in the records cache, and the
      // rows past their retention (docs/configuration.md "Retention"): the run history, logs, webhook
      // deliveries, claim-checked payloads no history can refer to, and the step ledger's leftovers
      // (by default after an hour, far longer than a run waits for a worker to take it over:
      // docs/architecture.md, "Exact resume").
      const policy = retentionPolicy(settings);
      const horizon = temporalHorizon(temporal);
      const stores: RetentionStores = {
        syncRuns: parts.runHistory,
        scriptLogs: parts.logs,
        webhookDeliveries: parts.webhookDeliveries,
        payloadBlobs: createPayloadBlobStore({ db }),
        stepLedger: createStepLedger({ db, encryptor }),
      };
      const maintenance = startRecordsMaintenance(parts.records, {
        also: {
          'rows past their retention': async () => {
            const counts = await purgeExpired({ db, stores, policy, horizon });
            return Object.values(counts ?? {}).reduce((sum, count) => sum + count, 0);
          },
          // A webhook that waited this long (its sync paused, say) is dropped; its run fails with webhook_expired.
          'queued webhooks past their retention': async () => {
            const retention = settings.RETENTION_QUEUED_WEBHOOKS;
            return retention === null ? 0 : parts.inboundQueue.expireBefore(new Date(Date.now() - retention));
          },
        },
      });
      // And renews access tokens before they expire (docs/connections.md "Background refresh").
      const tokenRefresher = startTokenRefresher(connections.service, {
        concurrency: settings.TOKEN_REFRESH_CONCURRENCY,
        perEnvironment: settings.TOKEN_REFRESH_PER_ENVIRONMENT,
      });
      cleanups.push(async () => {
        await tokenRefresher.stop();
        await maintenance.stop();
      });
    };

    const startApi = async (): Promise<void> => {
      // Requests are authenticated from kept keys, forgotten at every change of an environment in any
      // process (src/connections/environmentKeyCache.ts): no query of its own per request.
      if (settings.SERVICE_KEY_CACHE_SECONDS > 0) {
        cleanups.push(
          await connections.environments.cacheSecretKeys({ ttlMs: settings.SERVICE_KEY_CACHE_SECONDS * 1000 }),
        );
      }
      const app = createApi(api);
      if (overrides.server) {
        const server = overrides.server;
        server.on('request', app);
        cleanups.push(async () => {
          server.off('request', app);
        });
        const bound = server.address() as AddressInfo | null;
        apiUrl = bound ? `http://${settings.HOST}:${bound.port}` : undefined;
        return;
      }
      const server: Server = app.listen(settings.PORT, settings.HOST);
      await new Promise<void>((resolve, reject) => {
        server.once('listening', resolve);
        server.once('error', reject);
      });
      cleanups.push(async () => {
        server.closeAllConnections();
        await new Promise((resolve) => server.close(resolve));
      });
      apiUrl = `http://${settings.HOST}:${(server.address() as AddressInfo).port}`;
    };

    let started = false;
    const runsWorkers = overrides.workers ?? settings.SERVICE_ROLE !== 'api';
    return {
      settings,
      db,
      encryptor,
      dataConverter,
      temporal,
      taskQueue,
      parts,
      api,
      get workers() {
        return workers;
      },
      get apiUrl() {
        return apiUrl;
      },
      done,
      async prepare() {
        if (runsWorkers) await prepareWorkers();
      },
      async start() {
        // A caller's mistake, not an error the service answers with.
        if (started) throw new Error('createService: start() was called twice');
        started = true;
        if (runsWorkers) await startWorkers();
        if (overrides.api ?? settings.SERVICE_ROLE !== 'worker') await startApi();
      },
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}
