/**
 * A run that spans executions (issue 32) under the sync's controls, on the real stack, with the
 * environment bounded to ONE sync run at a time (SYNC_RUN_CONCURRENCY_PER_ENVIRONMENT=1, run_slots):
 * the run keeps its slot from one execution to the next (the next took a slot before the previous had
 * given its own back, so a continuing run waited ~90 s and failed environment_busy); and a pause
 * while it continues stops it at its next continuation, its checkpoint kept for a later start.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SyncDefinition, SyncStatus } from '../../src/runtime/definitions.js';
import { createRunSlots } from '../../src/runtime/runSlots.js';
import { CheckpointStore } from '../../src/syncs/checkpointStore.js';
import { createSyncControl, type SyncControl } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { type RuntimeHarness, settledSync, syncDefinition, useRuntime } from '../kit/runtime.js';
import { resumableSync } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const PAGE = 5;
const TOTAL = 200;
const ids = Array.from({ length: TOTAL }, (_, i) => `r${String(i).padStart(3, '0')}`);

const resumable = resumableSync({ limit: PAGE, params: 'conn: svc.connectionId' });

let h: RuntimeHarness;
let control: SyncControl;
// Pages fetched per connection; requests of a connection wait while it is held.
const hits = new Map<string, number>();
const held = new Map<string, Promise<void>>();

beforeAll(async () => {
  h = await useRuntime({
    runtime: (pool) => ({ runSlots: createRunSlots({ db: pool }), syncRunConcurrency: 1 }),
  });
  control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
  const api = await startFakeUpstream(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    const key = url.searchParams.get('conn') ?? '';
    hits.set(key, (hits.get(key) ?? 0) + 1);
    await held.get(key);
    const start = Number(url.searchParams.get('cursor') ?? '0');
    const limit = Number(url.searchParams.get('limit'));
    const items = ids.slice(start, start + limit).map((id) => ({ id, title: `record ${id}` }));
    json(response, 200, { items, next: start + limit < ids.length ? String(start + limit) : null });
  });
  h.connections.setBaseUrl(api.url);
});

const define = async (syncName: string) => {
  const definition = syncDefinition({
    syncName,
    models: ['Record'],
    runsMs: 3600_000,
    scriptHash: await h.scripts.put(resumable),
  });
  return { definition, ref: { ...definition, connectionId: syncName } };
};

const settled = (ref: { connectionId: string } & SyncDefinition, runs: number): Promise<SyncStatus> =>
  settledSync(control, ref, runs, 150_000);

async function live(connectionId: string): Promise<number> {
  const { rows } = await h.pool.query<{ n: string }>(
    `SELECT count(*) AS n FROM records r JOIN record_scopes s ON s.scope_id = r.scope_id
      WHERE s.connection_id = $1 AND r.deleted_at IS NULL`,
    [connectionId],
  );
  return Number(rows[0]?.n);
}

async function slots(): Promise<string[]> {
  const { rows } = await h.pool.query<{ run_id: string }>("SELECT run_id FROM run_slots WHERE kind = 'sync'");
  return rows.map((row) => row.run_id);
}

// With a budget of 60 events an execution takes ~15 pages (3 steps each) before it continues.
const SMALL_BUDGET = { historyEventBudget: 60 };

describe('a run that continues, with one sync run allowed per environment', () => {
  it('keeps its run slot from one execution to the next and finishes', async () => {
    const { definition, ref } = await define('slotted');
    const began = Date.now();
    await control.ensureSync(definition, ref.connectionId, SMALL_BUDGET);
    const status = await settled(ref, 1);
    expect(status.latestError).toBeNull();
    expect(status.latestResult?.executions?.length).toBeGreaterThanOrEqual(3);
    expect(status.latestResult?.models['Record']).toMatchObject({ added: TOTAL, updated: 0, deleted: 0 });
    expect(await live(ref.connectionId)).toBe(TOTAL);
    // Never waited for its own slot (a wait is 10 attempts of beginRun, ~90 s, then environment_busy).
    expect(Date.now() - began).toBeLessThan(60_000);
    // The slot went back when the run was recorded.
    expect(await slots()).toEqual([]);
    await control.stop(ref, 'test over');
  }, 240_000);

  it('a pause while the run continues stops it at its next continuation, its checkpoint kept; a start goes on from it', async () => {
    const { definition, ref } = await define('paused');
    let release = (): void => undefined;
    held.set(ref.connectionId, new Promise<void>((resolve) => (release = resolve)));
    await control.ensureSync(definition, ref.connectionId, SMALL_BUDGET);
    // The run's first page is in flight: pause the sync, then let the run go on.
    await eventually(async () => ((hits.get(ref.connectionId) ?? 0) > 0 ? true : undefined), 60_000, 'the first page');
    await control.pause(ref);
    held.delete(ref.connectionId);
    release();
    const stopped = await settled(ref, 1);
    expect(stopped.latestError?.code).toBe('sync_paused');
    expect(stopped.latestError?.message).toMatch(/stopped at its continuation after execution 1.*checkpoint kept/);
    expect(stopped.paused).toBe(true);
    const saved = await live(ref.connectionId);
    expect(saved).toBeGreaterThan(0);
    expect(saved).toBeLessThan(TOTAL);
    const checkpoint = await new CheckpointStore(h.pool).get({ ...ref });
    expect(checkpoint).not.toBeNull();
    // Paused: no execution goes on (the page count stays where the stop left it).
    const fetched = hits.get(ref.connectionId);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(hits.get(ref.connectionId)).toBe(fetched);
    expect(await slots()).toEqual([]);

    await control.resume(ref);
    const resumed = await settled(ref, 2);
    expect(resumed.latestError).toBeNull();
    expect(await live(ref.connectionId)).toBe(TOTAL);
    // The second run began at the checkpoint: the pages before it were not fetched again.
    expect(hits.get(ref.connectionId)).toBeLessThanOrEqual(TOTAL / PAGE + 1 + 3);
    await control.stop(ref, 'test over');
  }, 300_000);
});
