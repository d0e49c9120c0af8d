/**
 * What the runtime benchmarks (bench/sync.ts, bench/action.ts) share: an ephemeral dev stack
 * (Temporal CLI dev server + Postgres, durability off as in tests), a migrated database, the runtime's
 * workers (main and action queue) with the runtime's activities and data converter in this process, a client, and a fake API on loopback.
 * The connection service is the plain one of the runtime tests (API key, base URL from the fake API).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { DefaultLogger, Runtime, type Logger, type WorkerOptions } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { migrate } from '../src/db/migrate.js';
import { createPool, type Pool } from '../src/db/pool.js';
import { startStack } from '../src/devstack/index.js';
import {
  RUN_WORKFLOW_TASK_TIMEOUT_MS,
  SYNC_ENTITY_VERSION,
  type ActionDefinition,
  type RunOptions,
  type SyncDefinition,
} from '../src/runtime/definitions.js';
import { outboundPolicy } from '../src/runtime/outbound.js';
import type { Encryptor } from '../src/connections/encryption.js';
import { createDataConverter, createEncryptionCodec } from '../src/runtime/payloadStorage.js';
import { createPostgresScriptStore, type ScriptStore } from '../src/runtime/scriptStore.js';
import { createSyncControl } from '../src/temporal/syncControl.js';
import { connectTemporal, connectWorker, syncWorkflowId } from '../src/temporal/connection.js';
import type { WriteSummary } from '../src/records/types.js';
import type { ManageSyncInput } from '../workflows/manageSync.js';
import { bundleWorkflows, createRuntimeWorkers, type RuntimeWorkers } from '../src/temporal/worker.js';
import { runtimeDeps, TestConnections } from '../test/kit/testConnections.js';

export interface RuntimeBench {
  pool: Pool;
  client: Client;
  /** The Temporal frontend's address, for a connection of the benchmark's own. */
  temporalAddress: string;
  taskQueue: string;
  scripts: ScriptStore;
  apiUrl: string;
  versions: string;
  /**
   * Replaces the running workers by new ones (same bundle, activities and queues) with other worker
   * tuning or another data converter, so configurations can be compared in one run.
   */
  restartWorkers(options: WorkerVariant): Promise<void>;
  close(): Promise<void>;
}

/** What a benchmark may vary between two sets of workers. */
export interface WorkerVariant {
  tuning?: Partial<WorkerOptions>;
  /** Given the runtime's data converter (claim check on this pool), returns the one the workers use. */
  dataConverter?: (standard: DataConverter) => DataConverter;
  /** Wraps the runtime's activities (to time them, say). */
  activities?: (activities: Record<string, unknown>) => Record<string, unknown>;
}

export async function startRuntimeBench(
  options: {
    api: (request: IncomingMessage, response: ServerResponse) => void;
    extraActivities?: Record<string, (...args: never[]) => Promise<unknown>>;
    /** The client's data converter; the standard one (claim check, no encryption) when omitted. */
    clientDataConverter?: (standard: DataConverter) => DataConverter;
    /** The SDK's and Core's logger; warnings and errors to stderr when omitted. */
    logger?: Logger;
  } & WorkerVariant,
): Promise<RuntimeBench> {
  Runtime.install(
    options.logger
      ? // Core's own log lines go to the given logger too (by default Core writes them to stderr itself).
        { logger: options.logger, telemetryOptions: { logging: { filter: 'WARN', forward: {} } } }
      : { logger: new DefaultLogger('WARN') },
  );
  const stack = await startStack({ ephemeral: true, database: 'bench_runtime' });
  const pool = createPool({ url: stack.postgres.url, max: 10, applicationName: 'bench-runtime' });
  await migrate(pool);
  const server = createServer(options.api);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  // The fake API only: the outbound request policy keeps refusing every other local address.
  outboundPolicy().allow(new URL(apiUrl).host);

  const clientConnection = await connectTemporal({ address: stack.temporal.address });
  const standard = createDataConverter({ db: pool });
  const client = new Client({
    connection: clientConnection,
    namespace: stack.temporal.namespace,
    dataConverter: options.clientDataConverter?.(standard) ?? standard,
  });
  const workerConnection = await connectWorker({ address: stack.temporal.address });
  const taskQueue = 'bench-runtime';
  const activities = {
    ...createActivities({
      db: pool,
      runtime: runtimeDeps(pool, new TestConnections({ baseUrl: apiUrl }), new Map<string, ActionDefinition>(), client),
    }),
    ...options.extraActivities,
  };
  const workflowBundle = await bundleWorkflows(fileURLToPath(new URL('./workflows.ts', import.meta.url)));
  // Both queues, as the service's worker process serves them: action runs go to the action queue.
  const startWorkers = async (variant: WorkerVariant) => {
    const workers = await createRuntimeWorkers({
      connection: workerConnection,
      namespace: stack.temporal.namespace,
      taskQueue,
      workflowBundle,
      activities: variant.activities?.(activities) ?? activities,
      dataConverter: variant.dataConverter?.(standard) ?? standard,
      ...(variant.tuning ? { tuning: variant.tuning } : {}),
    });
    return { workers, running: workers.run() };
  };
  let current: { workers: RuntimeWorkers; running: Promise<void> } = await startWorkers(options);
  return {
    pool,
    client,
    temporalAddress: stack.temporal.address,
    taskQueue,
    scripts: createPostgresScriptStore({ db: pool }),
    apiUrl,
    versions: `${stack.temporal.version}; ${stack.postgres.version}`,
    async restartWorkers(variant) {
      current.workers.shutdown();
      await current.running;
      current = await startWorkers(variant);
    },
    async close() {
      current.workers.shutdown();
      await current.running;
      await workerConnection.close();
      await clientConnection.close();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await pool.end();
      await stack.stop();
    },
  };
}

