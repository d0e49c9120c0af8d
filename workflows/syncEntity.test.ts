/**
 * The sync entity's decisions without Temporal or any server: the schedule's arithmetic, pause and
 * resume, reconfigure (mid-wait and mid-run), the webhook queue, overlapping triggers and a clock that
 * jumps. The time is whatever each call is given; the workflow's wiring of these decisions is tested on
 * the real server by test/runtime/syncEntity.test.ts and syncEntityReplay.test.ts.
 */
import { describe, expect, it } from 'vitest';
import type { SyncDefinition, SyncMode } from '../src/runtime/definitions.js';
import type { WebhookEvent } from '../src/runtime/public.js';
import {
  applyEvent,
  createSyncEntity,
  MAX_QUEUED_WEBHOOKS,
  nextStep,
  runEnded,
  runStarted,
  shouldWake,
  statusOf,
  type SyncEntity,
  type SyncEntityRules,
  type SyncEntityStep,
} from './syncEntity.js';

const T0 = Date.parse('2026-01-01T00:00:00.000Z');
const SECOND = 1000;
const HOUR = 3600 * SECOND;
const at = (ms: number): string => new Date(ms).toISOString();

function definition(overrides: Partial<SyncDefinition> = {}): SyncDefinition {
  return {
    environmentId: 'env',
    integrationId: 'int',
    syncName: 'items',
    syncType: 'incremental',
    runsMs: HOUR,
    autoStart: true,
    trackDeletes: false,
    models: ['Item'],
    scriptHash: 'hash',
    webhookSubscriptions: ['item.created'],
    ...overrides,
  };
}

/** The rules of every execution recorded since due schedules go before webhooks; counts the asks. */
function rules(answer = true): SyncEntityRules & { asked: number } {
  const counted = {
    asked: 0,
    scheduleBeforeWebhooks: () => {
      counted.asked++;
      return answer;
    },
  };
  return counted;
}

function entity(overrides: Partial<SyncDefinition> = {}, now = T0): SyncEntity {
  return createSyncEntity({ definition: definition(overrides), connectionId: 'c1', now });
}

const hook = (n: number, type = 'item.created'): WebhookEvent => ({ type, payload: { n }, receivedAt: at(T0) });

/** Asks for the next step at `now`; fails unless it starts a run. */
function start(
  e: SyncEntity,
  now: number,
  r = rules(),
): { entity: SyncEntity; step: Extract<SyncEntityStep, { type: 'startRun' }> } {
  const { entity: next, step } = nextStep(e, now, r);
  if (step.type !== 'startRun') throw new Error(`expected a run at ${at(now)}, got ${JSON.stringify(step)}`);
  return { entity: runStarted(next, `run-${next.state.executions}`), step };
}

function waitOf(e: SyncEntity, now: number): Extract<SyncEntityStep, { type: 'wait' }> {
  const { entity: same, step } = nextStep(e, now, rules());
  expect(same).toBe(e);
  if (step.type !== 'wait') throw new Error(`expected a wait at ${at(now)}, got ${JSON.stringify(step.input)}`);
  return step;
}

/** Ends the run under way successfully at `now`; the run started `startedAt`. */
function succeed(e: SyncEntity, now: number, startedAt = now - SECOND, r = rules()) {
  const runId = e.run?.runId ?? '';
  const mode: SyncMode = e.run?.mode ?? 'incremental';
  const result = {
    runId,
    mode,
    full: false,
    startedAt: at(startedAt),
    finishedAt: at(now),
    models: { Item: { added: 1, updated: 0, deleted: 0, unchanged: 0 } },
    recordCounts: { Item: 1 },
    operations: 2,
  };
  return runEnded(e, { ok: true, result }, now, r);
}

