/**
 * The sync entity workflow, one per (environment, integration, connection, sync): waits for the next
 * run time or a signal, runs the sync's script, records the outcome, and continues as new so its own
 * history stays small: one execution per run. Its state survives continue-as-new through its input.
 * What to do when is decided by workflows/syncEntity.ts (pure, tested without Temporal); this file is
 * its driver.
 *
 * The run model is a version carried in the input (`version`), never asked of Temporal with
 * `patched()` (on a fresh execution that upserts a search attribute):
 * - version 2 (issue 31): the run runs inside the entity's own execution (runSyncScript), its steps
 *   local activities of the entity, so a scheduled run is a timer, one workflow task of local
 *   activities and the continue-as-new (docs/architecture.md "What a run costs");
 * - absent (version 1): each run a child `runSync`, watched by a `watchRun` activity, its outbound
 *   webhooks a `deliverWebhook` child. Executions started before version 2 finish this way, unchanged
 *   (test/runtime/syncEntityReplay.test.ts replays their histories), and continue as new in version 2.
 */
import {
  ActivityFailure,
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  condition,
  makeContinueAsNewFunc,
  defineQuery,
  log,
  defineSignal,
  proxyActivities,
  setHandler,
  sleep,
  ParentClosePolicy,
  patched,
  proxyLocalActivities,
  proxySinks,
  startChild,
  TerminatedFailure,
  uuid4,
  workflowInfo,
  type LocalActivityOptions,
} from '@temporalio/workflow';
import type { BegunRun, RunCommit, RuntimeActivities } from '../activities/runtime.js';
import type { SyncScope } from '../src/records/types.js';
import { readableSummary } from '../src/runtime/stepSummary.js';
import type { SyncRunActivities } from '../activities/syncRuns.js';
import type { deliverWebhook } from './deliverWebhook.js';
import {
  RUN_WORKFLOW_TASK_TIMEOUT_MS,
  RUNAWAY_VERDICT_SIGNAL,
  SCRIPT_INCIDENT_SIGNAL,
  SYNC_ENTITY_VERSION,
  CHAIN_RULES_VERSION,
  SCRIPT_IN_BEGIN_RUN_VERSION,
  LEDGER_CUT_VERSION,
  TASK_CUT_BY_BODY_VERSION,
  CUT_AT_GATES_VERSION,
  GATED_CHILDREN_AND_CLOCK_VERSION,
  CUT_ASKS_LEDGER_VERSION,
  type LoadedScript,
  type QueuedWebhook,
  type RunawayVerdictSignal,
  type RunOptions,
  type RunSyncInput,
  type RunWatchSinks,
  type SyncDefinition,
  type SyncMode,
  type SyncStatus,
} from '../src/runtime/definitions.js';
import { runSyncScript, type runSync } from './runScript.js';
import { chainOutcome, continuationOf, type RunContinuation } from './runContinuation.js';
import type { ScriptBudget } from './scriptBudget.js';
import { watchTaskQueue } from './taskQueues.js';
import {
  applyEvent,
  createSyncEntity,
  isReady,
  nextStep,
  runEnded,
  runStarted,
  shouldWake,
  statusOf,
  type SyncEntity,
  type SyncEntityEnd,
  type SyncEntityEvent,
  type SyncEntityRules,
  type SyncEntityState,
  type SyncEntityStep,
  type SyncRunOutcome,
} from './syncEntity.js';

export const triggerSignal = defineSignal<[{ mode: SyncMode }]>('trigger');
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const reconfigureSignal = defineSignal<[SyncDefinition]>('reconfigure');
export const webhookSignal = defineSignal<[QueuedWebhook]>('webhook');
export const statusQuery = defineQuery<SyncStatus>('status');
export const runawayVerdictSignal = defineSignal<[RunawayVerdictSignal]>(RUNAWAY_VERDICT_SIGNAL);
// Sent by a worker process whose workflow thread died while this entity's run was executing its script
// (src/temporal/scriptThreads.ts). Only its presence in the history matters, to the watchdog.
const scriptIncidentSignal = defineSignal<[unknown]>(SCRIPT_INCIDENT_SIGNAL);

