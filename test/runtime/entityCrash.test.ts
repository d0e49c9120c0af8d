/**
 * Exact resume of a run inside its sync entity (issue 31; test/runtime/crash.test.ts proves it for a
 * run of its own): a scheduled sync of 20,000 records at pages of 100, its worker process killed with
 * SIGKILL three times, the first time in the run's first workflow task. While the worker is down the
 * entity is paused and handed a new script (a deploy): the workflow task that Temporal retries gets
 * those signals before it chooses its run, and without the run's commit (workflows/manageSync.ts
 * RunCommit) it would choose no run at all (paused), or the new script, leaving the first attempt's
 * steps orphaned. With it, the run that began goes on: each page fetched once but the one in flight at
 * each kill, each record stored once, one run in the run history, and the pause and the new script
 * applied after it. While the worker is down the sync's status is still answered, from the entity's
 * history (src/temporal/entityStatus.ts).
 */
import { describe, expect, it } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { readRunCommit } from '../../src/steps/stepLedger.js';
import { createSyncControl, STATUS_QUERY_MS } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { recordsSync, startCursorApi, useRuntime } from '../kit/runtime.js';
import { startWorkerProcess } from '../kit/processWorker.js';
import { bundle } from '../kit/scripts.js';

const TOTAL = 20_000;
const PAGE = 100;
const PAGES = TOTAL / PAGE;

const doNothing = bundle(`async function sync() {}`);

describe('a run inside its sync entity survives SIGKILL of its worker process', () => {
  it('20,000 records, three kills (the first before its first workflow task completed, with a pause and a deploy meanwhile): the run that began goes on, exactly', async () => {
    const h = await useRuntime({ worker: false });
    const control = createSyncControl({
      client: h.client,
      taskQueue: h.taskQueue,
      committedRun: (executionRunId) => readRunCommit(h.pool, executionRunId),
    });
    const { url, pageHits, script } = await startCursorApi(TOTAL, PAGE);
    const api = { url };
    const definition = recordsSync({
      runsMs: 3600_000,
      scriptHash: await h.scripts.put(script),
    });
    const ref = { ...definition, connectionId: 'entity-crash' };
    const requests = () => [...pageHits.values()].reduce((sum, n) => sum + n, 0);

    let worker = await startWorkerProcess({ databaseUrl: h.dbUrl, taskQueue: h.taskQueue, apiBaseUrl: api.url });
    const workflowId = await control.ensureSync(definition, ref.connectionId);
    const { runId: firstExecution } = await h.client.workflow.getHandle(workflowId).describe();
    const killPoints = [
      3 + Math.floor(Math.random() * 5),
      Math.floor(PAGES * (0.3 + Math.random() * 0.15)),
      Math.floor(PAGES * (0.6 + Math.random() * 0.2)),
    ];
    try {
      for (const [i, killAt] of killPoints.entries()) {
        while (pageHits.size < killAt) await new Promise((resolve) => setTimeout(resolve, 5));
        worker.child.kill('SIGKILL');
        const requestsAtKill = requests();
        await worker.exited;
        if (i === 0) {
          // While the worker is down: a pause and a deploy of another script.
          await control.pause(ref);
          await control.ensureSync({ ...definition, scriptHash: await h.scripts.put(doNothing) }, ref.connectionId);
        }
        if (i === 1) {
          // No worker serves the entity now, so it cannot answer its status query: the status is read
          // from its execution's history (src/temporal/entityStatus.ts), the pause in it, and the run:
          // its beginRun step in the history, or, when the workflow task that began it after the first
          // kill is not recorded yet (a task records its steps every few seconds), its commit in Postgres.
          const asked = Date.now();
          const down = await control.status(ref);
          expect({ status: down.status, paused: down.paused, executions: down.executions }).toEqual({
            status: 'running',
            paused: true,
            executions: 1,
          });
          expect(Date.now() - asked).toBeLessThan(STATUS_QUERY_MS + 30_000);
        }
        worker = await startWorkerProcess({ databaseUrl: h.dbUrl, taskQueue: h.taskQueue, apiBaseUrl: api.url });
        await eventually(
          async () => (requests() > requestsAtKill ? true : undefined),
          60_000,
          `a request after the kill at page ${killAt}`,
        );
      }
      const status = await eventually<SyncStatus>(
        async () => {
          const current = await control.status(ref);
          return current.finishedAt !== null ? current : undefined;
        },
        150_000,
        'the run to end',
      );
      const repeated = [...pageHits.values()].filter((n) => n > 1).length;
      console.log(
        `[entity crash] killed at pages ${killPoints.join(', ')} of ${PAGES}; ${requests()} requests (${repeated} pages fetched twice)`,
      );
      expect(status.latestError).toBeNull();
      expect(pageHits.size).toBe(PAGES);
      expect([...pageHits.values()].every((n) => n >= 1 && n <= 2)).toBe(true);
      expect(repeated).toBeLessThanOrEqual(killPoints.length);
      expect(status.latestResult?.models['Record']).toEqual({ added: TOTAL, updated: 0, deleted: 0, unchanged: 0 });
      expect(status.latestResult?.runId).toBe(`${workflowId}:run:${firstExecution}`);
      // The signals took effect after the run: paused, the new script in force, one run recorded.
      expect(status.paused).toBe(true);
      expect(status.executions).toBe(1);
      const stored = await h.pool.query<{ n: string; ids: string }>(
        "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM records WHERE sync_name = 'records'",
      );
      expect(stored.rows[0]).toEqual({ n: String(TOTAL), ids: String(TOTAL) });
      const runs = await h.pool.query<{ run_id: string; status: string; mode: string }>(
        'SELECT run_id, status, mode FROM sync_runs WHERE connection_id = $1',
        [ref.connectionId],
      );
      expect(runs.rows).toEqual([
        { run_id: `${workflowId}:run:${firstExecution}`, status: 'success', mode: 'incremental' },
      ]);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
    // The execution that ran it, crashes and all, replays on the current workflow code.
    const history: History = await h.client.workflow.getHandle(workflowId, firstExecution).fetchHistory();
    // Its svc.paginate asked no patched(): a patch marker amid the task's local activities can fall in
    // another workflow task on replay than live, and the replay then numbers its steps otherwise.
    const markers = (history.events ?? []).map((event) => event.markerRecordedEventAttributes?.markerName);
    expect(markers).not.toContain('core_patch');
    await expectReplays(h.pool, [{ workflowId, history }]);
    await control.stop(ref, 'test over');
  }, 300_000);
});
