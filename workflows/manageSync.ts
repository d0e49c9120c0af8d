/**
 * The sync entity workflow, one per (environment, integration, connection, sync): waits for the next
 * run time or a signal, runs one execution as a child `runSync`, records the outcome, and continues as
 * new so its own history stays small. Its state survives continue-as-new through its input.
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
  type RunOptions,
  type RunSyncInput,
  type SyncDefinition,
  type SyncMode,
  type SyncRunResult,
  type SyncStatus,
} from '../src/runtime/definitions.js';
import type { WebhookEvent } from '../src/runtime/public.js';
import type { runSync } from './runScript.js';

export const triggerSignal = defineSignal<[{ mode: SyncMode }]>('trigger');
export const pauseSignal = defineSignal('pause');
export const resumeSignal = defineSignal('resume');
export const reconfigureSignal = defineSignal<[SyncDefinition]>('reconfigure');
export const webhookSignal = defineSignal<[WebhookEvent]>('webhook');
export const statusQuery = defineQuery<SyncStatus>('status');

// The watchdog lives as long as the run it watches; it heartbeats every 5 s, so a lost worker is
// noticed within 30 s and the watch resumes on another.
const { watchRun } = proxyActivities<RuntimeActivities>({
  startToCloseTimeout: '30 days',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '1 minute' },
});

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

// Webhooks that arrive while paused or running wait here; past this many the oldest are dropped,
// so a flood cannot grow the entity's state without bound.
const MAX_QUEUED_WEBHOOKS = 100;

/** What the entity carries from one execution to the next. */
export interface SyncEntityState {
  paused: boolean;
  pendingMode: SyncMode | null;
  webhooks: WebhookEvent[];
  /** ISO start of the last successful run: the next incremental run's `lastSyncDate`. */
  lastSyncDate: string | null;
  nextRunAt: string | null;
  finishedAt: string | null;
  latestResult: SyncRunResult | null;
  latestError: { code: string; message: string } | null;
  executions: number;
}

export interface ManageSyncInput {
  definition: SyncDefinition;
  connectionId: string;
  options?: RunOptions | undefined;
  /** Absent on the first start; set by continue-as-new. */
  state?: SyncEntityState | undefined;
}

