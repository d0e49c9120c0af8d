/**
 * Exact resume across a continuation boundary (issue 32): a run of 3,000 records at pages of 20 whose
 * lowered history budget makes it continue in a next execution every ~30 pages, its worker process
 * killed with SIGKILL three times: right as a new execution of the run appears (its first workflow task,
 * which begins the execution and reads the checkpoint, under way), in the middle of an execution, and at
 * the next new execution again. The run completes as one run: each page fetched once but at most the
 * one in flight at each kill, each record stored once, the totals exact, every execution listed.
 */
import { describe, expect, it } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { recordsSync, startCursorApi, useRuntime } from '../kit/runtime.js';
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

      const status = await eventually<SyncStatus>(
        async () => {
          const current = await control.status(ref);
          return current.finishedAt !== null && current.status !== 'running' ? current : undefined;
        },
        240_000,
        'the run to end',
      );
      const repeated = [...pageHits.values()].filter((n) => n > 1).length;
      const executions = status.latestResult?.executions ?? [];
      console.log(
        `[continuation crash] killed ${kills.join('; ')} of ${PAGES} pages; ${requests()} requests (${repeated} pages fetched twice); ${executions.length} executions`,
      );
      expect(status.latestError).toBeNull();
      expect(executions.length).toBeGreaterThanOrEqual(4);
      expect(executions[0]).toBe(`${workflowId}:run:${first}`);
      expect(pageHits.size).toBe(PAGES);
      expect([...pageHits.values()].every((n) => n >= 1 && n <= 2)).toBe(true);
      // A page in flight at each kill, and at each cut the page before the refused saveCheckpoint
      // (docs/scripts.md "Resumable syncs": at most one page fetched again per continuation).
      const cuts = executions.length - 1;
      expect(repeated).toBeLessThanOrEqual(kills.length + cuts);
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