describe('sync entity: schedule', () => {
  it('auto_start runs at once, then one interval after each run ends, with lastSyncDate the start of the last success', () => {
    let e = entity();
    expect(statusOf(e)).toMatchObject({ status: 'idle', paused: false, nextScheduledSyncAt: at(T0), executions: 0 });
    const first = start(e, T0);
    expect(first.step.input).toMatchObject({ mode: 'incremental', lastSyncDate: undefined, webhook: undefined });
    expect(first.step.summary).toBe('items incremental');
    expect(statusOf(first.entity)).toMatchObject({ status: 'running', executions: 1 });

    const ended = succeed(first.entity, T0 + 5 * SECOND, T0 + SECOND);
    e = ended.entity;
    expect(e.state).toMatchObject({ finishedAt: at(T0 + 5 * SECOND), nextRunAt: at(T0 + 5 * SECOND + HOUR) });
    expect(e.state.lastSyncDate).toBe(at(T0 + SECOND));
    expect(ended.end.record).toMatchObject({
      runId: 'run-1',
      status: 'success',
      startedAt: at(T0 + SECOND),
      finishedAt: at(T0 + 5 * SECOND),
      error: null,
    });
    expect(ended.end.notify).toMatchObject({ syncName: 'items', connectionId: 'c1', error: null });
    expect(statusOf(e)).toMatchObject({ status: 'idle', executions: 1, recordCount: { Item: 1 } });

    // Waits for the rest of the interval, measured from the clock it is given.
    expect(waitOf(e, T0 + 10 * SECOND)).toEqual({
      type: 'wait',
      until: T0 + 5 * SECOND + HOUR,
      timeoutMs: HOUR - 5 * SECOND,
    });
    expect(waitOf(e, T0 + 5 * SECOND + HOUR - 1).timeoutMs).toBe(1);
    // Due at its run time exactly; the incremental run gets lastSyncDate.
    const second = start(e, T0 + 5 * SECOND + HOUR);
    expect(second.step.input.lastSyncDate).toBe(at(T0 + SECOND));
  });

  it('a full sync, and a full refresh of an incremental one, never get lastSyncDate', () => {
    const full = succeed(start(entity({ syncType: 'full' }), T0).entity, T0 + SECOND).entity;
    expect(start(full, T0 + 2 * HOUR).step.input.lastSyncDate).toBeUndefined();

    const incremental = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    const refreshed = applyEvent(incremental, { type: 'trigger', mode: 'full_refresh' });
    expect(start(refreshed, T0 + 2 * SECOND).step.input).toMatchObject({
      mode: 'full_refresh',
      lastSyncDate: undefined,
    });
  });

  it('a failed run keeps the last result and lastSyncDate, records the error, and still moves the schedule', () => {
    const ok = succeed(start(entity(), T0).entity, T0 + SECOND, T0).entity;
    const running = start(ok, T0 + SECOND + HOUR).entity;
    const error = { code: 'script_error', message: 'boom' };
    const { entity: failed, end } = runEnded(running, { ok: false, error }, T0 + 2 * HOUR, rules());
    expect(failed.state).toMatchObject({ latestError: error, lastSyncDate: at(T0), nextRunAt: at(T0 + 3 * HOUR) });
    expect(failed.state.latestResult?.runId).toBe('run-1');
    expect(statusOf(failed).status).toBe('failed');
    expect(end.record).toMatchObject({
      runId: 'run-2',
      status: 'failed',
      startedAt: at(T0 + SECOND + HOUR),
      models: {},
      error,
    });
    expect(end.notify).toMatchObject({ result: null, error });
    // The next success clears the error.
    const recovered = succeed(start(failed, T0 + 3 * HOUR).entity, T0 + 3 * HOUR + SECOND).entity;
    expect(statusOf(recovered)).toMatchObject({ status: 'idle', latestError: null });
  });

  it('a run that could not be started is neither recorded nor announced', () => {
    const chosen = nextStep(entity(), T0, rules()).entity;
    const error = { code: 'run_failed', message: 'no' };
    const { entity: after, end } = runEnded(chosen, { ok: false, error }, T0 + SECOND, rules());
    expect(end).toEqual({ record: null, notify: null });
    expect(after.state).toMatchObject({ latestError: error, executions: 1, nextRunAt: at(T0 + SECOND + HOUR) });
  });

  it('never changes the entity it is given', () => {
    const e = entity();
    const frozen = JSON.stringify(e);
    const chosen = nextStep(e, T0, rules()).entity;
    applyEvent(e, { type: 'pause' });
    applyEvent(e, { type: 'webhook', event: hook(1) });
    applyEvent(e, { type: 'reconfigure', definition: definition({ runsMs: 60 * SECOND }) });
    succeed(runStarted(chosen, 'r'), T0 + SECOND);
    expect(JSON.stringify(e)).toBe(frozen);
  });
});

