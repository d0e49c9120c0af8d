/**
 * The sync entity workflow replays its recorded histories without non-determinism: those the code
 * before the state machine (workflows/syncEntity.ts) recorded, kept in fixtures/syncEntityHistories,
 * and those the current code records here. Both cover every path that writes to the history: a wait
 * without a timer woken by a signal, a timer that fires, a timer cancelled by a signal, a reconfigure
 * during a run, the patch markers of a due schedule before a queued webhook (at the choice and at a
 * webhook run's end), a failed run, a run terminated under the entity (the runaway verdict's patch
 * and local activity) and continue-as-new after every run. The current code's histories also hold a
 * waiting entity that continues as new on a long history (its patch marker, issue 29), which the
 * fixtures predate.
 *
 * RECORD_SYNC_ENTITY_HISTORIES=1 writes the histories this run records into the fixtures (done once,
 * with the code before the state machine, at commit 5e7f711).
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { createSyncControl, type SyncControl, type SyncRef } from '../../src/temporal/syncControl.js';
import { ENTITY_HISTORY_EVENTS } from '../../workflows/manageSync.js';
import { eventually } from '../helpers/eventually.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { bundle, json, startFakeApi, syncDefinition, useRuntime, type RuntimeHarness } from './helpers.js';

const { temporal } = proto;

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'syncEntityHistories');
const RECORD = process.env['RECORD_SYNC_ENTITY_HISTORIES'] === '1';
// Longer than a run and its continue-as-new take on a loaded machine, so that the next run waits for
// a timer rather than being due at once.
const INTERVAL_MS = 2500;

const script = bundle(`async function (svc) {
  const res = await svc.get({ endpoint: '/items' });
  if (res.data.fail) throw new Error('upstream broke');
  await svc.batchSave(svc.webhook ? [svc.webhook.payload] : res.data.items, 'Item');
}`);

describe('sync entity workflow: history compatibility', () => {
  let h: RuntimeHarness;
  let control: SyncControl;
  let fail = false;
  // While `hold` is set, each request to the fake API waits for `release()`: a run is held mid-way.
  let hold = false;
  let released: Promise<void> = Promise.resolve();
  let release = (): void => undefined;
  const holdRuns = (): void => {
    hold = true;
    released = new Promise((resolve) => (release = resolve));
  };
  let hits: string[] = [];

  beforeAll(async () => {
    h = await useRuntime();
    control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const api = await startFakeApi(async (_request, response) => {
      if (hold) await released;
      json(response, 200, { items: [{ id: 'base', n: 0 }], fail });
    });
    hits = api.hits;
    h.connections.setBaseUrl(api.url);
  });

  const until = (ref: SyncRef, what: string, test: (status: SyncStatus) => boolean): Promise<SyncStatus> =>
    eventually(
      async () => {
        const status = await control.status(ref);
        return test(status) ? status : undefined;
      },
      60_000,
      what,
    );

  async function start(syncName: string, overrides: Parameters<typeof syncDefinition>[0]) {
    const definition = syncDefinition({ ...overrides, syncName, models: ['Item'] });
    const ref: SyncRef = { ...definition, connectionId: syncName };
    const workflowId = await control.ensureSync(definition, ref.connectionId);
    const { runId } = await h.client.workflow.getHandle(workflowId).describe();
    return { definition, ref, workflowId, firstRunId: runId };
  }

  /** The histories of every execution of an entity, from its first, following continue-as-new. */
  async function chain(workflowId: string, firstRunId: string): Promise<History[]> {
    const histories: History[] = [];
    let runId: string | null | undefined = firstRunId;
    while (runId) {
      const history = await h.client.workflow.getHandle(workflowId, runId).fetchHistory();
      histories.push(history);
      runId = history.events
        ?.map((event) => event.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId)
        .find((id) => id);
    }
    return histories;
  }

  /** Until the entity continued as new after its `runs`-th run (its status shows the run before that). */
  async function continued(entity: { workflowId: string; firstRunId: string }, runs: number): Promise<void> {
    await eventually(
      async () => ((await chain(entity.workflowId, entity.firstRunId)).length > runs ? true : undefined),
      60_000,
      `continue-as-new after run ${runs}`,
    );
  }

  const replay = (histories: { workflowId: string; history: History }[]) => expectReplays(h.pool, histories);

  it('replays the histories recorded before the state machine, and those the current code records', async () => {
    const scriptHash = await h.scripts.put(script);

    // A: starts paused; a webhook queues; resume makes the never-run schedule due, so the scheduled run
    // goes first (a patch marker), then the webhook run, during which a reconfigure makes the schedule
    // lapse (the webhook run's end asks the patch again); then a timer fires; after a pause, a
    // trigger runs and fails.
    const a = await start('replay-hooks', {
      scriptHash,
      autoStart: false,
      runsMs: 3600_000,
      webhookSubscriptions: ['item.created'],
    });
    await control.deliverWebhook(a.ref, {
      type: 'item.created',
      payload: { id: 'hooked', n: 1 },
      receivedAt: new Date().toISOString(),
    });
    holdRuns();
    await control.resume(a.ref);
    await eventually(async () => (hits.length >= 1 ? true : undefined), 60_000, 'the scheduled run');
    release();
    holdRuns();
    await eventually(async () => (hits.length >= 2 ? true : undefined), 60_000, 'the webhook run');
    await control.ensureSync({ ...a.definition, runsMs: INTERVAL_MS }, a.ref.connectionId);
    const during = await until(
      a.ref,
      'the reconfigure',
      (s) => s.frequencyMs === INTERVAL_MS && s.status === 'running',
    );
    // The webhook run ends after the moved run time (the scheduled run's finish + the new interval).
    const lapsesAt = Date.parse(during.finishedAt ?? '') + INTERVAL_MS + 200;
    await eventually(async () => (Date.now() > lapsesAt ? true : undefined), 60_000, 'the schedule to lapse');
    hold = false;
    release();
    // The scheduled run that lapsed during the webhook run, then one on the timer.
    await until(a.ref, 'the run on the timer', (s) => s.executions >= 4);
    await control.pause(a.ref);
    fail = true;
    await control.trigger(a.ref);
    // The triggered run is the fifth: the one on the timer was under way, or had ended.
    await until(a.ref, 'the failed run', (s) => s.executions === 5 && s.status === 'paused' && s.latestError !== null);
    fail = false;
    await continued(a, 5);
    await control.stop(a.ref, 'test over');

    // B: the first run is terminated under the entity (no runaway verdict, so the entity asks for one);
    // the next waits an hour's timer, which a trigger cancels.
    const hitsOfA = hits.length;
    holdRuns();
    const b = await start('replay-terminated', { scriptHash, runsMs: 3600_000 });
    const runId = await eventually(
      async () => {
        const history = await h.client.workflow.getHandle(b.workflowId).fetchHistory();
        return (
          history.events
            ?.map((event) => event.childWorkflowExecutionStartedEventAttributes?.workflowExecution?.workflowId)
            .find((id) => id) ?? undefined
        );
      },
      60_000,
      'the first run',
    );
    await eventually(async () => (hits.length > hitsOfA ? true : undefined), 60_000, 'the held run');
    await h.client.workflow.getHandle(runId).terminate('replay test');
    hold = false;
    release();
    await until(b.ref, 'the terminated run', (s) => s.executions === 1 && s.status === 'failed');
    // The trigger lands on the next execution's timer (not on the run's end, which would carry it over).
    await eventually(
      async () => {
        const history = await h.client.workflow.getHandle(b.workflowId).fetchHistory();
        const continued = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
        return continued && history.events?.some((event) => event.timerStartedEventAttributes) ? true : undefined;
      },
      60_000,
      'the wait for the next run time',
    );
    await control.trigger(b.ref);
    await until(b.ref, 'the triggered run', (s) => s.executions === 2 && s.status === 'idle');
    await continued(b, 2);
    await control.stop(b.ref, 'test over');

    // C: after its first run the entity waits an hour's timer; a flood of reconfigures (each leaves the
    // wait as it is) makes its history long, and it continues as new without a run.
    const c = await start('replay-long', { scriptHash, runsMs: 3600_000 });
    await until(c.ref, 'the first run', (s) => s.executions === 1 && s.status === 'idle');
    await continued(c, 1);
    const signals = Math.ceil(ENTITY_HISTORY_EVENTS / 2);
    for (let sent = 0; sent < signals; sent++) await control.ensureSync(c.definition, c.ref.connectionId);
    await eventually(
      async () => ((await chain(c.workflowId, c.firstRunId)).length > 2 ? true : undefined),
      60_000,
      'continue-as-new of the waiting entity',
    );
    expect((await control.status(c.ref)).executions).toBe(1);
    await control.stop(c.ref, 'test over');

    const recorded = [
      ...(await chain(a.workflowId, a.firstRunId)).map((history) => ({ workflowId: a.workflowId, history })),
      ...(await chain(b.workflowId, b.firstRunId)).map((history) => ({ workflowId: b.workflowId, history })),
    ];
    const long = (await chain(c.workflowId, c.firstRunId)).map((history) => ({ workflowId: c.workflowId, history }));
    if (RECORD) {
      rmSync(FIXTURES, { recursive: true, force: true });
      mkdirSync(FIXTURES, { recursive: true });
      recorded.forEach(({ workflowId, history }, index) => {
        // The workflow id is not in the history, and replay needs it: child ids are derived from it.
        const name = `${String(index).padStart(2, '0')}-${workflowId.split(':').at(-1)}.json`;
        // The history in Temporal's binary encoding (what the server sends), base64.
        const encoded = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64');
        const saved = { workflowId, history: encoded };
        writeFileSync(join(FIXTURES, name), `${JSON.stringify(saved, null, 2)}\n`);
      });
    }

    expectEveryPath(recorded.map((r) => r.history));
    expect(patchesOf(long.map((l) => l.history))).toContain('continue-as-new-when-long');
    await replay([...recorded, ...long]);

    const files = readdirSync(FIXTURES).filter((file) => file.endsWith('.json'));
    const fixtures = files.map((file) => {
      const saved = JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as { workflowId: string; history: string };
      const history = temporal.api.history.v1.History.decode(Buffer.from(saved.history, 'base64'));
      const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
      expect(started?.workflowType?.name, file).toBe('manageSync');
      return { workflowId: saved.workflowId, history };
    });
    expectEveryPath(fixtures.map((f) => f.history));
    await replay(fixtures);
  }, 300_000);
});