/** The run model of executions that carry no version: each run a child `runSync`. */
const CHILD_RUNS = 1;

// The watchdog lives as long as the run it watches; it heartbeats every 5 s, so a lost worker is
// noticed within 30 s and the watch resumes on another. On a queue of its own (watchTaskQueue): one
// per open run would otherwise take every activity slot of the main queue.
function watchdogActivities(): Pick<RuntimeActivities, 'watchRun'> {
  return proxyActivities<RuntimeActivities>({
    taskQueue: watchTaskQueue(workflowInfo().taskQueue),
    startToCloseTimeout: '30 days',
    heartbeatTimeout: '30 seconds',
    retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
  });
}

// Why a terminated run was stopped, when the watchdog could not say in time (its activity may have
// been on the worker the run took down; a worker process can stop a run itself, scriptThreads.ts).
const { runawayVerdict } = proxyLocalActivities<RuntimeActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 5 },
});

// One row in the run history: a short database write, retried through a restarting Postgres.
const { recordSyncRun } = proxyLocalActivities<SyncRunActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** Why the watchdog stopped a run (src/temporal/runaway.ts), as the `runawayVerdict` activity returns it. */
type RunawayVerdict = NonNullable<Awaited<ReturnType<RuntimeActivities['runawayVerdict']>>>;

// Executions recorded before a due scheduled run went ahead of queued webhooks replay as they ran.
const SCHEDULE_BEFORE_WEBHOOKS = 'due-schedule-before-webhooks';
// Version 1 executions recorded before a waiting entity continued as new on a long history replay as
// they ran (version 2 always does).
const ROLL_OVER_WHEN_LONG = 'continue-as-new-when-long';

/**
 * A waiting entity (paused, or before its run time) continues as new once its history has this many
 * events, or once Temporal suggests it, instead of only after a run: every signal it hears (webhook,
 * trigger, pause, resume, reconfigure) adds about four events, and Temporal refuses a 10,001st signal
 * to one execution (`history.maximumSignalsPerExecution`) and ends an execution at 51,200 events.
 * 2,000 events is about 500 signals per execution.
 */
export const ENTITY_HISTORY_EVENTS = 2_000;

/** Whether the execution's history is long enough for a waiting entity to start afresh. */
function historyIsLong(): boolean {
  const info = workflowInfo();
  return info.continueAsNewSuggested || info.historyLength >= ENTITY_HISTORY_EVENTS;
}

export interface ManageSyncInput {
  definition: SyncDefinition;
  connectionId: string;
  options?: RunOptions | undefined;
  /** Absent on the first start; set by continue-as-new. */
  state?: SyncEntityState | undefined;
  /** The run model this execution follows (see the file's comment); absent: 1. */
  version?: number | undefined;
  /**
   * A run stopped from outside (a runaway verdict) or by its loop protection ends its execution at
   * once, so that no later workflow task of that execution could execute its script again; the next
   * execution records it (the run history, the outbound webhook) before anything else.
   */
  unfinished?: SyncEntityEnd | undefined;
  /** The run under way continues in this execution (issue 32, workflows/runChain.ts): it starts at once. */
  continuation?: RunContinuation | undefined;
}

export async function manageSync(input: ManageSyncInput): Promise<void> {
  // A version a newer build wrote: run with this build's rules, its history would hold steps the newer
  // build cannot replay. A plain Error fails this workflow task, not the execution: Temporal hands the
  // task again until a worker of the newer build takes it (docs/operations.md "Upgrades").
  if ((input.version ?? CHILD_RUNS) > SYNC_ENTITY_VERSION) {
    throw new Error(
      `this worker knows sync entity versions up to ${SYNC_ENTITY_VERSION}, the execution is of version ` +
        `${String(input.version)}: a newer build started it; that build's workers will take it`,
    );
  }
  if ((input.version ?? CHILD_RUNS) === CHILD_RUNS) return manageSyncWithChildRuns(input);
  return manageSyncInline(input);
}

