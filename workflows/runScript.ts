/**
 * The run workflow: one execution of a sync or an action. It fetches the deployed bundle by content
 * hash through a step (so a replay after a redeploy sees the code it started with), evaluates it in a
 * realm of its own (workflows/scriptRealm.ts) and hands it `svc`. Whatever the script throws becomes a
 * typed, non-retryable failure of this run only.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  defineSignal,
  isCancellation,
  patched,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import { isRealmErrorCode, isRunErrorCode, type RunErrorCode } from '../src/errors.js';
import type { WriteSummary } from '../src/records/types.js';
import {
  SCRIPT_INCIDENT_SIGNAL,
  type LoadedScript,
  type RunActionInput,
  type RunSyncInput,
  type SyncRunResult,
} from '../src/runtime/definitions.js';
import { createScriptBudget, type ScriptBudget } from './scriptBudget.js';
import { createScriptRealm, type ScriptFailureDescription } from './scriptRealm.js';
import {
  createSvc,
  LEDGER_CUT_PATCH,
  OperationError,
  TASK_CUT_BY_BODY_PATCH,
  CUT_AT_GATES_PATCH,
  GATED_CHILDREN_AND_CLOCK_PATCH,
  CUT_ASKS_LEDGER_PATCH,
  type SvcRuntime,
} from './svc.js';
import { ExecutionChain, RUN_CONTINUES, type ChainContext } from './runChain.js';

const OPERATION_ERRORS = new Set(['OperationError', 'RequestError', 'PaginationError']);

/** The patch of the step that clears a sync's checkpoint at the start of a full run (issue 32). */
const CLEAR_CHECKPOINT_ON_FULL = 'clear-checkpoint-on-full-run';
/** The patch of the bookkeeping steps' reserve past the history budget (svc.ts BOOKKEEPING_RESERVE_EVENTS). */
const BOOKKEEPING_RESERVE = 'bookkeeping-reserve';

/** What a script threw, as the run's failure: typed, non-retryable, with a message that says where. */

export function scriptFailure(
  failure: ScriptFailureDescription,
  name: string,
  issued: (code: string) => boolean = () => false,
): ApplicationFailure {
  if (failure.kind === 'action_error') {
    return ApplicationFailure.create({
      type: 'action_script_failure' satisfies RunErrorCode,
      nonRetryable: true,
      message: failure.message,
      details: [failure.payload ?? {}],
    });
  }
  if (failure.kind === 'error' && isRunErrorCode(failure.code)) {
    // A code counts only when an operation of this run failed with it or the realm raised it (a realm's
    // code, src/errors.ts, counts whatever error carries it): a script that throws
    // { name: 'OperationError', code: 'anything' } or { code: 'script_memory_limit' } fails with script_error.
    if ((OPERATION_ERRORS.has(failure.name ?? '') || isRealmErrorCode(failure.code)) && issued(failure.code)) {
      return ApplicationFailure.create({
        type: failure.code,
        nonRetryable: true,
        message: `${name}: ${failure.message}`,
      });
    }
  }
  const message =
    failure.kind === 'value'
      ? `a non-Error value was thrown: ${failure.message}`
      : `${failure.name ?? 'Error'}: ${failure.message}${typeof failure.code === 'string' ? ` (${failure.code})` : ''}`;
  return ApplicationFailure.create({
    type: 'script_error' satisfies RunErrorCode,
    nonRetryable: true,
    message: `script ${name} failed: ${message}`,
    details: typeof failure.stack === 'string' ? [{ stack: failure.stack }] : [],
  });
}

// Sent by a worker process whose workflow thread died while this run was executing
// (src/temporal/scriptThreads.ts). Only its presence in the history matters, to the watchdog.
const scriptIncident = defineSignal<[unknown]>(SCRIPT_INCIDENT_SIGNAL);

/**
 * Stops a run from outside its script (the sync entity, on a runaway verdict): the script is never
 * answered again and the run fails with the given failure.
 */
export interface RunStop {
  /** Calls `stop` with the failure once the run is to stop (at once when it already is). */
  onStop(stop: (failure: ApplicationFailure) => void): void;
}

