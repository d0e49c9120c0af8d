/**
 * The run workflow: one execution of a sync or an action. It fetches the deployed bundle by content
 * hash through a step (so a replay after a redeploy sees the code it started with), evaluates it
 * inside the workflow sandbox and hands it `svc`. Whatever the script throws becomes a typed,
 * non-retryable failure of this run only.
 */
import { ApplicationFailure, defineSignal, isCancellation, setHandler, workflowInfo } from '@temporalio/workflow';
import type { WriteSummary } from '../src/records/types.js';
import {
  SCRIPT_INCIDENT_SIGNAL,
  type RunActionInput,
  type RunSyncInput,
  type SyncRunResult,
} from '../src/runtime/definitions.js';
import { PaginationError } from '../src/runtime/paginate.js';
import { ActionError, type ServiceAction, type ServiceSync } from '../src/runtime/public.js';
import type { LoadedScript } from '../activities/runtime.js';
import { createScriptBudget, type ScriptBudget } from './scriptBudget.js';
import { createSvc, OperationError, type SvcRuntime } from './svc.js';

type ScriptFunction = (svc: ServiceSync | ServiceAction, input?: unknown) => unknown;

// The only module a bundle may require: the runtime's public surface, as scripts import it.
const RUNTIME_MODULE = 'integration-service/runtime';

/**
 * Evaluates a CommonJS bundle string inside this sandbox and returns its default export. Node's
 * globals are not there to begin with; the few that a bundler's output may probe are shadowed too.
 */
export function evaluateBundle(loaded: LoadedScript | string, name: string, budget: ScriptBudget): ScriptFunction {
  // Runs started before loop protection recorded the bundle as a plain string; they replay it as such.
  const { code, budget: budgetName } =
    typeof loaded === 'string' ? { code: loaded, budget: '__svcBudgetUnused' } : loaded;
  const module: { exports: Record<string, unknown> } = { exports: {} };
  const requireShim = (id: string): unknown => {
    if (id === RUNTIME_MODULE) return { ActionError };
    throw new OperationError('invalid_script', `script ${name} requires "${id}": scripts cannot import modules`);
  };
  let factory: (...args: unknown[]) => unknown;
  try {
    // eslint-disable-next-line @typescript-eslint/no-implied-eval -- evaluating the deployed bundle is the point
    factory = new Function('module', 'exports', 'require', 'process', 'global', budgetName, code) as typeof factory;
  } catch (error) {
    throw ApplicationFailure.create({
      type: 'invalid_script',
      nonRetryable: true,
      message: `script ${name} does not parse: ${error instanceof Error ? error.message : String(error)}`,
    });
  }
  try {
    factory(module, module.exports, requireShim, undefined, undefined, budget.tick);
  } catch (error) {
    throw scriptFailure(error, name);
  }
  const exported = module.exports['default'] ?? module.exports;
  if (typeof exported !== 'function') {
    throw ApplicationFailure.create({
      type: 'invalid_script',
      nonRetryable: true,
      message: `script ${name} has no default-exported function`,
    });
  }
  return exported as ScriptFunction;
}

function isActionError(error: unknown): error is ActionError {
  return (
    error instanceof ActionError ||
    (error instanceof Error &&
      (error as { type?: unknown }).type === 'action_script_failure' &&
      typeof (error as { payload?: unknown }).payload === 'object')
  );
}

/** Whatever a script threw, as the run's failure: typed, non-retryable, with a message that says where. */
export function scriptFailure(error: unknown, name: string): unknown {
  // Cancellation and Temporal's own failures (history limit guard included) pass through unchanged.
  if (isCancellation(error) || error instanceof ApplicationFailure) return error;
  if (isActionError(error)) {
    return ApplicationFailure.create({
      type: 'action_script_failure',
      nonRetryable: true,
      message: error.message,
      details: [error.payload],
    });
  }
  if (error instanceof OperationError || error instanceof PaginationError) {
    return ApplicationFailure.create({ type: error.code, nonRetryable: true, message: `${name}: ${error.message}` });
  }
  // Duck-typed: an error raised by the worker's own realm (a refused escape, a Node error) is not an
  // instance of this sandbox's Error.
  const errorLike = isErrorLike(error) ? error : undefined;
  const message = errorLike
    ? `${errorLike.name}: ${errorLike.message}${typeof errorLike.code === 'string' ? ` (${errorLike.code})` : ''}`
    : `a non-Error value was thrown: ${safeString(error)}`;
  return ApplicationFailure.create({
    type: 'script_error',
    nonRetryable: true,
    message: `script ${name} failed: ${message}`,
    details:
      typeof errorLike?.stack === 'string' ? [{ stack: errorLike.stack.split('\n').slice(0, 12).join('\n') }] : [],
  });
}

