/**
 * The durability proof: a sync of 50,000 records over a paginated fake API, its worker process killed
 * with SIGKILL three times (once in its first pages) and started again each time. The run resumes at
 * the step it was on: each page is fetched once, except the one in flight at a kill; no record is saved
 * twice; its history replays deterministically.
 */
import { describe, expect, it } from 'vitest';
import { Worker } from '@temporalio/worker';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { RUN_WORKFLOW_TASK_TIMEOUT_MS, type RunSyncInput, type SyncRunResult } from '../../src/runtime/definitions.js';
import { stack } from '../kit/stack.js';
import { recordsSync, startCursorApi, useRuntime } from '../kit/runtime.js';
import { startStandbyWorker, startWorkerProcess } from '../kit/processWorker.js';

const TOTAL = 50_000;
const PAGE = 100;
const PAGES = TOTAL / PAGE;

describe('a sync survives SIGKILL of its worker process', () => {
  it('50,000 records, three kills: each stored once, each page fetched once but the one in flight at each kill, replay is deterministic', async () => {
    const h = await useRuntime({ worker: false });
    const { url, pageHits, hitTimes, script } = await startCursorApi(TOTAL, PAGE);
    const api = { url };
    const scriptHash = await h.scripts.put(script);
    const input: RunSyncInput = {
      definition: recordsSync({ scriptHash }),
      connectionId: 'crash',
      mode: 'incremental',
    };

    const workerOptions = { databaseUrl: h.dbUrl, taskQueue: h.taskQueue, apiBaseUrl: api.url };
    let worker = await startWorkerProcess(workerOptions);
    // Each kill's replacement is started beforehand and polls only after the kill (a warm standby, as
    // src/main.ts keeps one): a recovery measures the run's takeover, not a process start.
    const standby = () => {
      const started = startStandbyWorker(workerOptions);
      started.catch(() => undefined);
      return started;
    };
    let next = standby();
    await next;
    const workflowId = syncRunId({ ...input.definition, connectionId: input.connectionId }, 'crash-test');
    const handle = await h.client.workflow.start<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
      workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
    });

    // Three kills: one in the first pages of the run (its first workflow task, before any marker is
    // recorded), two at varying points later, so that repeated runs probe every position in the
    // workflow task's heartbeat window.
    const killPoints = [
      3 + Math.floor(Math.random() * 5),
      Math.floor(PAGES * (0.2 + Math.random() * 0.15)),
      Math.floor(PAGES * (0.45 + Math.random() * 0.2)),
    ];
    const recoveries: number[] = [];
    // From each kill to its replacement's polling.
    const starts: number[] = [];
    try {
      for (const killAt of killPoints) {
        // A run that stops fetching fails here, saying where, not as the test's timeout.
        let stalled = Date.now() + 60_000;
        for (let seen = hitTimes.length; pageHits.size < killAt;) {
          if (hitTimes.length > seen) [seen, stalled] = [hitTimes.length, Date.now() + 60_000];
          if (Date.now() > stalled)
            throw new Error(
              `no request in 60 s at page ${pageHits.size} of ${PAGES} (next kill at ${killAt}); worker said:\n${worker.output().slice(-3000)}`,
            );
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        const replacement = await next;
        worker.child.kill('SIGKILL');
        const killedAt = Date.now();
        const requestsAtKill = hitTimes.length;
        await worker.exited;
        worker = await replacement.run();
        starts.push(Date.now() - killedAt);
        if (killAt !== killPoints.at(-1)) next = standby();
        // Recovery: from the kill to the first request of the resumed run.
        const deadline = Date.now() + 60_000;
        while (hitTimes.length === requestsAtKill) {
          if (Date.now() > deadline)
            throw new Error(
              `no request in 60 s after the kill at page ${killAt}; worker said:\n${worker.output().slice(-3000)}`,
            );
          await new Promise((resolve) => setTimeout(resolve, 5));
        }
        recoveries.push(hitTimes[requestsAtKill]! - killedAt);
      }
      const result = await Promise.race([
        handle.result(),
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error(`run not done; worker said:\n${worker.output().slice(-3000)}`)), 150_000),
        ),
      ]);
      const requests = [...pageHits.values()].reduce((sum, n) => sum + n, 0);
      const repeated = [...pageHits.values()].filter((n) => n > 1).length;
      console.log(
        `[crash] killed at pages ${killPoints.join(', ')} of ${PAGES}; ${requests} requests for ${PAGES} pages ` +
          `(${repeated} pages fetched twice; bound: 1 in flight per kill); requests resumed ${recoveries.join(', ')} ms after each kill (its standby polling after ${starts.join(', ')} ms)`,
      );

      // Exact resume: every page fetched, each at most twice, and only one page per kill (the one in flight).
      expect(pageHits.size).toBe(PAGES);
      expect([...pageHits.values()].every((n) => n >= 1 && n <= 2)).toBe(true);
      expect(repeated).toBeLessThanOrEqual(killPoints.length);
      expect(requests).toBe(PAGES + repeated);

      // Each record stored once, never updated; the run's counts are exact even for the repeated steps.
      expect(result.models['Record']).toEqual({ added: TOTAL, updated: 0, deleted: 0, unchanged: 0 });
      expect(result.recordCounts).toEqual({ Record: TOTAL });
      const stored = await h.pool.query<{ n: string; ids: string; added: string }>(
        "SELECT count(*) AS n, count(DISTINCT id) AS ids, count(*) FILTER (WHERE last_action = 'ADDED') AS added FROM records WHERE sync_name = 'records'",
      );
      expect(stored.rows[0]).toEqual({ n: String(TOTAL), ids: String(TOTAL), added: String(TOTAL) });
      // The run's end forgets every step of the ledger (an ordinary activity, after Temporal holds them).
      const ledger = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM script_steps');
      expect(Number(ledger.rows[0]!.n)).toBe(0);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }

    // The recorded history, crash and all, replays on the current workflow code without non-determinism.
    const history = await handle.fetchHistory();
    const { workflowBundlePath } = stack();
    await Worker.runReplayHistory(
      { workflowBundle: { codePath: workflowBundlePath }, dataConverter: createDataConverter({ db: h.pool }) },
      history,
      workflowId,
    );
    const events = history.events?.length ?? 0;
    console.log(`[crash] history: ${events} events for ${PAGES * 2} svc operations`);
    // Local activities: one marker per operation, plus the workflow tasks around them.
    expect(events).toBeLessThan(PAGES * 2 * 1.1);
  }, 300_000);
});