describe('sync entity: pause and resume', () => {
  it('auto_start false starts paused and unscheduled; a trigger runs once and leaves it so; resume runs at once', () => {
    let e = entity({ autoStart: false });
    expect(statusOf(e)).toMatchObject({ status: 'paused', paused: true, nextScheduledSyncAt: null });
    expect(waitOf(e, T0)).toEqual({ type: 'wait', until: null, timeoutMs: undefined });

    e = applyEvent(e, { type: 'trigger', mode: 'incremental' });
    e = succeed(start(e, T0 + SECOND).entity, T0 + 2 * SECOND).entity;
    expect(e.state).toMatchObject({ paused: true, nextRunAt: null, executions: 1 });
    expect(waitOf(e, T0 + 3 * SECOND).timeoutMs).toBeUndefined();

    e = applyEvent(e, { type: 'resume', now: T0 + 10 * SECOND });
    expect(e.state.nextRunAt).toBe(at(T0 + 10 * SECOND));
    const resumed = start(e, T0 + 10 * SECOND);
    expect(resumed.entity.run?.scheduled).toBe(true);
  });

  it('a pause stops the schedule; resuming before the run time keeps it, after it runs at once', () => {
    const ran = succeed(start(entity(), T0).entity, T0 + SECOND).entity; // next at T0 + 1 s + 1 h
    const paused = applyEvent(ran, { type: 'pause' });
    expect(statusOf(paused)).toMatchObject({ status: 'paused', nextScheduledSyncAt: null });
    // Paused past the run time: no run, no timer.
    expect(waitOf(paused, T0 + 2 * HOUR)).toEqual({ type: 'wait', until: null, timeoutMs: undefined });

    const early = applyEvent(paused, { type: 'resume', now: T0 + HOUR / 2 });
    expect(early.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
    const late = applyEvent(paused, { type: 'resume', now: T0 + 2 * HOUR });
    expect(late.state.nextRunAt).toBe(at(T0 + 2 * HOUR));
    expect(start(late, T0 + 2 * HOUR).entity.run?.scheduled).toBe(true);
    // Resuming what is not paused changes nothing.
    expect(applyEvent(ran, { type: 'resume', now: T0 + 2 * HOUR })).toBe(ran);
  });

  it('a pause during a run keeps the run; its end leaves the sync paused, and the next scheduled time is kept', () => {
    const running = start(entity(), T0).entity;
    const paused = applyEvent(running, { type: 'pause' });
    expect(statusOf(paused)).toMatchObject({ status: 'running', paused: true });
    const ended = succeed(paused, T0 + SECOND).entity;
    expect(ended.state).toMatchObject({ paused: true, nextRunAt: at(T0 + SECOND + HOUR) });
    expect(statusOf(ended)).toMatchObject({ status: 'paused', nextScheduledSyncAt: null });
  });
});

describe('sync entity: triggers', () => {
  it('overlapping triggers before a run make one run, of the latest mode', () => {
    let e = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    e = applyEvent(e, { type: 'trigger', mode: 'full_refresh' });
    e = applyEvent(e, { type: 'trigger', mode: 'full_refresh_and_clear_cache' });
    const run = start(e, T0 + 2 * SECOND);
    expect(run.step.input.mode).toBe('full_refresh_and_clear_cache');
    expect(run.entity.state.pendingMode).toBeNull();
    // A triggered run ends before the run time: the schedule stays.
    const ended = succeed(run.entity, T0 + 3 * SECOND).entity;
    expect(ended.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
    expect(waitOf(ended, T0 + 4 * SECOND).until).toBe(T0 + SECOND + HOUR);
  });

  it('a trigger during a run runs right after it, before the schedule is due', () => {
    const running = start(entity(), T0).entity;
    const triggered = applyEvent(running, { type: 'trigger', mode: 'incremental' });
    const ended = succeed(triggered, T0 + SECOND).entity;
    expect(ended.state.pendingMode).toBe('incremental');
    const next = start(ended, T0 + 2 * SECOND);
    expect(next.entity.run).toMatchObject({ scheduled: false, mode: 'incremental' });
    expect(next.step.input.lastSyncDate).toBe(at(T0));
  });

  it('a trigger goes before a due scheduled run and queued webhooks; the due run follows, and the trigger moves the schedule only once lapsed', () => {
    let e = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    e = applyEvent(e, { type: 'webhook', event: hook(1) });
    e = applyEvent(e, { type: 'trigger', mode: 'full_refresh' });
    const r = rules();
    const triggered = start(e, T0 + 2 * HOUR, r);
    expect(triggered.entity.run).toMatchObject({ mode: 'full_refresh', scheduled: false, webhook: undefined });
    expect(r.asked).toBe(0);
    // The schedule had lapsed: the triggered run's end counts as the scheduled one.
    const ended = succeed(triggered.entity, T0 + 2 * HOUR + SECOND, undefined, r).entity;
    expect(ended.state.nextRunAt).toBe(at(T0 + 3 * HOUR + SECOND));
    expect(r.asked).toBe(0);
  });
});

describe('sync entity: reconfigure', () => {
  it('a new frequency counts from the last finish, at once when that has passed, and wakes the wait', () => {
    const e = succeed(start(entity(), T0).entity, T0 + 10 * SECOND).entity; // next at T0 + 10 s + 1 h
    const faster = applyEvent(e, { type: 'reconfigure', definition: definition({ runsMs: 60 * SECOND }) });
    expect(faster.state.nextRunAt).toBe(at(T0 + 70 * SECOND));
    expect(statusOf(faster).frequencyMs).toBe(60 * SECOND);
    expect(shouldWake(e, faster, T0 + 20 * SECOND)).toBe(true);
    expect(waitOf(faster, T0 + 20 * SECOND).timeoutMs).toBe(50 * SECOND);
    // Reconfigured after the new interval had passed: due at once.
    expect(start(faster, T0 + 5 * 60 * SECOND).entity.run?.scheduled).toBe(true);
  });

  it('the same frequency, a paused sync and a sync that never ran keep their run time; the definition is taken', () => {
    const e = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    const renamed = definition({ models: ['Item', 'Other'] });
    const same = applyEvent(e, { type: 'reconfigure', definition: renamed });
    expect(same.state).toEqual(e.state);
    expect(same.definition).toBe(renamed);
    expect(shouldWake(e, same, T0 + 2 * SECOND)).toBe(false);

    const paused = applyEvent(e, { type: 'pause' });
    const pausedFaster = applyEvent(paused, { type: 'reconfigure', definition: definition({ runsMs: SECOND }) });
    expect(pausedFaster.state.nextRunAt).toBe(paused.state.nextRunAt);

    const fresh = entity({ autoStart: false });
    const freshFaster = applyEvent(fresh, { type: 'reconfigure', definition: definition({ runsMs: SECOND }) });
    expect(freshFaster.state.nextRunAt).toBeNull();
  });

  it('mid-run: the run keeps the definition it started with, its end schedules with the new frequency', () => {
    const first = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    const running = start(first, T0 + SECOND + HOUR);
    expect(running.step.input.definition.runsMs).toBe(HOUR);
    const reconfigured = applyEvent(running.entity, {
      type: 'reconfigure',
      definition: definition({ runsMs: 10 * 60 * SECOND }),
    });
    // Counted from the last finish, that is already past: the running scheduled run is the one.
    expect(reconfigured.state.nextRunAt).toBe(at(T0 + SECOND + 10 * 60 * SECOND));
    const ended = succeed(reconfigured, T0 + 2 * HOUR).entity;
    expect(ended.state.nextRunAt).toBe(at(T0 + 2 * HOUR + 10 * 60 * SECOND));
    expect(ended.definition.runsMs).toBe(10 * 60 * SECOND);
  });
});

describe('sync entity: webhooks', () => {
  it('only subscribed types queue; a queued webhook runs alone, with svc.webhook, and moves neither lastSyncDate nor the schedule', () => {
    let e = succeed(start(entity(), T0).entity, T0 + SECOND, T0).entity;
    const ignored = applyEvent(e, { type: 'webhook', event: hook(1, 'other.type') });
    expect(ignored).toBe(e);
    e = applyEvent(e, { type: 'webhook', event: hook(2) });
    expect(shouldWake(e, e, T0 + 2 * SECOND)).toBe(true);
    const r = rules();
    const run = start(e, T0 + 2 * SECOND, r);
    expect(run.step.input.webhook).toEqual(hook(2));
    expect(run.step.summary).toBe('items webhook item.created');
    expect(run.entity.run?.scheduled).toBe(false);
    expect(run.entity.state.webhooks).toEqual([]);
    const ended = succeed(run.entity, T0 + 3 * SECOND, undefined, r).entity;
    expect(ended.state).toMatchObject({ lastSyncDate: at(T0), nextRunAt: at(T0 + SECOND + HOUR) });
    // Not due, not lapsed: the rule is never asked.
    expect(r.asked).toBe(0);
  });

  it('webhooks wait while paused and run after resume; past the cap the oldest are dropped', () => {
    let e = applyEvent(entity(), { type: 'pause' });
    for (let n = 0; n < MAX_QUEUED_WEBHOOKS + 5; n++) e = applyEvent(e, { type: 'webhook', event: hook(n) });
    expect(e.state.webhooks).toHaveLength(MAX_QUEUED_WEBHOOKS);
    expect(e.state.webhooks[0]).toEqual(hook(5));
    expect(waitOf(e, T0).timeoutMs).toBeUndefined();
    // While paused a webhook does not wake the wait; resuming does.
    const more = applyEvent(e, { type: 'webhook', event: hook(999) });
    expect(shouldWake(e, more, T0)).toBe(false);
    const resumed = applyEvent(more, { type: 'resume', now: T0 + HOUR });
    expect(shouldWake(more, resumed, T0 + HOUR)).toBe(true);
  });

  it('a due scheduled run goes before queued webhooks, then the webhooks run one by one, the schedule untouched', () => {
    let e = entity({ autoStart: false });
    e = applyEvent(e, { type: 'webhook', event: hook(1) });
    e = applyEvent(e, { type: 'webhook', event: hook(2) });
    e = applyEvent(e, { type: 'resume', now: T0 });
    const r = rules();
    const scheduled = start(e, T0, r);
    expect(scheduled.entity.run).toMatchObject({ scheduled: true, webhook: undefined });
    expect(r.asked).toBe(1);
    e = succeed(scheduled.entity, T0 + SECOND, undefined, r).entity;
    expect(e.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
    const hooks = [1, 2].map(() => {
      const run = start(e, T0 + 2 * SECOND, r);
      e = succeed(run.entity, T0 + 3 * SECOND, undefined, r).entity;
      return run.step.input.webhook;
    });
    expect(hooks).toEqual([hook(1), hook(2)]);
    expect(e.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
    expect(e.state.executions).toBe(3);
    expect(waitOf(e, T0 + 4 * SECOND).until).toBe(T0 + SECOND + HOUR);
  });

  it('a webhook run over which the schedule lapsed leaves it due; executions recorded before that rule moved it', () => {
    const base = applyEvent(succeed(start(entity(), T0).entity, T0 + SECOND).entity, {
      type: 'webhook',
      event: hook(1),
    });
    const now = rules();
    const run = start(base, T0 + 2 * SECOND, now);
    const lapsed = succeed(run.entity, T0 + 2 * HOUR, undefined, now).entity;
    expect(now.asked).toBe(1);
    expect(lapsed.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
    expect(start(lapsed, T0 + 2 * HOUR).entity.run?.scheduled).toBe(true);

    const before = rules(false);
    const old = succeed(start(base, T0 + 2 * SECOND, before).entity, T0 + 2 * HOUR, undefined, before).entity;
    expect(old.state.nextRunAt).toBe(at(T0 + 3 * HOUR));
  });

  it('in executions recorded before the rule, a queued webhook went before a due scheduled run', () => {
    let e = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    e = applyEvent(e, { type: 'webhook', event: hook(1) });
    const before = rules(false);
    const run = start(e, T0 + 2 * HOUR, before);
    expect(run.entity.run).toMatchObject({ scheduled: false, webhook: hook(1) });
    expect(before.asked).toBe(1);
  });
});

describe('sync entity: a clock that jumps', () => {
  it('forward past many intervals: one run, not one per missed interval; the next counts from its end', () => {
    const e = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    const late = start(e, T0 + 10 * HOUR);
    const ended = succeed(late.entity, T0 + 10 * HOUR + SECOND).entity;
    expect(ended.state.nextRunAt).toBe(at(T0 + 11 * HOUR + SECOND));
    expect(waitOf(ended, T0 + 10 * HOUR + 2 * SECOND).timeoutMs).toBe(HOUR - SECOND);
  });

  it('backward: the wait lengthens to the same run time; a run that ends before it started is scheduled from its end', () => {
    const e = succeed(start(entity(), T0).entity, T0 + SECOND).entity;
    expect(waitOf(e, T0 - HOUR)).toEqual({ type: 'wait', until: T0 + SECOND + HOUR, timeoutMs: 2 * HOUR + SECOND });
    const running = start(applyEvent(e, { type: 'trigger', mode: 'incremental' }), T0 + 2 * HOUR).entity;
    const ended = runEnded(running, { ok: false, error: { code: 'x', message: 'y' } }, T0, rules()).entity;
    expect(ended.state.finishedAt).toBe(at(T0));
    // Not lapsed by the clock it was given: a triggered run leaves the schedule.
    expect(ended.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
  });

  it('a resume after a jump past the run time runs at once; before it, keeps it', () => {
    const paused = applyEvent(succeed(start(entity(), T0).entity, T0 + SECOND).entity, { type: 'pause' });
    const jumped = applyEvent(paused, { type: 'resume', now: T0 + 5 * HOUR });
    expect(start(jumped, T0 + 5 * HOUR).entity.run?.scheduled).toBe(true);
    const back = applyEvent(paused, { type: 'resume', now: T0 - HOUR });
    expect(back.state.nextRunAt).toBe(at(T0 + SECOND + HOUR));
  });
});

describe('a run that could not begin (its environment had as many sync runs going as it may)', () => {
  const busy = { code: 'environment_busy', message: 'the environment has 100 sync runs going' };

  it('queues its webhook again, first, and leaves the queue otherwise as it was', () => {
    let e = entity({}, T0);
    e = { ...e, state: { ...e.state, nextRunAt: at(T0 + HOUR) } };
    e = applyEvent(e, { type: 'webhook', event: hook(1) });
    e = applyEvent(e, { type: 'webhook', event: hook(2) });
    const { entity: running } = start(e, T0 + SECOND);
    expect(running.state.webhooks).toEqual([hook(2)]);
    const { entity: after, end } = runEnded(running, { ok: false, error: busy }, T0 + 2 * SECOND, rules());
    expect(after.state.webhooks).toEqual([hook(1), hook(2)]);
    expect(end.record?.error).toEqual(busy);
  });

  it('a scheduled one runs again after a minute, not a whole interval later', () => {
    const { entity: running } = start(entity({ runsMs: 24 * HOUR }, T0), T0);
    const { entity: after } = runEnded(running, { ok: false, error: busy }, T0 + SECOND, rules());
    expect(after.state.nextRunAt).toBe(at(T0 + SECOND + 60 * SECOND));
  });
});
