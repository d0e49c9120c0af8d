/**
 * The sync entity's decisions, without Temporal: what it does on a trigger, pause, resume, reconfigure
 * or webhook, when its next run is due, which run goes next, and how a finished run moves the schedule.
 * Pure and deterministic: every function takes the entity and returns a new one (the argument is never
 * changed), the time is always passed in (`now`, ms since the epoch), and it imports no Temporal API.
 * workflows/manageSync.ts is the driver: it feeds these functions its signals, timers and child results
 * and carries out the commands they return.
 */
import type {
  QueuedWebhook,
  RunOptions,
  RunSyncInput,
  SyncDefinition,
  SyncMode,
  SyncRunResult,
  SyncStatus,
} from '../src/runtime/definitions.js';
import type { SyncRunRecord } from '../src/runtime/runHistory.js';
import type { SyncFinishedEvent } from '../src/webhooks/deliveries.js';

// Webhooks that arrive while paused or running wait here; past this many the oldest are dropped,
// so a flood cannot grow the entity's state without bound. The API refuses a webhook beyond it first
// (src/webhooks/inboundQueue.ts, 429 webhook_queue_full), so a drop happens only to webhooks queued
// before that bound existed.
export const MAX_QUEUED_WEBHOOKS = 100;

// A scheduled run that could not begin (environment_busy) is tried again after this, or its interval.
const BUSY_RETRY_MS = 60_000;

/** What the entity carries from one execution to the next (the workflow's continue-as-new input). */
export interface SyncEntityState {
  paused: boolean;
  pendingMode: SyncMode | null;
  webhooks: QueuedWebhook[];
  /** ISO start of the last successful run: the next incremental run's `lastSyncDate`. */
  lastSyncDate: string | null;
  nextRunAt: string | null;
  finishedAt: string | null;
  latestResult: SyncRunResult | null;
  latestError: { code: string; message: string } | null;
  executions: number;
}

/** The run under way, from its choice to its end. */
export interface SyncEntityRun {
  mode: SyncMode;
  /** The one webhook a webhook run handles. */
  webhook: QueuedWebhook | undefined;
  /** A scheduled run (not a trigger's, not a webhook's): its end moves the schedule. */
  scheduled: boolean;
  startedAt: string;
  /** The run's workflow id, once it started; '' when it could not be started. */
  runId: string;
}

/** One sync of one connection: its definition, what it carries, and the run under way. */
export interface SyncEntity {
  definition: SyncDefinition;
  connectionId: string;
  options: RunOptions | undefined;
  state: SyncEntityState;
  run: SyncEntityRun | null;
}

/** What the workflow hears from outside (signals). */
export type SyncEntityEvent =
  | { type: 'trigger'; mode: SyncMode }
  | { type: 'pause' }
  | { type: 'resume'; now: number }
  | { type: 'reconfigure'; definition: SyncDefinition }
  | { type: 'webhook'; event: QueuedWebhook };

/** How a run ended, as the driver saw it. */
export type SyncRunOutcome =
  | { ok: true; result: SyncRunResult }
  /** `executions`: those of a run that continued past one (issue 32). */
  | { ok: false; error: { code: string; message: string }; executions?: string[] | undefined };

/**
 * Rules that changed while entities were running (Temporal's `patched`). Each is asked only where its
 * answer matters, because asking is recorded in the workflow's history: an execution recorded by code
 * before a rule answers false on replay, every new one answers true.
 */
export interface SyncEntityRules {
  /** A due scheduled run goes ahead of queued webhooks, and a webhook run leaves the schedule alone. */
  scheduleBeforeWebhooks(): boolean;
}

/** What the entity asks the driver to do next, before a run. */
export type SyncEntityStep =
  /** Wait until `until` (ms since the epoch), or indefinitely when null, or until an event may change the answer. */
  | { type: 'wait'; until: number | null; timeoutMs: number | undefined }
  /** Start the run (a child `runSync`). */
  | { type: 'startRun'; input: RunSyncInput; summary: string };

/** What the driver does once a run has ended, in this order. */
export interface SyncEntityEnd {
  /** The run's row in the run history; null when the run never started. */
  record: SyncRunRecord | null;
  /** The application's webhook of the run; null when the run never started. */
  notify: SyncFinishedEvent | null;
}

/** The entity of a fresh workflow, or the one an execution continued as new with. */
export function createSyncEntity(input: {
  definition: SyncDefinition;
  connectionId: string;
  options?: RunOptions | undefined;
  state?: SyncEntityState | undefined;
  now: number;
}): SyncEntity {
  const { definition } = input;
  const state: SyncEntityState = input.state ?? {
    paused: !definition.autoStart,
    pendingMode: null,
    webhooks: [],
    lastSyncDate: null,
    // auto_start: the first run starts as soon as the sync exists for the connection.
    nextRunAt: definition.autoStart ? iso(input.now) : null,
    finishedAt: null,
    latestResult: null,
    latestError: null,
    executions: 0,
  };
  return { definition, connectionId: input.connectionId, options: input.options, state, run: null };
}