/** The next execution of the entity, in this code's run model. */
function continueEntity(
  entity: SyncEntity,
  unfinished?: SyncEntityEnd,
  continuation?: RunContinuation,
): Promise<never> {
  // The workflow task timeout of a run (4 s): a dead worker's run is taken over that soon.
  return makeContinueAsNewFunc<typeof manageSync>({ workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS })({
    definition: entity.definition,
    connectionId: entity.connectionId,
    options: entity.options,
    state: entity.state,
    version: SYNC_ENTITY_VERSION,
    ...(unfinished ? { unfinished } : {}),
    ...(continuation ? { continuation } : {}),
  });
}

// Tells the worker executing a run that it is under way there (src/temporal/runWatch.ts).
const { runWatch } = proxySinks<RunWatchSinks>();

// Records the run (GET /sync/runs, metrics) and the outbound webhook deliveries it calls for, in one
// short database step retried through a restarting Postgres.
const { finishSyncRun } = proxyLocalActivities<SyncRunActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '30 seconds' },
});

/** Version 2: the run inside this execution. */
async function manageSyncInline(input: ManageSyncInput): Promise<void> {
  // This instance executes the execution from its first workflow task, and that task's first attempt
  // (nothing replayed, no earlier attempt in the history): no other instance can have executed any
  // step of its run.
  const firstInstance = !workflowInfo().unsafe.isReplaying && workflowInfo().historyLength <= 3;
  // Version 2 executions keep the chain rules they were recorded with (SYNC_ENTITY_VERSION).
  const chainRules = (input.version ?? CHILD_RUNS) >= CHAIN_RULES_VERSION;
  // From version 4 the run's `beginRun` step loads its script too (no `loadScript` step of its own).
  const scriptInBegin = (input.version ?? CHILD_RUNS) >= SCRIPT_IN_BEGIN_RUN_VERSION;
  // From version 5 its runs forget their step ledger's rows past LEDGER_KEPT_BYTES (workflows/svc.ts).
  const ledgerCut = (input.version ?? CHILD_RUNS) >= LEDGER_CUT_VERSION;
  // From version 6 their task cut weighs a response by its body as recorded (workflows/svc.ts).
  const taskCutByBody = (input.version ?? CHILD_RUNS) >= TASK_CUT_BY_BODY_VERSION;
  // From version 7 both cuts are decided at gates, on weights the history fixes (workflows/svc.ts).
  const cutAtGates = (input.version ?? CHILD_RUNS) >= CUT_AT_GATES_VERSION;
  // From version 8 the gates weigh child starts too, and the script's clock stands still while steps are in flight.
  const gatedChildrenAndClock = (input.version ?? CHILD_RUNS) >= GATED_CHILDREN_AND_CLOCK_VERSION;
  // From version 9 a saveCheckpoint at a limit asks the step ledger whether it was executed before (workflows/svc.ts).
  const cutAsksLedger = (input.version ?? CHILD_RUNS) >= CUT_ASKS_LEDGER_VERSION;
  // Every rule as of this code: the version in the input says so.
  const rules: SyncEntityRules = { scheduleBeforeWebhooks: () => true };
  const created = Date.now();
  let entity = createSyncEntity({ ...input, now: created });
  // Every signal of the execution, in the order they were applied: a retried workflow task may have
  // to choose its run again from the ones its first attempt had (see the run's commit below).
  const received: SyncEntityEvent[] = [];
  // A run was ready at some point since the last decision: this task's first attempt may have chosen
  // it even if signals received since (a pause, a new frequency) make it wait now.
  let wasReady = false;
  // Set by a signal once the history is long (ENTITY_HISTORY_EVENTS): a waiting entity then continues
  // as new, so that signals keep being accepted however long it stays paused.
  let rollOver = false;
  const receive = (event: SyncEntityEvent): void => {
    if (isReady(entity, Date.now())) wasReady = true;
    received.push(event);
    entity = applyEvent(entity, event);
    if (!rollOver && historyIsLong()) rollOver = true;
  };
  let verdict: RunawayVerdictSignal | null = null;
  let stopRun: ((failure: ApplicationFailure) => void) | null = null;
  // A pause arrived while this execution's run was under way (issue 32: it stops a run that continues).
  let runUnderway = false;
  let pausedInRun = false;

  setHandler(triggerSignal, ({ mode }) => receive({ type: 'trigger', mode }));
  setHandler(pauseSignal, () => {
    if (runUnderway) pausedInRun = true;
    receive({ type: 'pause' });
  });
  setHandler(resumeSignal, () => receive({ type: 'resume', now: Date.now() }));
  setHandler(reconfigureSignal, (definition) => receive({ type: 'reconfigure', definition }));
  setHandler(webhookSignal, (event) => receive({ type: 'webhook', event }));
  setHandler(scriptIncidentSignal, () => undefined);
  setHandler(runawayVerdictSignal, (found) => {
    // One execution runs one run: a verdict that names another execution is stale. It names the
    // execution by its original run id, which the reset that delivers it keeps (src/temporal/runaway.ts).
    if (verdict !== null || found.runId !== workflowInfo().originalExecutionRunId) return;
    verdict = found;
    stopRun?.(verdictFailure(found));
  });
  setHandler(statusQuery, () => statusOf(entity));

  if (input.unfinished) await finishRun(input.unfinished);

  // The run's commit. A run's steps act on the outside world before the workflow task that chose the
  // run completes, and when that task is retried (its worker died, or it timed out) the signals that
  // arrived meanwhile come before the choice: the retry could choose another run than the one whose
  // steps the first attempt took (their outcomes are in the step ledger under the same indices), or
  // none (a pause). So the run's first step commits what it was chosen from (the signals applied, the
  // time) unless an earlier attempt did, and a retry chooses again from exactly that; the signals
  // after it apply as arriving during the run. A retry that would not run at all asks for the commit
  // when a run was ready at some point of the task (a pause or a new frequency after it: rare).
  type StartRun = Extract<SyncEntityStep, { type: 'startRun' }>;
  let step: StartRun | undefined;
  // The commit this attempt found (a retry), and whether the run was chosen again from it.
  let commit: RunCommit | null = null;
  let chosenAgain = false;
  const choose = (from: RunCommit): StartRun | undefined => {
    const chosen = chooseAgain(input, received, from, rules);
    if (!chosen) return undefined;
    entity = chosen.entity;
    chosenAgain = true;
    return chosen.step;
  };
  // ---- issue 32: a run that continues from the previous execution is the run of this one, at once.
  const continued = input.continuation;
  if (continued) {
    step = { type: 'startRun', input: continued.input, summary: continued.summary };
    entity = { ...entity, run: continued.run };
  }
  // ---- end issue 32
  while (!step) {
    const decided = nextStep(entity, Date.now(), rules);
    entity = decided.entity;
    const next = decided.step;
    if (next.type === 'startRun') {
      step = next;
      break;
    }
    if (wasReady) {
      wasReady = false;
      // Unanswerable (a refusal, never a passing outage, which is retried): this attempt's choice stands.
      commit = await committedRun().catch(() => null);
      step = commit ? choose(commit) : undefined;
      if (step) break;
      commit = null;
    }
    // Nothing to run (not even a run an earlier attempt of this task began: above) and a long
    // history: start afresh with the same state (the queued webhooks, the schedule).
    if (rollOver) {
      await condition(allHandlersFinished);
      return continueEntity(entity);
    }
    const waiting = entity;
    const woken = (): boolean => rollOver || shouldWake(waiting, entity, Date.now());
    if (next.timeoutMs === undefined) await condition(woken);
    else await condition(woken, next.timeoutMs);
  }

  // The run's id names this execution: Temporal's run id, which no script can choose.
  const runId = `${workflowInfo().workflowId}:run:${workflowInfo().runId}`;
  // A run triggered while the sync was paused is not stopped by that pause, only by one that comes later.
  const pausedAtChoice = entity.state.paused;
  runUnderway = true;
  const tentative: RunCommit = commit ?? { events: received.length, at: Date.now(), created };
  let began: RunCommit | Error;
  let script: LoadedScript | undefined;
  try {
    const begun = await beginInlineRun(
      syncScopeOf(step.input, runId),
      tentative,
      scriptInBegin ? step.input.definition.scriptHash : undefined,
    );
    // The script stays out of the commit, which the entity keeps and compares.
    const { script: loaded, ...commitOnly }: BegunRun = begun ?? tentative;
    began = commitOnly;
    script = loaded;
  } catch (error) {
    // Refused (never a passing outage: that is retried): the run fails before any step of its own.
    began = error instanceof Error ? error : new Error(String(error));
  }
  const committed = began instanceof Error ? tentative : began;
  if (!continued && !chosenAgain && (committed.events !== tentative.events || committed.at !== tentative.at)) {
    step = choose(committed) ?? step;
  }
  // Signals after the committed ones arrived, for the run, during it.
  if (chosenAgain) for (const event of received.slice(committed.events)) entity = applyEvent(entity, event);
  // A continued run keeps the id of its first execution (issue 32): one run for the API and webhooks.
  if (!continued) entity = runStarted(entity, runId);
  // The worker executing the run watches it (src/temporal/runWatch.ts); a worker that takes it over
  // after a replay tells its own, at the run's first live step.
  let watched = false;
  const onActive = (): void => {
    if (watched || workflowInfo().unsafe.isReplaying) return;
    watched = true;
    runWatch.active();
  };
  onActive();
  let budget: ScriptBudget | undefined;
  let outcome: SyncRunOutcome;
  try {
    if (began instanceof Error) throw began;
    if (verdict) throw verdictFailure(verdict);
    const result = await runSyncScript(step.input, {
      runId,
      inline: true,
      ledgerCut,
      taskCutByBody,
      cutAtGates,
      gatedChildrenAndClock,
      cutAsksLedger,
      // Loaded by beginRun (version 4) for the run chosen then; a retry that chose another run (a
      // deploy's new script) loads its own.
      ...(script?.hash === step.input.definition.scriptHash ? { script } : {}),
      begun: true,
      fresh: firstInstance && !workflowInfo().unsafe.isReplaying,
      onActive,
      stop: {
        onStop(stop) {
          stopRun = stop;
          if (verdict) stop(verdictFailure(verdict));
        },
      },
      budget: (given) => {
        budget = given;
      },
      chain: {
        executions: continued?.executions ?? [],
        canContinue: true,
        ...continued?.handOff,
        ...(chainRules ? {} : { legacy: true }),
      },
    });
    outcome = { ok: true, result };
  } catch (error) {
    const cause = error instanceof ActivityFailure ? error.cause : error;
    outcome = {
      ok: false,
      error: {
        code: cause instanceof ApplicationFailure ? (cause.type ?? 'run_failed') : 'run_failed',
        message: cause instanceof Error ? cause.message : String(cause),
      },
    };
  }
  stopRun = null;
  if (watched) runWatch.ended();
  // ---- issue 32: the run continues in the next execution, or its executions' totals are its outcome.
  const next = continuationOf(entity, step, runId, outcome, continued);
  if (next) {
    await condition(allHandlersFinished);
    // A pause stops the run at its continuation (version 3): the run ends here, its checkpoint kept,
    // and a later start of the sync goes on from it.
    const stopOnPause = (continued ? continued.stopOnPause !== false : !pausedAtChoice) || pausedInRun;
    if (!chainRules || !entity.state.paused || !stopOnPause) {
      return continueEntity(entity, undefined, chainRules ? { ...next, stopOnPause } : next);
    }
    outcome = {
      ok: false,
      error: {
        code: 'sync_paused',
        message:
          `the sync was paused while its run went on: the run stopped at its continuation after execution ${next.executions.length}, ` +
          'its checkpoint kept; starting the sync (POST /sync/start) runs it at once from that checkpoint',
      },
      executions: next.executions,
    };
  } else if (continued) outcome = chainOutcome(entity, outcome, runId, continued);
  // ---- end issue 32
  const ended = runEnded(entity, outcome, Date.now(), rules);
  entity = ended.entity;
  await condition(allHandlersFinished);
  // Stopped from outside, or by its loop protection: nothing more in this execution (see `unfinished`).
  if (verdict !== null || budget?.failure() !== undefined) return continueEntity(entity, ended.end);
  await finishRun(ended.end);
  await condition(allHandlersFinished);
  return continueEntity(entity);
}

