/**
 * The sync entity workflow, one per (environment, integration, connection, sync): waits for the next
 * run time or a signal, runs one execution as a child `runSync`, records the outcome, and continues as
 * new so its own history stays small. Its state survives continue-as-new through its input. What to do
 * when is decided by workflows/syncEntity.ts (pure, tested without Temporal); this file is its driver
 * and writes the same history as before that split (test/runtime/syncEntityReplay.test.ts).
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowFailure,
  condition,
  continueAsNew,
  defineQuery,
  defineSignal,
  proxyActivities,
  setHandler,
  sleep,
  ParentClosePolicy,
  patched,
  proxyLocalActivities,
  startChild,
  TerminatedFailure,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { RuntimeActivities } from '../activities/runtime.js';
import type { SyncRunActivities } from '../activities/syncRuns.js';
import type { deliverWebhook } from './deliverWebhook.js';
import {
  RUN_WORKFLOW_TASK_TIMEOUT_MS,
  type QueuedWebhook,
  type RunOptions,
  type SyncDefinition,
  type SyncMode,
  type SyncStatus,
} from '../src/runtime/definitions.js';
import type { runSync } from './runScript.js';
import { watchTaskQueue } from './taskQueues.js';
import {
  applyEvent,
  createSyncEntity,
  nextStep,
  runEnded,
  runStarted,
  shouldWake,
  statusOf,
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
// Executions recorded before a waiting entity continued as new on a long history replay as they ran.
const ROLL_OVER_WHEN_LONG = 'continue-as-new-when-long';

/**
 * A waiting entity (paused, or before its run time) continues as new once its history has this many
 * events, or once Temporal suggests it, instead of only after a run: every signal it hears (webhook,
 * trigger, pause, resume, reconfigure) adds about four events, and Temporal refuses a 10,001st signal
 * to one execution (`history.maximumSignalsPerExecution`) and ends an execution at 51,200 events.
 * 2,000 events is about 500 signals per execution.
 */
export const ENTITY_HISTORY_EVENTS = 2_000;

export interface ManageSyncInput {
  definition: SyncDefinition;
  connectionId: string;
  options?: RunOptions | undefined;
  /** Absent on the first start; set by continue-as-new. */
  state?: SyncEntityState | undefined;
}

export async function manageSync(input: ManageSyncInput): Promise<void> {
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
    const info = workflowInfo();
    const long = info.continueAsNewSuggested || info.historyLength >= ENTITY_HISTORY_EVENTS;
    if (long && patched(ROLL_OVER_WHEN_LONG)) rollOver = true;
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
    // Nothing to run and a long history: start afresh with the same state (the queued webhooks, the
    // schedule), so that signals keep being accepted however long the entity stays paused.
    if (rollOver) await continueAsNewWithState();
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
  await continueAsNewWithState();

  // Carries the entity as it is once the handlers in progress have finished.
  async function continueAsNewWithState(): Promise<never> {
    await condition(allHandlersFinished);
    return continueAsNew<typeof manageSync>({
      definition: entity.definition,
      connectionId: entity.connectionId,
      options: entity.options,
      state: entity.state,
    });
  }
}
