/**
 * The sync entity workflow replays its recorded histories without non-determinism:
 * - those of version 1 (each run a child `runSync`; the code before issue 31), recorded at commit
 *   5e7f711 and kept in fixtures/syncEntityHistories: a wait without a timer woken by a signal, a timer
 *   that fires, a timer cancelled by a signal, a reconfigure during a run, the patch markers of a due
 *   schedule before a queued webhook (at the choice and at a webhook run's end), a failed run, a run
 *   terminated under the entity (the runaway verdict's patch and local activity), continue-as-new;
 * - those of version 2 (the run inside the entity's execution, issue 31) that this code records, and
 *   those it recorded when it was written (fixtures/syncEntityHistoriesV2): the same paths, a run
 *   stopped by a runaway verdict (its execution ends at once, the next one records it), a waiting
 *   entity that continues as new on a long history (issue 29), and no child, no ordinary activity, no
 *   patch marker;
 * - an execution of version 1 that is under way when this code deploys: it finishes its run as a child
 *   and continues as new in version 2.
 *
 * RECORD_SYNC_ENTITY_HISTORIES=1 writes the version 2 histories this run records into the fixtures.
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import { beforeAll, describe, expect, it } from 'vitest';
import { RUNAWAY_VERDICT_SIGNAL, type SyncStatus } from '../../src/runtime/definitions.js';
import { syncWorkflowId } from '../../src/temporal/connection.js';
import { createSyncControl, type SyncControl, type SyncRef } from '../../src/temporal/syncControl.js';
import { ENTITY_HISTORY_EVENTS, type ManageSyncInput } from '../../workflows/manageSync.js';
import { eventually } from '../helpers/eventually.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { syncDefinition, useRuntime, type RuntimeHarness } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const { temporal } = proto;

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures');
const V1_FIXTURES = join(FIXTURES, 'syncEntityHistories');
const V2_FIXTURES = join(FIXTURES, 'syncEntityHistoriesV2');
const RECORD = process.env['RECORD_SYNC_ENTITY_HISTORIES'] === '1';
// Longer than a run and its continue-as-new take on a loaded machine, so that the next run waits for
// a timer rather than being due at once.
const INTERVAL_MS = 2500;

const script = bundle(`async function (svc) {
  const res = await svc.get({ endpoint: '/items' });
  if (res.data.fail) throw new Error('upstream broke');
  await svc.batchSave(svc.webhook ? [svc.webhook.payload] : res.data.items, 'Item');
}`);

/** Histories saved as the server sends them (binary, base64), with the workflow id replay needs. */
function readFixtures(dir: string): { workflowId: string; history: History }[] {
  return readdirSync(dir)
    .filter((file) => file.endsWith('.json'))
    .map((file) => {
      const saved = JSON.parse(readFileSync(join(dir, file), 'utf8')) as { workflowId: string; history: string };
      const history = temporal.api.history.v1.History.decode(Buffer.from(saved.history, 'base64'));
      expect(history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name, file).toBe('manageSync');
      return { workflowId: saved.workflowId, history };
    });
}