// The run's first step (activities/runtime.ts beginRun), named as a run's steps are in the Web UI,
// and the look at an earlier attempt's commit: short database steps, retried through a restarting
// Postgres for as long as it takes (an entity must never fail for want of its database).
const ENTITY_STEP: LocalActivityOptions = {
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
};
const { beginRun, committedRun } = proxyLocalActivities<RuntimeActivities>(ENTITY_STEP);

function beginInlineRun(
  scope: SyncScope & { runId: string },
  commit: RunCommit,
  scriptHash: string | undefined,
): Promise<BegunRun | undefined> {
  type Call = (options: LocalActivityOptions, args: unknown[]) => Promise<BegunRun | undefined>;
  const call = beginRun as unknown as { executeWithOptions: Call };
  if (scriptHash === undefined) {
    return call.executeWithOptions({ ...ENTITY_STEP, summary: readableSummary('beginRun') }, [scope, commit]);
  }
  const summary = readableSummary(`beginRun, loadScript ${scriptHash.slice(0, 12)}`);
  return call.executeWithOptions({ ...ENTITY_STEP, summary }, [scope, commit, scriptHash]);
}

function syncScopeOf(input: RunSyncInput, runId: string): SyncScope & { runId: string } {
  const { environmentId, integrationId, syncName } = input.definition;
  return { environmentId, integrationId, connectionId: input.connectionId, syncName, runId };
}