function isErrorLike(value: unknown): value is { name: string; message: string; stack?: unknown; code?: unknown } {
  if (value instanceof Error) return true;
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as { name?: unknown; message?: unknown };
  return typeof candidate.name === 'string' && typeof candidate.message === 'string';
}

function safeString(value: unknown): string {
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}

// Sent by a worker process whose workflow thread died while this run was executing
// (src/temporal/scriptThreads.ts). Only its presence in the history matters, to the watchdog.
const scriptIncident = defineSignal<[unknown]>(SCRIPT_INCIDENT_SIGNAL);

async function execute(
  runtime: SvcRuntime,
  budget: ScriptBudget,
  name: string,
  scriptHash: string,
  call: (script: ScriptFunction) => unknown,
): Promise<unknown> {
  setHandler(scriptIncident, () => undefined);
  try {
    const loaded = await runtime.step('loadScript', `loadScript ${scriptHash.slice(0, 12)}`, [scriptHash]);
    const script = evaluateBundle(loaded, name, budget);
    // A script that catches the budget's error (or never settles after it) still ends here.
    return await Promise.race([call(script), budget.exhausted]);
  } catch (error) {
    // A run whose budget ran out fails in this very workflow task, without another step: a later
    // replay of the task would run the endless stretch again, without the live clock to stop it.
    const exhausted = budget.failure();
    if (exhausted) throw exhausted;
    await runtime.flushLogs().catch(() => undefined);
    throw scriptFailure(error, name);
  } finally {
    budget.finished();
  }
}

/** One execution of a sync script for one connection. */
export async function runSync(input: RunSyncInput): Promise<SyncRunResult> {
  const { definition, connectionId } = input;
  const info = workflowInfo();
  const startedAt = new Date().toISOString();
  const full = definition.syncType === 'full' || input.mode !== 'incremental';
  const scope = { environmentId: definition.environmentId, integrationId: definition.integrationId, connectionId };
  const budget = createScriptBudget(definition.syncName);
  const runtime = createSvc({
    budget,
    kind: 'sync',
    scope,
    scriptName: definition.syncName,
    runId: info.workflowId,
    models: definition.models,
    options: input.options ?? {},
    lastSyncDate: full || !input.lastSyncDate ? undefined : new Date(input.lastSyncDate),
    webhook: input.webhook,
  });
  const syncScope = { ...scope, syncName: definition.syncName, runId: info.workflowId };

  if (input.mode === 'full_refresh_and_clear_cache') {
    await runtime.step('clearRecords', 'clearCache', [syncScope]);
  }
  await runtime.step('beginRun', 'beginRun', [syncScope]);
  await execute(runtime, budget, definition.syncName, definition.scriptHash, (script) => script(runtime.svc));

  const models: Record<string, WriteSummary> = {};
  for (const model of definition.models) {
    models[model] = runtime.summaries[model] ?? { added: 0, updated: 0, deleted: 0, unchanged: 0 };
  }
  // Deletes are inferred only from a complete picture: a successful run of a full sync. A webhook
  // run sees one event, not the data set, so it never infers deletes.
  if (definition.syncType === 'full' && definition.trackDeletes && !input.webhook) {
    for (const model of definition.models) {
      const marked = await runtime.step('markUnseenDeleted', `trackDeletes ${model}`, [{ ...syncScope, model }]);
      models[model] = { ...models[model]!, deleted: models[model]!.deleted + marked.deleted };
    }
  }
  const recordCounts = await runtime.step('countRecords', 'countRecords', [{ ...scope, models: definition.models }]);
  await runtime.flushLogs();
  return {
    runId: info.workflowId,
    mode: input.mode,
    full,
    startedAt,
    finishedAt: new Date().toISOString(),
    models,
    recordCounts,
    operations: runtime.operations(),
  };
}

/** One execution of an action: the script's output, or a failure of type `action_script_failure`. */
export async function runAction(input: RunActionInput): Promise<unknown> {
  const { definition, connectionId } = input;
  const budget = createScriptBudget(definition.actionName);
  const runtime = createSvc({
    budget,
    kind: 'action',
    scope: { environmentId: definition.environmentId, integrationId: definition.integrationId, connectionId },
    scriptName: definition.actionName,
    runId: workflowInfo().workflowId,
    models: [],
    options: input.options ?? {},
    lastSyncDate: undefined,
    webhook: undefined,
  });
  const output = await execute(runtime, budget, definition.actionName, definition.scriptHash, (script) =>
    script(runtime.svc, input.input),
  );
  await runtime.flushLogs();
  return output;
}
