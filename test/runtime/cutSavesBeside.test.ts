/**
 * Two saveCheckpoint calls side by side at a limit (a hostile review of the version-9 rule, 30 November):
 * two branches of one sync, each saving where it goes on from, then its page. Both saves are probes at
 * the limit; the later one claims its index as not executed, and the earlier one, finding that claim
 * past it, took it for a step a worker had gone past: it saved and stood while the execution ended
 * through the other, and the page its checkpoint pointed past was never stored (1,100-1,180 of 1,200,
 * the run reported successful). A claim as not executed is no step anyone went past. No worker is killed.
 */
import { describe, expect, it } from 'vitest';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { recordsSync, runEnded, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const TOTAL = 1200;
const HALF = TOTAL / 2;
const PAGE = 20;
/** Large records: the first save of each pair carries the run's deferred reads, a longer transaction. */
const PAD = 'x'.repeat(2000);

const TWO_BRANCHES = bundle(`async function sync(svc) {
  const saved = await svc.getCheckpoint();
  const committed = saved ? { a: saved.a, b: saved.b } : { a: '0', b: '${HALF}' };
  const ends = { a: ${HALF}, b: ${TOTAL} };
  const fetch = (key) =>
    committed[key] === 'done'
      ? null
      : svc.get({ endpoint: '/records', params: { cursor: committed[key], limit: ${PAGE}, end: ends[key] } });
  for (;;) {
    const [ra, rb] = await Promise.all([fetch('a'), fetch('b')]);
    if (!ra && !rb) break;
    const take = async (key, res) => {
      if (!res) return;
      const next = res.data.next === null ? 'done' : res.data.next;
      // Where this branch goes on from, then its page.
      await svc.saveCheckpoint({ ...committed, [key]: next });
      await svc.batchSave(res.data.items, 'Record');
      committed[key] = next;
    };
    await Promise.all([take('a', ra), take('b', rb)]);
  }
  await svc.clearCheckpoint();
}`);

describe('two saves side by side at an execution limit', () => {
  it('stores and counts every record once', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://fake');
      const start = Number(url.searchParams.get('cursor'));
      const end = Number(url.searchParams.get('end'));
      const count = Math.min(Number(url.searchParams.get('limit')), end - start);
      const items = Array.from({ length: count }, (_, i) => ({ id: `r${start + i}`, title: PAD, n: start + i }));
      json(response, 200, { items, next: start + count < end ? String(start + count) : null });
    });
    h.connections.setBaseUrl(api.url);
    const definition = recordsSync({ runsMs: 3600_000, scriptHash: await h.scripts.put(TWO_BRANCHES) });
    const ref = { ...definition, connectionId: 'saves-beside' };
    await control.ensureSync(definition, ref.connectionId, { executionOperationLimit: 30, maxExecutions: 200 });
    const status = await runEnded(control, ref);
    const stored = await h.pool.query<{ n: string }>("SELECT count(*) AS n FROM records WHERE sync_name = 'records'");
    const counts = status.latestResult?.models['Record'];
    console.log(
      `[cutSavesBeside] counts ${JSON.stringify(counts)}; stored ${stored.rows[0]!.n}; executions ${status.latestResult?.executions?.length}; error ${JSON.stringify(status.latestError)}`,
    );
    expect(status.latestError).toBeFalsy();
    expect(Number(stored.rows[0]!.n)).toBe(TOTAL);
    expect(counts).toMatchObject({ added: TOTAL, updated: 0, deleted: 0 });
    await control.stop(ref, 'test over');
  }, 600_000);
});
