/**
 * Exact resume across a continuation boundary (issue 32): a run of 3,000 records at pages of 20 whose
 * lowered history budget makes it continue in a next execution every ~30 pages, its worker process
 * killed with SIGKILL three times: right as a new execution of the run appears (its first workflow task,
 * which begins the execution and reads the checkpoint, under way), in the middle of an execution, and at
 * the next new execution again. The run completes as one run: each page fetched once, but again the one
 * in flight at each kill and the one before each cut's refused saveCheckpoint (a page fetched three
 * times when a kill lands as the next execution fetches that page again), each record stored once, the
 * totals exact, every execution listed.
 */
import { describe, expect, it } from 'vitest';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { recordsSync, runEnded, startCursorApi, useRuntime } from '../kit/runtime.js';
import { startStandbyWorker, startWorkerProcess } from '../kit/processWorker.js';
import { resumableSync } from '../kit/scripts.js';

const TOTAL = 3000;
const PAGE = 20;
const PAGES = TOTAL / PAGE;

const script = resumableSync({ limit: PAGE });

describe('a run that continues past one execution survives SIGKILL of its worker', () => {
  it('3,000 records, ~5 executions, three kills (two as an execution begins): one run, exact', async () => {
    const h = await useRuntime({ worker: false });
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const { url, pageHits } = await startCursorApi(TOTAL, PAGE);
    const definition = recordsSync({
      trackDeletes: true,
      runsMs: 3600_000,
      scriptHash: await h.scripts.put(script),
    });
    const ref = { ...definition, connectionId: 'continuation-crash' };
    const workerOptions = { databaseUrl: h.dbUrl, taskQueue: h.taskQueue, apiBaseUrl: url };
    const requests = () => [...pageHits.values()].reduce((sum, n) => sum + n, 0);
    let worker = await startWorkerProcess(workerOptions);
    let next = startStandbyWorker(workerOptions);
    const workflowId = await control.ensureSync(definition, ref.connectionId, { historyEventBudget: 120 });
    const handle = h.client.workflow.getHandle(workflowId);
    const executionOf = async () => (await handle.describe()).runId;
    const first = await executionOf();

    /** Waits until the entity runs a new execution (the run continued), polling its description. */
    const newExecution = async (after: string): Promise<string> => {
      for (;;) {
        const current = await executionOf();
        if (current !== after) return current;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const kill = async (where: string) => {
      worker.child.kill('SIGKILL');
      const atKill = requests();
      await worker.exited;
      worker = await (await next).run();
      next = startStandbyWorker(workerOptions);
      await eventually(
        async () => (requests() > atKill ? true : undefined),
        90_000,
        `a request after the kill ${where}`,
      );
    };
    const kills: string[] = [];
    try {
      await newExecution(first);
      kills.push(`as execution 2 began (page ${pageHits.size})`);
      await kill(kills.at(-1)!);
      const midway = pageHits.size + 12;
      while (pageHits.size < midway) await new Promise((resolve) => setTimeout(resolve, 5));
      kills.push(`mid-execution (page ${pageHits.size})`);
      await kill(kills.at(-1)!);
      await newExecution(await executionOf());
      kills.push(`as a later execution began (page ${pageHits.size})`);
      await kill(kills.at(-1)!);

      const status = await runEnded(control, ref);
      const hits = [...pageHits.values()];
      const fetches = hits.reduce((sum, n) => sum + n, 0);
      const extras = fetches - pageHits.size;
      const histogram = new Map<number, number>();
      for (const n of hits) histogram.set(n, (histogram.get(n) ?? 0) + 1);
      const byFetches = [...histogram]
        .sort(([a], [b]) => a - b)
        .map(([n, pages]) => `${pages} fetched ${n}×`)
        .join(', ');
      const executions = status.latestResult?.executions ?? [];
      const cuts = executions.length - 1;
      console.log(
        `[continuation crash] killed ${kills.join('; ')} of ${PAGES} pages; ${fetches} requests, ${extras} extra for ${kills.length} kills + ${cuts} cuts (pages: ${byFetches}); ${executions.length} executions`,
      );
      expect(status.latestError).toBeNull();
      expect(executions.length).toBeGreaterThanOrEqual(4);
      expect(executions[0]).toBe(`${workflowId}:run:${first}`);
      // Every page fetched at least once.
      expect(pageHits.size).toBe(PAGES);
      // Each extra fetch explained by a kill (the page in flight) or a cut (the page before the refused
      // saveCheckpoint, fetched again by the next execution: docs/scripts.md "Resumable syncs"). A third
      // fetch of a page needs a kill landing as the next execution fetches that page again, so no page
      // is fetched more than 3 times, and at most one page per kill is fetched 3 times.
      expect(extras).toBeLessThanOrEqual(kills.length + cuts);
      expect(Math.max(...hits)).toBeLessThanOrEqual(3);
      expect(hits.filter((n) => n === 3).length).toBeLessThanOrEqual(kills.length);
      const counts = status.latestResult?.models['Record'];
      expect(counts).toMatchObject({ added: TOTAL, updated: 0, deleted: 0 });
      expect(counts?.unchanged).toBeLessThanOrEqual(cuts * PAGE);
      const stored = await h.pool.query<{ n: string; ids: string; live: string }>(
        "SELECT count(*) AS n, count(DISTINCT id) AS ids, count(*) FILTER (WHERE deleted_at IS NULL) AS live FROM records WHERE sync_name = 'records'",
      );
      expect(stored.rows[0]).toEqual({ n: String(TOTAL), ids: String(TOTAL), live: String(TOTAL) });
      const runs = await h.pool.query<{ run_id: string; status: string; executions: string[] }>(
        'SELECT run_id, status, executions FROM sync_runs WHERE connection_id = $1',
        [ref.connectionId],
      );
      expect(runs.rows).toEqual([{ run_id: executions[0], status: 'success', executions }]);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    await control.stop(ref, 'test over');
  }, 420_000);
});
