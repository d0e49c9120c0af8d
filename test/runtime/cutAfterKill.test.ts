/**
 * A resumable sync inside its entity with a short execution time limit, its worker SIGKILLed a second
 * before the limit (a hostile review, 29 November). The killed worker saved pages and checkpoints the
 * history never recorded; the worker that takes over answers them from the step ledger, but its clock is
 * past the limit: it ended the execution at an earlier saveCheckpoint than the killed one had saved past,
 * the next execution went on from the stored (later) checkpoint, and the pages between were stored but in
 * no execution's counts (1,580 and 1,820 of 2,000 counted as added). From version 9 the saveCheckpoint
 * at a limit asks the ledger first, and goes on past the saves the killed worker executed.
 */
import { describe, expect, it } from 'vitest';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { recordsSync, runEnded, useRuntime } from '../kit/runtime.js';
import { startStandbyWorker, startWorkerProcess } from '../kit/processWorker.js';
import { resumableSync } from '../kit/scripts.js';
import { cursorPage, json, startFakeUpstream } from '../kit/upstream.js';

const TOTAL = 2000;
const PAGE = 20;
const LIMIT_MS = 6000;
const KILL_MS = 5000;

describe('a kill shortly before an execution time limit', () => {
  it('stores and counts every record once', async () => {
    const h = await useRuntime({ worker: false });
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const pageHits = new Map<number, number>();
    let firstHit = 0;
    const api = await startFakeUpstream(async (request, response) => {
      const { start, answer } = cursorPage(request, TOTAL, (n) => ({ id: `r${n}`, title: `record ${n}`, n }));
      if (firstHit === 0) firstHit = Date.now();
      pageHits.set(start, (pageHits.get(start) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 80));
      json(response, 200, answer);
    });
    const definition = recordsSync({
      runsMs: 3600_000,
      scriptHash: await h.scripts.put(resumableSync({ limit: PAGE })),
    });
    const ref = { ...definition, connectionId: 'cut-after-kill' };
    const workerOptions = { databaseUrl: h.dbUrl, taskQueue: h.taskQueue, apiBaseUrl: api.url };
    let worker = await startWorkerProcess(workerOptions);
    const next = startStandbyWorker(workerOptions);
    await next;
    await control.ensureSync(definition, ref.connectionId, { executionTimeLimitMs: LIMIT_MS });
    try {
      while (firstHit === 0 || Date.now() - firstHit < KILL_MS) await new Promise((resolve) => setTimeout(resolve, 5));
      const pageAtKill = pageHits.size;
      worker.child.kill('SIGKILL');
      await worker.exited;
      worker = await (await next).run();
      const status = await runEnded(control, ref);
      const hits = [...pageHits.values()];
      const stored = await h.pool.query<{ n: string }>("SELECT count(*) AS n FROM records WHERE sync_name = 'records'");
      const counts = status.latestResult?.models['Record'];
      const executions = status.latestResult?.executions ?? [];
      console.log(
        `[cutAfterKill] killed at page ${pageAtKill} (${KILL_MS} ms, limit ${LIMIT_MS} ms); counts ${JSON.stringify(counts)}; ` +
          `stored ${stored.rows[0]!.n}; executions ${executions.length}; requests ${hits.reduce((a, b) => a + b, 0)} for ${pageHits.size} pages; ` +
          `fetched twice: ${[...pageHits]
            .filter(([, n]) => n > 1)
            .map(([s, n]) => `${s / PAGE}×${n}`)
            .join(' ')}; error ${JSON.stringify(status.latestError)}`,
      );
      expect(Number(stored.rows[0]!.n)).toBe(TOTAL);
      expect(counts?.added).toBe(TOTAL);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    await control.stop(ref, 'test over');
  }, 420_000);
});