async function execute(
  runtime: SvcRuntime,
  budget: ScriptBudget,
  name: string,
  scriptHash: string,
  inputJson: string | undefined,
  preloaded?: LoadedScript,
  stop?: RunStop,
): Promise<unknown> {
  // A failure the script must not be able to swallow (history limit, spent budget, an interrupted
  // realm) ends the run whatever the script does next.
  let fatal: (failure: ApplicationFailure) => void = () => undefined;
  const ended = new Promise<never>((_, reject) => {
    fatal = reject;
  });
  ended.catch(() => undefined);
  try {
    const loaded =
      preloaded ??
      (await runtime.step('loadScript', `loadScript ${scriptHash.slice(0, 12)}`, [
        scriptHash,
        runtime.shape.providerConfigKey,
      ]));
    runtime.useExecutionLimits(loaded);
    const realm = createScriptRealm({
      scriptName: name,
      budget,
      operations: runtime.scriptOperations,
      log: runtime.bufferLog,
      fatal,
      now: runtime.now,
    });
    stop?.onStop((failure) => realm.stop(failure));
    const outcome = await Promise.race([
      realm.run(loaded, { ...runtime.shape, provider: loaded.provider }, inputJson),
      budget.exhausted,
      ended,
    ]);
    if (!outcome.ok) throw scriptFailure(outcome.failure, name, (code) => realm.issued(code));
    return outcome.json === undefined ? undefined : (JSON.parse(outcome.json) as unknown);
  } catch (error) {
    // A run whose budget ran out fails in this very workflow task, without another step: a later
    // replay of the task would run the endless stretch again, without the live clock to stop it.
    const exhausted = budget.failure();
    if (exhausted) throw exhausted;
    await runtime.flushLogs().catch(() => undefined);
    if (isCancellation(error) || error instanceof ApplicationFailure) throw error;
    if (error instanceof OperationError) {
      throw ApplicationFailure.create({ type: error.code, nonRetryable: true, message: `${name}: ${error.message}` });
    }
    throw ApplicationFailure.create({
      type: 'script_error' satisfies RunErrorCode,
      nonRetryable: true,
      message: `script ${name} failed: ${error instanceof Error ? error.message : String(error)}`,
    });
  } finally {
    budget.finished();
  }
}

/** One execution of a sync script for one connection: a workflow of its own (runs of entities recorded before issue 31, `service dryrun`, benchmarks). */
export async function runSync(input: RunSyncInput): Promise<SyncRunResult> {
  setHandler(scriptIncident, () => undefined);
  return runSyncScript(input, { runId: workflowInfo().workflowId });
}

/** Where a sync run runs: its own workflow (`runSync`), or inside its sync entity's execution. */
export interface SyncRunPlace {
  /** The run's id: the records' run, the logs', the run history's. */
  runId: string;
  /** Inside the entity's execution (see SvcContext.inline). */
  inline?: boolean;
  /** The entity's version has the step ledger's bytes cut (SvcContext.ledgerCut); only with `inline`. */
  ledgerCut?: boolean;
  /** The entity's version has the task cut by recorded body (SvcContext.taskCutByBody); only with `inline`. */
  taskCutByBody?: boolean;
  /** The entity's version decides the cuts at gates (SvcContext.cutAtGates); only with `inline`. */
  cutAtGates?: boolean;
  /** The entity's version gates child starts and the clock (SvcContext.gatedChildrenAndClock); only with `inline`. */
  gatedChildrenAndClock?: boolean;
  /** The entity's version asks the ledger before a cut at a saveCheckpoint (SvcContext.cutAsksLedger); only with `inline`. */
  cutAsksLedger?: boolean;
  fresh?: boolean;
  /** The run took its fence already (the entity's `beginRun` that committed it). */
  begun?: boolean;
  /** The run's script, loaded by that `beginRun` (run model version 4): the run takes no `loadScript` step. */
  script?: LoadedScript;
  onActive?: () => void;
  stop?: RunStop;
  /** Told the run's loop-protection budget, which says whether the script ran past it. */
  budget?: (budget: ScriptBudget) => void;
  /** The run's earlier executions when it continues past one (issue 32); a run of its own workflow cannot. */
  chain?: ChainContext;
}