/**
 * The choice a retried workflow task's first attempt made: the execution's first `committed.events`
 * signals applied at the committed time (those the first attempt had applied, in the same order), and
 * the run chosen then. Null when that is no run (which only code that chooses otherwise than the code
 * that committed could make so): the run chosen now goes on.
 */
function chooseAgain(
  input: ManageSyncInput,
  received: SyncEntityEvent[],
  committed: RunCommit,
  rules: SyncEntityRules,
): { entity: SyncEntity; step: Extract<SyncEntityStep, { type: 'startRun' }> } | null {
  let entity = createSyncEntity({ ...input, now: committed.created });
  for (const event of received.slice(0, committed.events)) {
    // A resume received in the retried attempt was received by the first one no later than its choice.
    entity = applyEvent(entity, event.type === 'resume' ? { ...event, now: Math.min(event.now, committed.at) } : event);
  }
  const decided = nextStep(entity, committed.at, rules);
  return decided.step.type === 'startRun' ? { entity: decided.entity, step: decided.step } : null;
}

function verdictFailure(verdict: RunawayVerdictSignal): ApplicationFailure {
  return ApplicationFailure.create({ type: verdict.code, nonRetryable: true, message: verdict.message });
}

/**
 * The run in the run history, and its outbound webhooks, sent by a child of their own when there are
 * any. A refusal (never a passing outage: that is retried) leaves the run unrecorded rather than
 * failing the entity: its state still has the run's outcome.
 */