/** The ids of the patch markers in the histories. */
function patchesOf(histories: History[]): string[] {
  return histories
    .flatMap((history) => history.events ?? [])
    .map((event) => event.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data)
    .filter((data): data is Uint8Array => data instanceof Uint8Array)
    .map((data) => (JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id);
}

/** The histories together hold every kind of event the entity writes (see the file's comment). */
function expectEveryPath(histories: History[]): void {
  const events = histories.flatMap((history) => history.events ?? []);
  const patches = patchesOf(histories);
  expect(patches.filter((id) => id === 'due-schedule-before-webhooks').length).toBeGreaterThanOrEqual(2);
  expect(patches).toContain('runaway-verdict-of-termination');
  expect(events.some((event) => event.timerFiredEventAttributes)).toBe(true);
  expect(events.some((event) => event.timerCanceledEventAttributes)).toBe(true);
  expect(events.some((event) => event.childWorkflowExecutionFailedEventAttributes)).toBe(true);
  expect(events.some((event) => event.childWorkflowExecutionTerminatedEventAttributes)).toBe(true);
  expect(events.some((event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'reconfigure')).toBe(
    true,
  );
  expect(events.filter((event) => event.workflowExecutionContinuedAsNewEventAttributes).length).toBeGreaterThanOrEqual(
    7,
  );
}