export async function manageSync(input: ManageSyncInput): Promise<void> {
  let definition = input.definition;
  const state: SyncEntityState = input.state ?? {
    paused: !definition.autoStart,
    pendingMode: null,
    webhooks: [],
    lastSyncDate: null,
    // auto_start: the first run starts as soon as the sync exists for the connection.
    nextRunAt: definition.autoStart ? new Date().toISOString() : null,
    finishedAt: null,
    latestResult: null,
    latestError: null,
    executions: 0,
  };
  let running = false;

  setHandler(triggerSignal, ({ mode }) => {
    state.pendingMode = mode;
  });
  setHandler(pauseSignal, () => {
    state.paused = true;
  });
  setHandler(resumeSignal, () => {
    if (!state.paused) return;
    state.paused = false;
    // A sync that never ran, or whose run time passed while paused, runs now.
    if (state.nextRunAt === null || Date.parse(state.nextRunAt) < Date.now())
      state.nextRunAt = new Date().toISOString();
  });
  setHandler(reconfigureSignal, (next) => {
    const frequencyChanged = next.runsMs !== definition.runsMs;
    definition = next;
    if (frequencyChanged && state.finishedAt !== null && !state.paused) {
      state.nextRunAt = new Date(Date.parse(state.finishedAt) + definition.runsMs).toISOString();
    }
  });
  setHandler(webhookSignal, (event) => {
    if (!definition.webhookSubscriptions.includes(event.type)) return;
    state.webhooks.push(event);
    if (state.webhooks.length > MAX_QUEUED_WEBHOOKS) state.webhooks.shift();
  });
  setHandler(statusQuery, (): SyncStatus => {
    const failed = state.latestError !== null;
    return {
      status: running ? 'running' : state.paused ? 'paused' : failed ? 'failed' : 'idle',
      paused: state.paused,
      syncName: definition.syncName,
      connectionId: input.connectionId,
      syncType: definition.syncType,
      frequencyMs: definition.runsMs,
      nextScheduledSyncAt: state.paused ? null : state.nextRunAt,
      finishedAt: state.finishedAt,
      latestResult: state.latestResult,
      latestError: state.latestError,
      recordCount: state.latestResult?.recordCounts ?? {},
      executions: state.executions,
    };
  });

  const due = (): boolean => !state.paused && state.nextRunAt !== null && Date.parse(state.nextRunAt) <= Date.now();
  const ready = (): boolean => state.pendingMode !== null || (!state.paused && state.webhooks.length > 0) || due();
  // Wait for a signal or the next run time, whichever comes first; a reconfigure or resume that moves
  // the run time re-evaluates the wait.
  while (!ready()) {
    const wait =
      state.paused || state.nextRunAt === null ? undefined : Math.max(1, Date.parse(state.nextRunAt) - Date.now());
    const nextRunAt = state.nextRunAt;
    const paused = state.paused;
    const woken = (): boolean => ready() || state.nextRunAt !== nextRunAt || state.paused !== paused;
    if (wait === undefined) await condition(woken);
    else await condition(woken, wait);
  }

  // A trigger first, then a due scheduled run, then queued webhooks: a webhook run sees one event, so
  // it never stands in for a scheduled run, and steady webhook traffic cannot starve the schedule.
  let mode: SyncMode = 'incremental';
  let webhook: WebhookEvent | undefined;
  let scheduled = false;
  if (state.pendingMode !== null) {
    mode = state.pendingMode;
    state.pendingMode = null;
  } else if (!state.paused && state.webhooks.length > 0 && !(due() && patched(SCHEDULE_BEFORE_WEBHOOKS))) {
    webhook = state.webhooks.shift();
  } else {
    scheduled = true;
  }
  const full = definition.syncType === 'full' || mode !== 'incremental';
  const runInput: RunSyncInput = {
    definition,
    connectionId: input.connectionId,
    mode,
    lastSyncDate: full ? undefined : (state.lastSyncDate ?? undefined),
    webhook,
    options: input.options,
  };

  running = true;
  state.executions++;
  const startedAt = new Date().toISOString();
  let runId = '';
  const watchdog = new CancellationScope();
  let verdict: RunawayVerdict | null = null;
  let watching: Promise<void> = Promise.resolve();
  try {
    const child = await startChild<typeof runSync>('runSync', {
      workflowId: `${workflowInfo().workflowId}:run:${uuid4()}`,
      args: [runInput],
      workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
      staticSummary: `${definition.syncName} ${webhook ? `webhook ${webhook.type}` : mode}`,
    });
    runId = child.workflowId;
    watching = watchdog
      .run(() => watchRun(child.workflowId))
      .then((found) => {
        verdict = found;
      })
      .catch(() => undefined);
    const result = await child.result();
    state.latestResult = result;
    state.latestError = null;
    // A webhook run sees one event, not everything since the last run: it does not move lastSyncDate.
    if (!webhook) state.lastSyncDate = result.startedAt;
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
    state.latestError = found
      ? { code: found.code, message: found.message }
      : {
          code: cause instanceof ApplicationFailure ? (cause.type ?? 'run_failed') : 'run_failed',
          message: cause instanceof Error ? cause.message : String(cause),
        };
  } finally {
    running = false;
    watchdog.cancel();
  }
  state.finishedAt = new Date().toISOString();
  // A run triggered while the sync was never scheduled (auto_start false, paused) leaves it unscheduled:
  // resuming it starts syncing at once.
  const neverScheduled = state.paused && state.nextRunAt === null;
  // A webhook run leaves the schedule alone: a scheduled run that fell due meanwhile still runs next.
  const lapsed = state.nextRunAt === null || Date.parse(state.nextRunAt) <= Date.now();
  const moveSchedule = scheduled || (lapsed && (webhook === undefined || !patched(SCHEDULE_BEFORE_WEBHOOKS)));
  if (!neverScheduled && moveSchedule) {
    state.nextRunAt = new Date(Date.now() + definition.runsMs).toISOString();
  }

  // After the schedule is settled, so that a signal arriving meanwhile (a resume) is not overwritten.
  const succeeded = state.latestError === null && state.latestResult !== null && state.latestResult.runId === runId;
  if (runId !== '') {
    await recordSyncRun({
      runId,
      environmentId: definition.environmentId,
      integrationId: definition.integrationId,
      connectionId: input.connectionId,
      syncName: definition.syncName,
      mode,
      status: succeeded ? 'success' : 'failed',
      startedAt: succeeded && state.latestResult ? state.latestResult.startedAt : startedAt,
      finishedAt: state.finishedAt,
      models: succeeded && state.latestResult ? state.latestResult.models : {},
      error: succeeded ? null : state.latestError,
    });
    // The application hears of the run (per model counts, or the error) through its webhook. A child of
    // its own, abandoned: a slow or failing application never delays this sync's next run.
    await startChild<typeof deliverWebhook>('deliverWebhook', {
      workflowId: `${runId}:webhook`,
      args: [
        {
          event: {
            environmentId: definition.environmentId,
            integrationId: definition.integrationId,
            connectionId: input.connectionId,
            syncName: definition.syncName,
            result: succeeded ? state.latestResult : null,
            error: succeeded ? null : state.latestError,
          },
        },
      ],
      parentClosePolicy: ParentClosePolicy.ABANDON,
      staticSummary: `webhook of ${definition.syncName} for ${input.connectionId}`,
    });
  }
  // Signals that arrived during the run are in `state`; let their handlers finish, then start afresh.
  await condition(allHandlersFinished);
  await continueAsNew<typeof manageSync>({
    definition,
    connectionId: input.connectionId,
    options: input.options,
    state,
  });
}