/** The entity after a signal. */
export function applyEvent(entity: SyncEntity, event: SyncEntityEvent): SyncEntity {
  const { state } = entity;
  switch (event.type) {
    case 'trigger':
      // A second trigger before the first one's run replaces it: the latest mode runs, once.
      return withState(entity, { pendingMode: event.mode });
    case 'pause':
      return withState(entity, { paused: true });
    case 'resume': {
      if (!state.paused) return entity;
      // A sync that never ran, or whose run time passed while paused, runs now.
      const lapsed = state.nextRunAt === null || Date.parse(state.nextRunAt) < event.now;
      return withState(entity, { paused: false, ...(lapsed ? { nextRunAt: iso(event.now) } : {}) });
    }
    case 'reconfigure': {
      const definition = event.definition;
      const frequencyChanged = definition.runsMs !== entity.definition.runsMs;
      // A new frequency counts from the last finish (so it may be due at once); before any run, or
      // while paused, the run time stays as it was.
      const moved =
        frequencyChanged && state.finishedAt !== null && !state.paused
          ? { nextRunAt: iso(Date.parse(state.finishedAt) + definition.runsMs) }
          : {};
      return { ...entity, definition, state: { ...state, ...moved } };
    }
    case 'webhook': {
      if (!entity.definition.webhookSubscriptions.includes(event.event.type)) return entity;
      const webhooks = [...state.webhooks, event.event];
      if (webhooks.length > MAX_QUEUED_WEBHOOKS) webhooks.shift();
      return withState(entity, { webhooks });
    }
  }
}

/** Whether the scheduled run's time has come (never while paused). */
export function isDue(entity: SyncEntity, now: number): boolean {
  const { state } = entity;
  return !state.paused && state.nextRunAt !== null && Date.parse(state.nextRunAt) <= now;
}

/** Whether a run can start now: a trigger, a queued webhook (not while paused), or a due scheduled run. */
export function isReady(entity: SyncEntity, now: number): boolean {
  const { state } = entity;
  return state.pendingMode !== null || (!state.paused && state.webhooks.length > 0) || isDue(entity, now);
}

/**
 * Whether an event since `waiting` calls for a new decision even if no run is ready: a moved run time
 * or a pause or resume changes how long to wait.
 */
export function shouldWake(waiting: SyncEntity, entity: SyncEntity, now: number): boolean {
  return (
    isReady(entity, now) ||
    entity.state.nextRunAt !== waiting.state.nextRunAt ||
    entity.state.paused !== waiting.state.paused
  );
}

/**
 * The next step before a run: wait (for the run time, or for an event), or start a run. A trigger goes
 * first, then a due scheduled run, then queued webhooks: a webhook run sees one event, so it never
 * stands in for a scheduled run, and steady webhook traffic cannot starve the schedule.
 */
export function nextStep(
  entity: SyncEntity,
  now: number,
  rules: SyncEntityRules,
): { entity: SyncEntity; step: SyncEntityStep } {
  const { state, definition } = entity;
  if (!isReady(entity, now)) {
    const until = state.paused || state.nextRunAt === null ? null : Date.parse(state.nextRunAt);
    // At least 1 ms: Temporal's condition() takes a timeout of 0 as none, and would wait without a timer.
    const timeoutMs = until === null ? undefined : Math.max(1, until - now);
    return { entity, step: { type: 'wait', until, timeoutMs } };
  }
  let mode: SyncMode = 'incremental';
  let webhook: QueuedWebhook | undefined;
  let scheduled = false;
  let pendingMode = state.pendingMode;
  let webhooks = state.webhooks;
  if (pendingMode !== null) {
    mode = pendingMode;
    pendingMode = null;
  } else if (!state.paused && webhooks.length > 0 && !(isDue(entity, now) && rules.scheduleBeforeWebhooks())) {
    [webhook, ...webhooks] = webhooks;
  } else {
    scheduled = true;
  }
  const full = definition.syncType === 'full' || mode !== 'incremental';
  const input: RunSyncInput = {
    definition,
    connectionId: entity.connectionId,
    mode,
    lastSyncDate: full ? undefined : (state.lastSyncDate ?? undefined),
    webhook,
    options: entity.options,
  };
  const next: SyncEntity = {
    ...entity,
    state: { ...state, pendingMode, webhooks, executions: state.executions + 1 },
    run: { mode, webhook, scheduled, startedAt: iso(now), runId: '' },
  };
  const summary = `${definition.syncName} ${webhook ? `webhook ${webhook.type}` : mode}`;
  return { entity: next, step: { type: 'startRun', input, summary } };
}