function writeFixtures(dir: string, recorded: { workflowId: string; history: History }[]): void {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  recorded.forEach(({ workflowId, history }, index) => {
    // The workflow id is not in the history, and replay needs it: child ids are derived from it.
    const name = `${String(index).padStart(2, '0')}-${workflowId.split(':').at(-1)}.json`;
    const encoded = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64');
    writeFileSync(join(dir, name), `${JSON.stringify({ workflowId, history: encoded }, null, 2)}\n`);
  });
}

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
    const api = await startFakeUpstream(async (_request, response) => {
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

  it('replays the version 1 histories (each run a child runSync) recorded before issue 31', async () => {
    const fixtures = readFixtures(V1_FIXTURES);
    expectEveryPathV1(fixtures.map((f) => f.history));
    await replay(fixtures);
  }, 120_000);

  it('replays the version 2 histories this code records (the run in the entity), and those kept as fixtures', async () => {
    const scriptHash = await h.scripts.put(script);

    // A: starts paused; a webhook queues; resume makes the never-run schedule due, so the scheduled run
    // goes first, then the webhook run, during which a reconfigure makes the schedule lapse; then a
    // timer fires; after a pause, a trigger runs and fails.
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
    const lapsesAt = Date.parse(during.finishedAt ?? '') + INTERVAL_MS + 200;
    await eventually(async () => (Date.now() > lapsesAt ? true : undefined), 60_000, 'the schedule to lapse');
    hold = false;
    release();
    await until(a.ref, 'the run on the timer', (s) => s.executions >= 4);
    await control.pause(a.ref);
    fail = true;
    await control.trigger(a.ref);
    await until(a.ref, 'the failed run', (s) => s.executions === 5 && s.status === 'paused' && s.latestError !== null);
    fail = false;
    await continued(a, 5);
    await control.stop(a.ref, 'test over');

    // B: the first run is stopped by a runaway verdict while its request is held: its execution ends at
    // once and the next one records it; that one waits an hour's timer, which a trigger cancels.
    const hitsOfA = hits.length;
    holdRuns();
    const b = await start('replay-stopped', { scriptHash, runsMs: 3600_000 });
    await eventually(async () => (hits.length > hitsOfA ? true : undefined), 60_000, 'the held run');
    await h.client.workflow
      .getHandle(b.workflowId)
      .signal(RUNAWAY_VERDICT_SIGNAL, { runId: b.firstRunId, code: 'script_runaway', message: 'stopped by the test' });
    const stopped = await until(b.ref, 'the stopped run', (s) => s.executions === 1 && s.status === 'failed');
    expect(stopped.latestError).toEqual({ code: 'script_runaway', message: 'stopped by the test' });
    hold = false;
    release();
    // Recorded by the next execution: the run history has it.
    await eventually(
      async () => {
        const { rows } = await h.pool.query<{ error_code: string }>(
          'SELECT error_code FROM sync_runs WHERE run_id = $1',
          [`${b.workflowId}:run:${b.firstRunId}`],
        );
        return rows[0]?.error_code === 'script_runaway' ? true : undefined;
      },
      60_000,
      'the stopped run in the run history',
    );
    await eventually(
      async () => {
        const history = await h.client.workflow.getHandle(b.workflowId).fetchHistory();
        const continuedFrom = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
        return continuedFrom && history.events?.some((event) => event.timerStartedEventAttributes) ? true : undefined;
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
    if (RECORD) writeFixtures(V2_FIXTURES, recorded);
    expectEveryPathV2(recorded.map((r) => r.history));
    // The second execution ran no run: waiting, it continued as new on its long history, with no
    // patch marker (the version in its input says so).
    const waited = long[1]?.history.events ?? [];
    expect(waited.some((event) => event.markerRecordedEventAttributes)).toBe(false);
    expect(waited.filter((event) => event.workflowExecutionSignaledEventAttributes).length).toBeGreaterThan(100);
    expect(waited.at(-1)?.workflowExecutionContinuedAsNewEventAttributes).toBeTruthy();
    await replay([...recorded, ...long]);

    const fixtures = readFixtures(V2_FIXTURES);
    expectEveryPathV2(fixtures.map((f) => f.history));
    await replay(fixtures);
  }, 300_000);

  it('an execution of version 1 under way when this code deploys runs its run as a child, then continues as new in version 2', async () => {
    const scriptHash = await h.scripts.put(script);
    const definition = syncDefinition({ syncName: 'replay-upgrade', models: ['Item'], runsMs: 3600_000, scriptHash });
    const ref: SyncRef = { ...definition, connectionId: 'replay-upgrade' };
    const workflowId = syncWorkflowId(ref);
    // As the code before issue 31 started entities: no version in the input.
    const input: ManageSyncInput = { definition, connectionId: ref.connectionId };
    const { firstExecutionRunId } = await h.client.workflow.start('manageSync', {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
    });
    await until(ref, 'the first run', (s) => s.executions === 1 && s.status === 'idle');
    await control.trigger(ref);
    await until(ref, 'the second run', (s) => s.executions === 2 && s.status === 'idle');
    const entity = { workflowId, firstRunId: firstExecutionRunId };
    await continued(entity, 2);
    await control.stop(ref, 'test over');
    const [first, second] = await chain(workflowId, firstExecutionRunId);
    const children = (history: History | undefined) =>
      (history?.events ?? []).flatMap((event) => {
        const type = event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name;
        return type ? [type] : [];
      });
    // Version 1 starts a deliverWebhook child after every run, webhook URL or not; version 2 starts none.
    expect(children(first)).toEqual(['runSync', 'deliverWebhook']);
    expect(children(second)).toEqual([]);
    const { rows } = await h.pool.query<{ run_id: string }>(
      'SELECT run_id FROM sync_runs WHERE connection_id = $1 ORDER BY finished_at',
      [ref.connectionId],
    );
    expect(rows).toHaveLength(2);
    // The second run's id names its execution (the run in the entity); the first, its child's id.
    const secondRunId = first?.events
      ?.map((event) => event.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId)
      .find((id) => id);
    expect(rows[0]!.run_id).toMatch(new RegExp(`^${workflowId}:run:`));
    expect(rows[0]!.run_id).not.toBe(`${workflowId}:run:${firstExecutionRunId}`);
    expect(rows[1]!.run_id).toBe(`${workflowId}:run:${secondRunId}`);
    expect(second).toBeDefined();
    await replay((await chain(workflowId, firstExecutionRunId)).map((history) => ({ workflowId, history })));
  }, 120_000);
});

/** The version 1 histories together hold every kind of event that code wrote (see the file's comment). */
function expectEveryPathV1(histories: History[]): void {
  const events = histories.flatMap((history) => history.events ?? []);
  const patches = events
    .map((event) => event.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data)
    .filter((data): data is Uint8Array => data instanceof Uint8Array)
    .map((data) => (JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id);
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

/** The version 2 histories: every path above, the run in the entity (no child, no activity, no patch). */
function expectEveryPathV2(histories: History[]): void {
  const events = histories.flatMap((history) => history.events ?? []);
  const markers = events.flatMap((event) => {
    const marker = event.markerRecordedEventAttributes;
    return marker?.markerName ? [marker.markerName] : [];
  });
  expect(markers).not.toContain('core_patch');
  expect(markers).toContain('core_local_activity');
  expect(events.some((event) => event.startChildWorkflowExecutionInitiatedEventAttributes)).toBe(false);
  expect(events.some((event) => event.activityTaskScheduledEventAttributes)).toBe(false);
  expect(events.some((event) => event.upsertWorkflowSearchAttributesEventAttributes)).toBe(false);
  expect(events.some((event) => event.timerFiredEventAttributes)).toBe(true);
  expect(events.some((event) => event.timerCanceledEventAttributes)).toBe(true);
  const signals = events.flatMap((event) => event.workflowExecutionSignaledEventAttributes?.signalName ?? []);
  expect(signals).toEqual(
    expect.arrayContaining(['reconfigure', 'webhook', 'trigger', 'pause', 'resume', RUNAWAY_VERDICT_SIGNAL]),
  );
  expect(events.filter((event) => event.workflowExecutionContinuedAsNewEventAttributes).length).toBeGreaterThanOrEqual(
    7,
  );
}
