/**
 * Runs a local script the way the service runs a deployed one: the real run workflow (`runSync`,
 * `runAction`) from the service's workflow bundle, in the script's own realm with loop protection,
 * on a worker of this process against a Temporal server (TEMPORAL_ADDRESS, or a throw-away dev server
 * this process starts). Only the activities differ: nothing is written to a records cache or to the
 * connection. Requests, connection, metadata and environment variables come from a backend: the live
 * API (`service dryrun`, src/cli/dryrun.ts) or a recorded fixture (`service test`, src/cli/scriptTests.ts).
 */
import { randomUUID } from 'node:crypto';
import { Client, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { checkRecords, formatInvalidRecords, modelIndex } from '../config/checkRecord.js';
import type { ServiceConfig } from '../config/types.js';
import type { WriteSummary } from '../records/types.js';
import { syncDefinition } from '../deploy/deployments.js';
import type { ActionDefinition, RunActionInput, RunSyncInput } from '../runtime/definitions.js';
import { budgetFunctionName, instrumentScript } from '../runtime/instrument.js';
import { FAILURE_CONVERTER_PATH } from '../runtime/payloadStorage.js';
import type { ConnectionRecord, EnvironmentVariable } from '../runtime/public.js';
import type { HttpRequestInput, HttpResult, IntegrationDescription } from '../runtime/svcTypes.js';
import { connectTemporal, connectWorker, type TemporalConnectionOptions } from '../temporal/connection.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { createLogger } from '../log.js';
import { installServiceRuntime } from '../temporal/logger.js';
import { bundleWorkflows, createWorker } from '../temporal/worker.js';
import type { ScriptLogEntry } from '../runtime/logStore.js';

/** Where a local run gets what the service would give it. */
export interface LocalBackend {
  /** One attempt of a request (credentials injected by the backend); throws an ApplicationFailure as sendRequest does. */
  httpRequest(request: HttpRequestInput): Promise<HttpResult>;
  getConnection(options: { forceRefresh: boolean; refreshToken: boolean }): Promise<ConnectionRecord>;
  getMetadata(): Promise<Record<string, unknown>>;
  getEnvironmentVariables(): Promise<EnvironmentVariable[]>;
  /** The integration as svc.getIntegration sees it, with its provider's default pagination. */
  getIntegration(): Promise<IntegrationDescription>;
}

/** One request of the run and how it ended (a retried request appears once per attempt). */
export interface Exchange {
  request: HttpRequestInput;
  response?: HttpResult;
  failure?: { type: string; message: string; nonRetryable: boolean; details: unknown[] };
  ms: number;
}

export interface LocalRunEvent {
  kind: 'request' | 'log' | 'save' | 'delete' | 'metadata';
  text: string;
}

export interface LocalRunOptions {
  config: ServiceConfig;
  integration: string;
  kind: 'sync' | 'action';
  name: string;
  /** Bundles of the integration's scripts by `<syncs|actions>/<name>` (an action the script triggers runs locally too). */
  bundles: ReadonlyMap<string, string>;
  connectionId: string;
  backend: LocalBackend;
  lastSyncDate?: string | undefined;
  input?: unknown;
  temporal: { address: string; namespace: string } & Omit<TemporalConnectionOptions, 'address'>;
  /** The service's workflow bundle; bundled here when omitted (takes seconds). */
  workflowBundle?: WorkflowBundleWithSourceMap | { codePath: string } | { code: string } | undefined;
  onEvent?: (event: LocalRunEvent) => void;
}

export interface LocalRunResult {
  ok: boolean;
  /** The run's failure: its code (the failure type the service would record) and message. */
  failure?: { code: string; message: string };
  /** An action's output. */
  output?: unknown;
  /** Records saved per output model, deduplicated by id (the last one wins), in the order first saved. */
  records: Record<string, Record<string, unknown>[]>;
  /** Ids deleted per model. */
  deleted: Record<string, (string | number)[]>;
  /** Per model, every record of every batchSave call, in call order (not deduplicated). */
  batchSaves: Record<string, Record<string, unknown>[]>;
  /** Per model, every record of every batchDelete call, in call order. */
  batchDeletes: Record<string, Record<string, unknown>[]>;
  /** One line per bad field of a saved record (checked against its model). */
  invalid: string[];
  logs: { level: string; message: string }[];
  exchanges: Exchange[];
  /** What the script wrote to the connection's metadata (not applied to the connection). */
  metadataWrites: { kind: 'set' | 'update'; metadata: Record<string, unknown> }[];
}

const LOCAL_ENVIRONMENT = 'local';

let runtimeInstalled = false;
function quietRuntime(): void {
  if (runtimeInstalled) return;
  runtimeInstalled = true;
  try {
    // Warnings on stderr: stdout is the command's answer.
    installServiceRuntime({ logger: createLogger({ level: 'warn', destination: 'stderr' }) });
  } catch {
    // Installed already by the host process (a test harness): its logger stays.
  }
}

export function scriptKey(kind: 'sync' | 'action', name: string): string {
  return `${kind === 'sync' ? 'syncs' : 'actions'}/${name}`;
}

function describeRequest(request: HttpRequestInput): string {
  const params = new URLSearchParams(
    Object.entries(request.config.params ?? {}).map(([key, value]): [string, string] => [key, String(value)]),
  ).toString();
  return `${request.method} ${request.config.endpoint}${params === '' ? '' : `?${params}`}`;
}

/** Runs one script locally; never writes outside this process. */
export async function runLocally(options: LocalRunOptions): Promise<LocalRunResult> {
  const { config, integration, kind, name, bundles, backend } = options;
  const emit = options.onEvent ?? (() => undefined);
  const integrationConfig = config.integrations.find((candidate) => candidate.id === integration);
  if (!integrationConfig) throw new Error(`service.yaml has no integration '${integration}'`);
  const sync = kind === 'sync' ? integrationConfig.syncs.find((candidate) => candidate.name === name) : undefined;
  const action = kind === 'action' ? integrationConfig.actions.find((candidate) => candidate.name === name) : undefined;
  if (!sync && !action) throw new Error(`integration '${integration}' has no ${kind} '${name}' in service.yaml`);
  if (!bundles.has(scriptKey(kind, name))) throw new Error(`no bundle for ${integration}/${scriptKey(kind, name)}`);

  const models = modelIndex(config.models);
  const result: LocalRunResult = {
    ok: true,
    records: {},
    deleted: {},
    batchSaves: {},
    batchDeletes: {},
    invalid: [],
    logs: [],
    exchanges: [],
    metadataWrites: [],
  };
  const saved = new Map<string, Map<string, Record<string, unknown>>>();
  let metadata: Record<string, unknown> | undefined;
  const zero = (): WriteSummary => ({ added: 0, updated: 0, deleted: 0, unchanged: 0 });

  const activities = {
    loadScript(hash: string): Promise<{ code: string; budget: string }> {
      const code = bundles.get(hash);
      if (code === undefined) throw ApplicationFailure.nonRetryable(`no local bundle ${hash}`, 'invalid_script');
      const budget = budgetFunctionName(code);
      try {
        return Promise.resolve({ code: instrumentScript(code, budget), budget });
      } catch (error) {
        throw ApplicationFailure.nonRetryable(
          `the bundle of ${hash} does not parse: ${error instanceof Error ? error.message : String(error)}`,
          'invalid_script',
        );
      }
    },
    async httpRequest(_scope: unknown, request: HttpRequestInput): Promise<HttpResult> {
      const started = Date.now();
      try {
        const response = await backend.httpRequest(request);
        result.exchanges.push({ request, response, ms: Date.now() - started });
        emit({
          kind: 'request',
          text: `${describeRequest(request)} → ${response.status} (${Date.now() - started} ms)`,
        });
        return response;
      } catch (error) {
        const failure =
          error instanceof ApplicationFailure
            ? {
                type: error.type ?? 'http_error',
                message: error.message,
                nonRetryable: error.nonRetryable === true,
                details: [...(error.details ?? [])],
              }
            : { type: 'http_error', message: String(error), nonRetryable: false, details: [] };
        result.exchanges.push({ request, failure, ms: Date.now() - started });
        emit({ kind: 'request', text: `${describeRequest(request)} → ${failure.type}: ${failure.message}` });
        throw error;
      }
    },
    saveRecords(input: { model: string; records: Record<string, unknown>[] }): Promise<WriteSummary> {
      const invalid = checkRecords(input.records, input.model, models);
      const lines = formatInvalidRecords(input.model, invalid);
      result.invalid.push(...lines);
      (result.batchSaves[input.model] ??= []).push(...input.records);
      const byId = saved.get(input.model) ?? new Map<string, Record<string, unknown>>();
      saved.set(input.model, byId);
      const summary = zero();
      for (const record of input.records) {
        const id = String(record['id']);
        if (byId.has(id)) summary.updated++;
        else summary.added++;
        byId.set(id, record);
      }
      emit({
        kind: 'save',
        text: `batchSave ${input.model} ×${input.records.length} (${byId.size} in this run)${invalid.length > 0 ? `, ${invalid.length} breaking the model` : ''}`,
      });
      for (const line of lines) emit({ kind: 'save', text: `  invalid: ${line}` });
      return Promise.resolve(summary);
    },
    deleteRecords(input: { model: string; records: Record<string, unknown>[] }): Promise<WriteSummary> {
      const ids = input.records.map((record) => record['id'] as string | number);
      (result.batchDeletes[input.model] ??= []).push(...input.records);
      (result.deleted[input.model] ??= []).push(...ids);
      emit({ kind: 'delete', text: `batchDelete ${input.model} ×${ids.length}` });
      return Promise.resolve({ ...zero(), deleted: ids.length });
    },
    // No cache: deletes a full sync would infer are not known here.
    markUnseenDeleted: () => Promise.resolve(zero()),
    clearRecords: () => Promise.resolve(0),
    forgetSteps: () => Promise.resolve(),
    beginRun: () => Promise.resolve(),
    countRecords(input: { models: string[] }): Promise<Record<string, number>> {
      return Promise.resolve(Object.fromEntries(input.models.map((model) => [model, saved.get(model)?.size ?? 0])));
    },
    writeLogs(_context: unknown, entries: ScriptLogEntry[]): Promise<void> {
      for (const entry of entries) {
        result.logs.push({ level: entry.level, message: entry.message });
        emit({ kind: 'log', text: `[${entry.level}] ${entry.message}` });
      }
      return Promise.resolve();
    },
    getEnvironmentVariables: () => backend.getEnvironmentVariables(),
    getIntegration: () => backend.getIntegration(),
    getConnection: (_scope: unknown, flags: { forceRefresh: boolean; refreshToken: boolean }) =>
      backend.getConnection(flags),
    async getMetadata(): Promise<Record<string, unknown>> {
      metadata ??= await backend.getMetadata();
      return structuredClone(metadata);
    },
    async setMetadata(_scope: unknown, next: Record<string, unknown>): Promise<void> {
      metadata = structuredClone(next);
      result.metadataWrites.push({ kind: 'set', metadata: next });
      emit({ kind: 'metadata', text: `setMetadata ${JSON.stringify(next)} (not applied to the connection)` });
      return Promise.resolve();
    },
    async updateMetadata(_scope: unknown, next: Record<string, unknown>): Promise<void> {
      metadata = { ...(metadata ?? (await backend.getMetadata())), ...structuredClone(next) };
      result.metadataWrites.push({ kind: 'update', metadata: next });
      emit({ kind: 'metadata', text: `updateMetadata ${JSON.stringify(next)} (not applied to the connection)` });
    },
    resolveAction(request: { actionName: string }): Promise<ActionDefinition> {
      const key = scriptKey('action', request.actionName);
      if (!bundles.has(key)) {
        throw ApplicationFailure.nonRetryable(
          `integration ${integration} has no local action ${request.actionName}`,
          'action_not_found',
        );
      }
      return Promise.resolve({
        environmentId: LOCAL_ENVIRONMENT,
        integrationId: integration,
        actionName: request.actionName,
        scriptHash: key,
      });
    },
  };

  quietRuntime();
  const taskQueue = `local-run-${randomUUID()}`;
  const nativeConnection = await connectWorker(options.temporal);
  const connection = await connectTemporal(options.temporal);
  try {
    const workflowBundle = options.workflowBundle ?? (await bundleWorkflows());
    const dataConverter = { failureConverterPath: FAILURE_CONVERTER_PATH };
    const common = {
      connection: nativeConnection,
      namespace: options.temporal.namespace,
      activities,
      workflowBundle,
      dataConverter,
    };
    const workers = [
      await createWorker({ ...common, taskQueue }),
      await createWorker({ ...common, taskQueue: actionTaskQueue(taskQueue) }),
    ];
    const client = new Client({ connection, namespace: options.temporal.namespace, dataConverter });
    const running = workers.map((worker) => worker.run());
    try {
      const workflowId = `local:${integration}:${options.connectionId}:${name}:${randomUUID()}`;
      const scope = {
        environmentId: LOCAL_ENVIRONMENT,
        integrationId: integration,
        connectionId: options.connectionId,
      };
      if (sync) {
        // The definition a deploy would give the workflows (record_validation included).
        const definition = syncDefinition(LOCAL_ENVIRONMENT, sync, scriptKey('sync', sync.name), config.models);
        const input: RunSyncInput = {
          definition,
          connectionId: options.connectionId,
          mode: 'incremental',
          lastSyncDate: options.lastSyncDate,
        };
        await client.workflow.execute('runSync', { taskQueue, workflowId, args: [input] });
      } else if (action) {
        const input: RunActionInput = {
          definition: { ...scope, actionName: action.name, scriptHash: scriptKey('action', action.name) },
          connectionId: options.connectionId,
          input: options.input,
          ledgerCut: true,
          taskCutByBody: true,
          cutAtGates: true,
          gatedChildrenAndClock: true,
        };
        result.output = await client.workflow.execute('runAction', {
          taskQueue: actionTaskQueue(taskQueue),
          workflowId,
          args: [input],
        });
      }
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      const cause = error.cause;
      result.ok = false;
      result.failure =
        cause instanceof ApplicationFailure
          ? {
              code: cause.type ?? 'script_error',
              message:
                cause.details?.length && cause.type === 'action_script_failure'
                  ? `${cause.message} ${JSON.stringify(cause.details[0])}`
                  : cause.message,
            }
          : { code: 'run_failed', message: cause?.message ?? error.message };
    } finally {
      for (const worker of workers) if (worker.getState() === 'RUNNING') worker.shutdown();
      await Promise.allSettled(running);
    }
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
  for (const [model, byId] of saved) result.records[model] = [...byId.values()];
  return result;
}
