/**
 * Syncs of any size (issue 32) on the real stack: checkpoints, a run that continues past one execution
 * (forced with a lowered history budget), deletes tracked across its executions, and the two ways a
 * run that cannot continue fails (no checkpoint; a checkpoint that does not advance).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SyncDefinition, SyncStatus } from '../../src/runtime/definitions.js';
import { createRunHistory } from '../../src/runtime/runHistory.js';
import { CheckpointStore } from '../../src/syncs/checkpointStore.js';
import { createSyncControl, type SyncControl } from '../../src/temporal/syncControl.js';
import { type RuntimeHarness, settledSync, syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle, resumableSync } from '../kit/scripts.js';
import { ENVIRONMENT, INTEGRATION } from '../kit/testConnections.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const PAGE = 5;

/** The resumable sync (test/kit/scripts.ts) at pages of PAGE, with `begin`, `beforeSave` and `end`. */
const walker = (places: { begin?: string; beforeSave?: string; end?: string } = {}) =>
  resumableSync({ limit: PAGE, ...places });

const resumable = walker();

// The same without checkpoints: a run of it cannot continue.
const unresumable = bundle(`async function sync(svc) {
  let cursor = '0';
  while (cursor !== null) {
    const res = await svc.get({ endpoint: '/records', params: { cursor, limit: ${PAGE} } });
    await svc.batchSave(res.data.items, 'Record');
    cursor = res.data.next;
  }
}`);

// Saves a checkpoint that never moves and records that never change: would loop forever if continued.
const stuck = bundle(`async function sync(svc) {
  for (;;) {
    const res = await svc.get({ endpoint: '/records', params: { cursor: '0', limit: ${PAGE} } });
    await svc.batchSave(res.data.items, 'Record');
    await svc.saveCheckpoint({ cursor: '0' });
  }
}`);

// An incremental sync that does a full pass with explicit delete tracking.
const explicitPass = walker({
  begin: "if (!checkpoint) await svc.trackDeletesStart('Record');",
  end: "await svc.trackDeletesEnd('Record');",
});

let h: RuntimeHarness;
let control: SyncControl;
let ids: string[] = [];
const hits = new Map<string, number>();

const settled = (ref: { connectionId: string } & SyncDefinition, runs: number): Promise<SyncStatus> =>
  settledSync(control, ref, runs, 120_000);

async function live(connectionId: string): Promise<string[]> {
  const { rows } = await h.pool.query<{ id: string }>(
    `SELECT r.id FROM records r JOIN record_scopes s ON s.scope_id = r.scope_id
      WHERE s.connection_id = $1 AND r.deleted_at IS NULL ORDER BY r.id`,
    [connectionId],
  );
  return rows.map((row) => row.id);
}

async function runsOf(connectionId: string, syncName: string) {
  return createRunHistory({ db: h.pool }).list({
    environmentId: ENVIRONMENT,
    integrationId: INTEGRATION,
    connectionId,
    syncNames: [syncName],
  });
}

beforeAll(async () => {
  h = await useRuntime();
  control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
  const api = await startFakeUpstream((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const start = Number(url.searchParams.get('cursor') ?? '0');
    const limit = Number(url.searchParams.get('limit'));
    const key = `${url.searchParams.get('connection') ?? ''}${start}`;
    hits.set(key, (hits.get(key) ?? 0) + 1);
    const items = ids.slice(start, start + limit).map((id) => ({ id, title: `record ${id}` }));
    json(response, 200, { items, next: start + limit < ids.length ? String(start + limit) : null });
  });
  h.connections.setBaseUrl(api.url);
});

const define = async (syncName: string, script: string, overrides: Partial<SyncDefinition> = {}) => {
  const definition = syncDefinition({
    syncName,
    models: ['Record'],
    runsMs: 3600_000,
    scriptHash: await h.scripts.put(script),
    ...overrides,
  });
  return { definition, ref: { ...definition, connectionId: syncName } };
};