/**
 * The data converter production uses (src/service.ts, createDataConverter with the service's key):
 * every payload encrypted, then claim-checked. For `dataConverter` and `clientDataConverter`.
 */
export function productionConverter(encryptor: Encryptor): (standard: DataConverter) => DataConverter {
  const encryption = createEncryptionCodec(encryptor);
  return (standard) => ({ ...standard, payloadCodecs: [encryption, ...(standard.payloadCodecs ?? [])] });
}

/** The sync control as the service composes it (src/service.ts): small action bundles go with the input. */
export function serviceSyncControl(bench: Pick<RuntimeBench, 'client' | 'taskQueue' | 'scripts'>) {
  return createSyncControl({ client: bench.client, taskQueue: bench.taskQueue, scripts: bench.scripts });
}

/** A script bundle in the compiled format from the source of its default-exported function. */
export function bundle(functionSource: string): string {
  return `"use strict";\nmodule.exports.default = ${functionSource};\n`;
}

/** The run did not end within its time; the entity (its execution named here) is terminated. */
export class RunTimedOut extends Error {
  constructor(readonly execution: { workflowId: string; runId: string }) {
    super(`the run of ${execution.workflowId} did not finish in time`);
  }
}

/**
 * One sync run as production runs a scheduled one (issue 31's run model): inside the first execution
 * of a new sync entity (`manageSync`, auto-start: its first run starts at once), its steps local
 * activities of that execution. Timed from the entity's start to the run's row in the run history
 * (written by the run's last step, `finishSyncRun`; polled every 10 ms), so it covers what a `runSync`
 * workflow's start-to-result covered, plus the run's record. The entity is terminated afterwards.
 * Returns the run's counts per model (its run history row) and the execution that ran it.
 */
export async function runEntitySync(
  bench: Pick<RuntimeBench, 'client' | 'pool' | 'taskQueue'>,
  given: { definition: SyncDefinition; connectionId: string; options?: RunOptions; timeoutMs?: number },
): Promise<{ models: Record<string, WriteSummary>; ms: number; workflowId: string; runId: string }> {
  const { definition, connectionId } = given;
  const input: ManageSyncInput = { definition, connectionId, options: given.options, version: SYNC_ENTITY_VERSION };
  const workflowId = syncWorkflowId({ ...definition, connectionId });
  const started = performance.now();
  const handle = await bench.client.workflow.start('manageSync', {
    taskQueue: bench.taskQueue,
    workflowId,
    args: [input],
    // As src/temporal/syncControl.ts starts an entity.
    workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
  });
  const deadline = started + (given.timeoutMs ?? 600_000);
  try {
    for (;;) {
      const { rows } = await bench.pool.query<{
        status: string;
        error_message: string | null;
        models: Record<string, WriteSummary>;
      }>(
        'SELECT status, error_message, models FROM sync_runs WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND sync_name = $4',
        [definition.environmentId, definition.integrationId, connectionId, definition.syncName],
      );
      const row = rows[0];
      if (row) {
        const ms = performance.now() - started;
        if (row.status !== 'success') throw new Error(`the run failed: ${row.error_message ?? 'no message'}`);
        // No status query: one sent while the execution continues as new reaches the closed execution,
        // and a worker replays the whole run to answer it (measured: the run's every activation again).
        return { models: row.models, ms, workflowId, runId: handle.firstExecutionRunId };
      }
      if (performance.now() > deadline) throw new RunTimedOut({ workflowId, runId: handle.firstExecutionRunId });
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  } finally {
    await handle.terminate('benchmark run done').catch(() => undefined);
  }
}