/** A sync script's run: clear (a full resync), take the records' fence, the script, track deletes, count. */
export async function runSyncScript(input: RunSyncInput, place: SyncRunPlace): Promise<SyncRunResult> {
  const { definition, connectionId } = input;
  const { runId } = place;
  const startedAt = new Date().toISOString();
  const full = definition.syncType === 'full' || input.mode !== 'incremental';
  const scope = { environmentId: definition.environmentId, integrationId: definition.integrationId, connectionId };
  const budget = createScriptBudget(definition.syncName);
  place.budget?.(budget);
  const chain = new ExecutionChain(place.chain ?? { executions: [], canContinue: false });
  const firstExecution = chain.index === 0;
  // A full resync starts from the beginning: the sync's checkpoint goes (issue 32). A run of its own
  // workflow (runSync, a version 1 entity's child) asks patched() here, before its first step, where no
  // workflow-task heartbeat can move the marker (svc.ts, the pagination patch): its histories recorded
  // before this step replay without it (test/runtime/runReplay.test.ts). A run inside its entity asks
  // no patched() (SvcContext.inline).
  const clearsCheckpoint =
    input.mode !== 'incremental' && firstExecution && (place.inline === true || patched(CLEAR_CHECKPOINT_ON_FULL));
  // The same for the bookkeeping reserve; a run inside its entity has it from version 3 on.
  const bookkeepingReserve = place.inline === true ? place.chain?.legacy !== true : patched(BOOKKEEPING_RESERVE);
  // The same for the step ledger's bytes cut; a run inside its entity has it from version 5 on.
  const ledgerCut = place.inline === true ? place.ledgerCut === true : patched(LEDGER_CUT_PATCH);
  // The same for the task cut by recorded body; a run inside its entity has it from version 6 on.
  const taskCutByBody = place.inline === true ? place.taskCutByBody === true : patched(TASK_CUT_BY_BODY_PATCH);
  // The same for the cuts at gates; a run inside its entity has them from version 7 on.
  const cutAtGates = place.inline === true ? place.cutAtGates === true : patched(CUT_AT_GATES_PATCH);
  // The same for the gated child starts and clock; a run inside its entity has them from version 8 on.
  const gatedChildrenAndClock =
    place.inline === true ? place.gatedChildrenAndClock === true : patched(GATED_CHILDREN_AND_CLOCK_PATCH);
  // The same for asking the ledger before a cut at a saveCheckpoint; a run inside its entity has it from version 9 on.
  const cutAsksLedger = place.inline === true ? place.cutAsksLedger === true : patched(CUT_ASKS_LEDGER_PATCH);
  const runtime = createSvc({
    chain,
    bookkeepingReserve,
    budget,
    kind: 'sync',
    scope,
    scriptName: definition.syncName,
    runId,
    models: definition.models,
    options: input.options ?? {},
    lastSyncDate: full || !input.lastSyncDate ? undefined : new Date(input.lastSyncDate),
    // What the script sees of the queued webhook (not its queue entry).
    webhook: input.webhook && {
      type: input.webhook.type,
      payload: input.webhook.payload,
      receivedAt: input.webhook.receivedAt,
    },
    recordValidation: definition.recordValidation,
    ledgerCut,
    taskCutByBody,
    cutAtGates,
    gatedChildrenAndClock,
    cutAsksLedger,
    ...(place.inline ? { inline: true } : {}),
    ...(place.fresh === undefined ? {} : { fresh: place.fresh }),
    ...(place.onActive ? { onActive: place.onActive } : {}),
  });
  const syncScope = { ...scope, syncName: definition.syncName, runId };

  if (input.mode === 'full_refresh_and_clear_cache' && firstExecution) {
    await runtime.step('clearRecords', 'clearCache', [syncScope]);
  }
  if (!place.begun) await runtime.step('beginRun', 'beginRun', [syncScope]);
  const queueId = input.webhook?.queueId;
  if (input.webhook?.stored && queueId !== undefined) {
    // A larger payload waited in the queue, not in the entity: the run loads it (src/webhooks/inboundQueue.ts).
    const payload = await runtime
      .step('loadQueuedWebhook', `webhook ${input.webhook.type}`, [{ ...syncScope, queueId }])
      .catch((error: unknown) => {
        // The run fails with the step's own code (webhook_expired), not a generic activity failure.
        throw error instanceof ActivityFailure && error.cause instanceof ApplicationFailure ? error.cause : error;
      });
    runtime.shape.webhook = { ...(runtime.shape.webhook as object), payload };
  }
  if (clearsCheckpoint) {
    await runtime.step('saveCheckpoint', 'clearCheckpoint (full resync)', [syncScope, null]);
  }
  try {
    await execute(runtime, budget, definition.syncName, definition.scriptHash, undefined, place.script, place.stop);
  } catch (error) {
    if (!(error instanceof ApplicationFailure && error.type === RUN_CONTINUES)) throw error;
    // Ended at a step boundary so that the run continues in the entity's next execution (workflows/runChain.ts).
    await runtime.flushLogs();
    return {
      runId,
      mode: input.mode,
      full,
      startedAt,
      finishedAt: new Date().toISOString(),
      models: { ...runtime.summaries },
      recordCounts: {},
      operations: runtime.operations(),
      continuation: chain.handOff(),
    };
  }

  const models: Record<string, WriteSummary> = {};
  for (const model of definition.models) {
    models[model] = runtime.summaries[model] ?? { added: 0, updated: 0, deleted: 0, unchanged: 0 };
  }
  // Deletes are inferred only from a complete picture: a successful run of a full sync. A webhook
  // run sees one event, not the data set, so it never infers deletes.
  // A run that continued past one execution saw the data set across all of them (issue 32); one that
  // began from a checkpoint an earlier run saved did not see it whole itself, so it infers nothing.
  if (definition.syncType === 'full' && definition.trackDeletes && !input.webhook && !chain.sawEverything) {
    runtime.bufferLog(
      'warn',
      'track_deletes: this run resumed from a checkpoint an earlier run saved, so it did not see every record itself and marks none deleted; clear the checkpoint at the end of a full pass (svc.clearCheckpoint)',
    );
  } else if (definition.syncType === 'full' && definition.trackDeletes && !input.webhook) {
    const earlier = chain.context.executions;
    for (const model of definition.models) {
      const marked = await runtime.step('markUnseenDeleted', `trackDeletes ${model}`, [
        { ...syncScope, model, ...(earlier.length > 0 ? { alsoSeenBy: earlier } : {}) },
      ]);
      models[model] = { ...models[model]!, deleted: models[model]!.deleted + marked.deleted };
    }
  }
  const recordCounts = await runtime.step('countRecords', 'countRecords', [{ ...scope, models: definition.models }]);
  await runtime.flushLogs();
  await runtime.finish();
  return {
    runId,
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
  setHandler(scriptIncident, () => undefined);
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
    depth: input.depth ?? 0,
    ledgerCut: input.ledgerCut === true,
    taskCutByBody: input.taskCutByBody === true,
    cutAtGates: input.cutAtGates === true,
    gatedChildrenAndClock: input.gatedChildrenAndClock === true,
  });
  // The bundle the API handed over (src/temporal/syncControl.ts), only to a run a client started.
  const preloaded =
    input.script?.hash === definition.scriptHash && !workflowInfo().parent && !input.depth ? input.script : undefined;
  const output = await execute(
    runtime,
    budget,
    definition.actionName,
    definition.scriptHash,
    // undefined for an action triggered without input: the script's input parameter stays undefined.
    input.input === undefined ? undefined : JSON.stringify(input.input),
    preloaded,
  );
  await runtime.flushLogs();
  // No finish() here: an action's few steps are forgotten by the periodic purge instead of costing
  // it a round trip through the server (bench/action.ts).
  return output;
}