/** The run started as the workflow `runId`. */
export function runStarted(entity: SyncEntity, runId: string): SyncEntity {
  if (entity.run === null) throw new Error('runStarted: no run was chosen');
  return { ...entity, run: { ...entity.run, runId } };
}

/** The entity after its run ended, and what the driver records and announces of it. */
export function runEnded(
  entity: SyncEntity,
  outcome: SyncRunOutcome,
  now: number,
  rules: SyncEntityRules,
): { entity: SyncEntity; end: SyncEntityEnd } {
  const run = entity.run;
  if (run === null) throw new Error('runEnded: no run under way');
  const { definition, connectionId } = entity;
  let state: SyncEntityState = outcome.ok
    ? {
        ...entity.state,
        latestResult: outcome.result,
        latestError: null,
        // A webhook run sees one event, not everything since the last run: it does not move lastSyncDate.
        lastSyncDate: run.webhook ? entity.state.lastSyncDate : outcome.result.startedAt,
      }
    : { ...entity.state, latestError: outcome.error };
  const finishedAt = iso(now);
  state = { ...state, finishedAt };
  // A run triggered while the sync was never scheduled (auto_start false, paused) leaves it unscheduled:
  // resuming it starts syncing at once.
  const neverScheduled = state.paused && state.nextRunAt === null;
  // A webhook run leaves the schedule alone: a scheduled run that fell due meanwhile still runs next.
  const lapsed = state.nextRunAt === null || Date.parse(state.nextRunAt) <= now;
  const moveSchedule = run.scheduled || (lapsed && (run.webhook === undefined || !rules.scheduleBeforeWebhooks()));
  if (!neverScheduled && moveSchedule) state = { ...state, nextRunAt: iso(now + definition.runsMs) };
  // A run that could not begin because its environment had as many sync runs going as it may did
  // nothing: its webhook waits again, first, and the sync runs again soon rather than a whole interval later.
  // A run stopped by a pause at its continuation (issue 32) is due again: starting the sync goes on at
  // once from its checkpoint, not an interval later.
  if (!outcome.ok && outcome.error.code === 'sync_paused' && !neverScheduled) state = { ...state, nextRunAt: iso(now) };
  if (!outcome.ok && outcome.error.code === 'environment_busy') {
    if (run.webhook) state = { ...state, webhooks: [run.webhook, ...state.webhooks] };
    if (!neverScheduled && run.scheduled) {
      state = { ...state, nextRunAt: iso(now + Math.min(definition.runsMs, BUSY_RETRY_MS)) };
    }
  }

  const next: SyncEntity = { ...entity, state, run: null };
  if (run.runId === '') return { entity: next, end: { record: null, notify: null } };
  const succeeded = state.latestError === null && state.latestResult !== null && state.latestResult.runId === run.runId;
  const result = succeeded ? state.latestResult : null;
  const error = succeeded ? null : state.latestError;
  const record: SyncRunRecord = {
    runId: run.runId,
    environmentId: definition.environmentId,
    integrationId: definition.integrationId,
    connectionId,
    syncName: definition.syncName,
    mode: run.mode,
    status: succeeded ? 'success' : 'failed',
    startedAt: result ? result.startedAt : run.startedAt,
    finishedAt,
    models: result ? result.models : {},
    error,
  };
  if (run.webhook?.queueId !== undefined) record.webhookQueueId = run.webhook.queueId;
  const executions = outcome.ok ? outcome.result.executions : outcome.executions;
  if (executions) record.executions = executions;
  const notify = {
    environmentId: definition.environmentId,
    integrationId: definition.integrationId,
    connectionId,
    syncName: definition.syncName,
    result,
    error,
  };
  return { entity: next, end: { record, notify } };
}

/** What the sync's status query answers. */
export function statusOf(entity: SyncEntity): SyncStatus {
  const { state, definition } = entity;
  const failed = state.latestError !== null;
  return {
    status: entity.run !== null ? 'running' : state.paused ? 'paused' : failed ? 'failed' : 'idle',
    paused: state.paused,
    syncName: definition.syncName,
    connectionId: entity.connectionId,
    syncType: definition.syncType,
    frequencyMs: definition.runsMs,
    nextScheduledSyncAt: state.paused ? null : state.nextRunAt,
    finishedAt: state.finishedAt,
    latestResult: state.latestResult,
    latestError: state.latestError,
    recordCount: state.latestResult?.recordCounts ?? {},
    executions: state.executions,
  };
}

function withState(entity: SyncEntity, change: Partial<SyncEntityState>): SyncEntity {
  return { ...entity, state: { ...entity.state, ...change } };
}

function iso(ms: number): string {
  return new Date(ms).toISOString();
}