// With a budget of 60 events an execution takes ~15 pages (3 steps each) before it continues.
const SMALL_BUDGET = { historyEventBudget: 60 };

describe('a run that continues past one execution', () => {
  it('continues from its checkpoint at the history budget: one run, each page fetched once, each record saved once; deletes tracked over all its executions', async () => {
    ids = Array.from({ length: 200 }, (_, i) => `r${String(i).padStart(3, '0')}`);
    hits.clear();
    const { definition, ref } = await define('continued', resumable, { syncType: 'full', trackDeletes: true });
    await control.ensureSync(definition, ref.connectionId, SMALL_BUDGET);
    const first = await settled(ref, 1);
    expect(first.latestError).toBeNull();
    const executions = first.latestResult?.executions ?? [];
    expect(executions.length).toBeGreaterThanOrEqual(3);
    // The cut refuses the saveCheckpoint the script calls at the limit: the next execution begins from
    // the one stored before it, fetching that page (saved already, unchanged) again: once per cut.
    const cuts = executions.length - 1;
    expect(first.latestResult?.models['Record']).toEqual({
      added: 200,
      updated: 0,
      deleted: 0,
      unchanged: cuts * PAGE,
    });
    expect([...hits.values()].every((n) => n === 1 || n === 2)).toBe(true);
    expect([...hits.values()].filter((n) => n === 2)).toHaveLength(cuts);
    expect(hits.size).toBe(200 / PAGE);
    expect(await live(ref.connectionId)).toEqual(ids);
    // One run in the run history, its executions listed, under the id of its first.
    const [run, ...older] = await runsOf(ref.connectionId, 'continued');
    expect(older).toEqual([]);
    expect(run).toMatchObject({ status: 'success', runId: executions[0], executions });
    expect(run?.models['Record']).toEqual({ added: 200, updated: 0, deleted: 0, unchanged: cuts * PAGE });
    // The script cleared its checkpoint at the end of the pass.
    expect(await new CheckpointStore(h.pool).get({ ...ref })).toBeNull();

    // The second pass: 7 records are gone upstream. Only they are marked deleted, not the records an
    // earlier execution of the same run saved.
    const gone = ['r003', 'r050', 'r051', 'r120', 'r177', 'r198', 'r199'];
    ids = ids.filter((id) => !gone.includes(id));
    hits.clear();
    await control.trigger(ref);
    const second = await settled(ref, 2);
    expect(second.latestError).toBeNull();
    expect(second.latestResult?.executions?.length).toBeGreaterThanOrEqual(3);
    const secondCuts = (second.latestResult?.executions?.length ?? 1) - 1;
    expect(second.latestResult?.models['Record']).toEqual({
      added: 0,
      updated: 0,
      deleted: 7,
      unchanged: 193 + secondCuts * PAGE,
    });
    expect(await live(ref.connectionId)).toEqual(ids);
    await control.stop(ref, 'test over');
  });

  it('explicit trackDeletesStart/End over a pass that spans executions marks only what the pass did not save', async () => {
    ids = Array.from({ length: 120 }, (_, i) => `e${String(i).padStart(3, '0')}`);
    const { definition, ref } = await define('explicit', explicitPass);
    await control.ensureSync(definition, ref.connectionId, SMALL_BUDGET);
    await settled(ref, 1);
    ids = ids.filter((id) => id !== 'e010' && id !== 'e110');
    await control.trigger(ref);
    const second = await settled(ref, 2);
    expect(second.latestError).toBeNull();
    expect(second.latestResult?.executions?.length).toBeGreaterThanOrEqual(2);
    const cuts = (second.latestResult?.executions?.length ?? 1) - 1;
    expect(second.latestResult?.models['Record']).toMatchObject({ added: 0, deleted: 2, unchanged: 118 + cuts * PAGE });
    expect(await live(ref.connectionId)).toEqual(ids);
    await control.stop(ref, 'test over');
  });

  it('a run without a checkpoint fails at the budget as before, saying to checkpoint', async () => {
    ids = Array.from({ length: 200 }, (_, i) => `u${String(i).padStart(3, '0')}`);
    const { definition, ref } = await define('unresumable', unresumable);
    await control.ensureSync(definition, ref.connectionId, SMALL_BUDGET);
    const status = await settled(ref, 1);
    expect(status.latestError?.code).toBe('run_history_limit');
    expect(status.latestError?.message).toMatch(/no checkpoint to continue from.*svc\.saveCheckpoint/);
    await control.stop(ref, 'test over');
  });

  it('a run whose checkpoint does not advance is stopped with checkpoint_not_advancing, never reported as a success', async () => {
    ids = Array.from({ length: 10 }, (_, i) => `s${i}`);
    const { definition, ref } = await define('stuck', stuck);
    await control.ensureSync(definition, ref.connectionId, SMALL_BUDGET);
    const status = await settled(ref, 1);
    expect(status.latestError?.code).toBe('checkpoint_not_advancing');
    expect(status.latestError?.message).toMatch(/at a place it has been, forever.*\(in execution 2 of the run\)/);
    const [run] = await runsOf(ref.connectionId, 'stuck');
    expect(run).toMatchObject({ status: 'failed' });
    expect(run?.executions).toHaveLength(2);
    await control.stop(ref, 'test over');
  });

  it('continues at the time limit of an execution, after a saveCheckpoint', async () => {
    ids = Array.from({ length: 40 }, (_, i) => `t${String(i).padStart(2, '0')}`);
    const slow = walker({ beforeSave: 'await new Promise((resolve) => setTimeout(resolve, 400));' });
    const { definition, ref } = await define('timed', slow);
    await control.ensureSync(definition, ref.connectionId, { executionTimeLimitMs: 1000 });
    const status = await settled(ref, 1);
    expect(status.latestError).toBeNull();
    expect(status.latestResult?.executions?.length).toBeGreaterThanOrEqual(2);
    const cuts = (status.latestResult?.executions?.length ?? 1) - 1;
    expect(status.latestResult?.models['Record']).toEqual({
      added: 40,
      updated: 0,
      deleted: 0,
      unchanged: cuts * PAGE,
    });
    expect(await live(ref.connectionId)).toEqual(ids);
    await control.stop(ref, 'test over');
  });

  it('continues past its operation limit, after a saveCheckpoint: each execution replays a bounded history', async () => {
    ids = Array.from({ length: 40 }, (_, i) => `o${String(i).padStart(2, '0')}`);
    const { definition, ref } = await define('counted', resumable);
    // Three operations a page (get, batchSave, saveCheckpoint): an execution holds about four pages.
    await control.ensureSync(definition, ref.connectionId, { executionOperationLimit: 12 });
    const status = await settled(ref, 1);
    expect(status.latestError).toBeNull();
    const executions = status.latestResult?.executions?.length ?? 1;
    // 8 pages: at least 3 pages a continuation (one of them fetched again), so at least 3 executions.
    expect(executions).toBeGreaterThanOrEqual(3);
    expect(status.latestResult?.models['Record']).toEqual({
      added: 40,
      updated: 0,
      deleted: 0,
      unchanged: (executions - 1) * PAGE,
    });
    expect(await live(ref.connectionId)).toEqual(ids);
    await control.stop(ref, 'test over');
  });

  it('saveCheckpoint refuses what is not a small flat object, naming the problem', async () => {
    ids = ['x1'];
    const bad = bundle(`async function sync(svc) {
  await svc.saveCheckpoint({ nested: { cursor: 1 } });
}`);
    const { definition, ref } = await define('badcheckpoint', bad);
    await control.ensureSync(definition, ref.connectionId);
    const status = await settled(ref, 1);
    expect(status.latestError?.code).toBe('invalid_checkpoint');
    expect(status.latestError?.message).toMatch(/checkpoint value of "nested" is an object/);
    await control.stop(ref, 'test over');
  });
});