async function finishRun({ record, notify }: SyncEntityEnd): Promise<void> {
  if (!record || !notify) return;
  try {
    const deliveries = await finishSyncRun(record, notify);
    if (deliveries.length === 0) return;
    // Abandoned: a slow or failing application never delays this sync's next run.
    await startChild<typeof deliverWebhook>('deliverWebhook', {
      workflowId: `${record.runId}:webhook`,
      args: [{ deliveries }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      staticSummary: `webhook of ${record.syncName} for ${record.connectionId}`,
    });
  } catch (error) {
    log.error('the run could not be recorded', { runId: record.runId, error: String(error) });
  }
}

/** Version 1, as it ran before issue 31 (see the file's comment); it continues as new in version 2. */
async function manageSyncWithChildRuns(input: ManageSyncInput): Promise<void> {
  // The decisions are workflows/syncEntity.ts's; this function feeds it the signals, timers and the
  // run's outcome, and carries out what it returns.
  const rules: SyncEntityRules = { scheduleBeforeWebhooks: () => patched(SCHEDULE_BEFORE_WEBHOOKS) };
  let entity = createSyncEntity({ ...input, now: Date.now() });

  // Set by a signal once the history is long (ENTITY_HISTORY_EVENTS): a waiting entity then continues
  // as new. Decided in the handler, where `patched` is asked once per signal: executions recorded before
  // the rule have no marker there, replay with it false, and so wait exactly as they did.
  let rollOver = false;
  const hear = (event: SyncEntityEvent): void => {
    entity = applyEvent(entity, event);
    if (rollOver) return;
    if (historyIsLong() && patched(ROLL_OVER_WHEN_LONG)) rollOver = true;
  };
  setHandler(triggerSignal, ({ mode }) => hear({ type: 'trigger', mode }));
  setHandler(pauseSignal, () => hear({ type: 'pause' }));
  setHandler(resumeSignal, () => hear({ type: 'resume', now: Date.now() }));
  setHandler(reconfigureSignal, (definition) => hear({ type: 'reconfigure', definition }));
  setHandler(webhookSignal, (event) => hear({ type: 'webhook', event }));
  setHandler(statusQuery, () => statusOf(entity));

  // Wait for a signal or the next run time, whichever comes first; a signal that moves the run time
  // (reconfigure, resume) or pauses re-evaluates the wait.
  let step: SyncEntityStep;
  for (;;) {
    const decided = nextStep(entity, Date.now(), rules);
    entity = decided.entity;
    step = decided.step;
    if (step.type === 'startRun') break;
    // Nothing to run and a long history: start afresh with the same state, in version 2.
    if (rollOver) {
      await condition(allHandlersFinished);
      return continueEntity(entity);
    }
    const waiting = entity;
    const woken = (): boolean => rollOver || shouldWake(waiting, entity, Date.now());
    if (step.timeoutMs === undefined) await condition(woken);
    else await condition(woken, step.timeoutMs);
  }

  const watchdog = new CancellationScope();
  let verdict: RunawayVerdict | null = null;
  let watching: Promise<void> = Promise.resolve();
  let runId = '';
  let outcome: SyncRunOutcome;
  try {
    const child = await startChild<typeof runSync>('runSync', {
      workflowId: `${workflowInfo().workflowId}:run:${uuid4()}`,
      args: [step.input],
      workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
      staticSummary: step.summary,
    });
    runId = child.workflowId;
    entity = runStarted(entity, runId);
    watching = watchdog
      .run(() => watchdogActivities().watchRun(child.workflowId))
      .then((found) => {
        verdict = found;
      })
      .catch(() => undefined);
    outcome = { ok: true, result: await child.result() };
  } catch (error) {
    const cause = error instanceof ChildWorkflowFailure ? error.cause : error;
    if (cause instanceof TerminatedFailure) {
      // The watchdog terminates and then reports; its answer may arrive just after the termination.
      await Promise.race([watching, sleep('10 seconds')]);
      if (verdict === null && patched('runaway-verdict-of-termination')) {
        verdict = await runawayVerdict(runId).catch(() => null);
      }
    }
    const found: RunawayVerdict | null = verdict;
    outcome = {
      ok: false,
      error: found
        ? { code: found.code, message: found.message }
        : {
            code: cause instanceof ApplicationFailure ? (cause.type ?? 'run_failed') : 'run_failed',
            message: cause instanceof Error ? cause.message : String(cause),
          },
    };
  } finally {
    watchdog.cancel();
  }
  const ended = runEnded(entity, outcome, Date.now(), rules);
  entity = ended.entity;

  // After the schedule is settled, so that a signal arriving meanwhile (a resume) is not overwritten.
  const { record, notify } = ended.end;
  if (record && notify) {
    await recordSyncRun(record);
    // The application hears of the run (per model counts, or the error) through its webhook. A child of
    // its own, abandoned: a slow or failing application never delays this sync's next run.
    await startChild<typeof deliverWebhook>('deliverWebhook', {
      workflowId: `${record.runId}:webhook`,
      args: [{ event: notify }],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      staticSummary: `webhook of ${record.syncName} for ${record.connectionId}`,
    });
  }
  // Signals that arrived during the run are in `entity`; let their handlers finish, then start afresh.
  await condition(allHandlersFinished);
  await continueEntity(entity);
}
