/**
 * A sync entity's run is stopped `script_runaway` once UNEXPLAINED_ATTEMPTS (10) workflow tasks were lost
 * without a recorded cause since the execution last completed one (src/temporal/runaway.ts
 * findRunawayEntityRun). A run inside its entity lives as long as its script, with a 4 s workflow task
 * timeout, so a long healthy run loses tasks whenever its worker stalls past 4 s (a long GC, a starved
 * machine, a VM pause) and makes progress between the stalls; counted over the whole execution, as it
 * was, such losses convicted it (found by a hostile review; a 1,000,000-record backfill failed so). This
 * test stalls the worker process (SIGSTOP, 6 s) 14 times during a healthy run that advances between
 * stalls: the run must not be stopped.
 */
import { describe, expect, it } from 'vitest';
import { readRunCommit } from '../../src/steps/stepLedger.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { recordsSync, useRuntime } from '../kit/runtime.js';
import { startWorkerProcess } from '../kit/processWorker.js';
import { cursorSync } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const PAGES = 2000;
const STALLS = 14;

describe('a healthy long run whose worker stalls now and then', () => {
  it(`${STALLS} stalls of 6 s, progress between them: the run is not convicted`, async () => {
    const h = await useRuntime({ worker: false });
    const control = createSyncControl({
      client: h.client,
      taskQueue: h.taskQueue,
      committedRun: (executionRunId) => readRunCommit(h.pool, executionRunId),
    });
    let requests = 0;
    const api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const start = Number(url.searchParams.get('cursor') ?? '0');
      requests += 1;
      setTimeout(() => {
        json(response, 200, {
          items: [{ id: `r${start}`, title: `record ${start}` }],
          next: start + 1 < PAGES ? String(start + 1) : null,
        });
      }, 200);
    });
    const script = cursorSync(1, 'Record', ['id', 'title']);
    const definition = recordsSync({
      runsMs: 3600_000,
      scriptHash: await h.scripts.put(script),
    });
    const ref = { ...definition, connectionId: 'stalled-run' };
    const worker = await startWorkerProcess({ databaseUrl: h.dbUrl, taskQueue: h.taskQueue, apiBaseUrl: api.url });
    const stalled = async (ms: number) => {
      worker.child.kill('SIGSTOP');
      await new Promise((resolve) => setTimeout(resolve, ms));
      worker.child.kill('SIGCONT');
    };
    try {
      const workflowId = await control.ensureSync(definition, ref.connectionId);
      const { runId: execution } = await h.client.workflow.getHandle(workflowId).describe();
      await eventually(async () => (requests >= 3 ? true : undefined), 60_000, 'the run under way');
      const history = async () =>
        (await h.client.workflow.getHandle(workflowId, execution).fetchHistory()).events ?? [];
      const completed = async () => (await history()).filter((e) => e.workflowTaskCompletedEventAttributes).length;
      let stuckAfter = 0;
      for (let i = 0; i < STALLS; i++) {
        const tasks = await completed();
        await stalled(6000);
        // Progress after the stall: the run goes on, healthy (pages fetched, a workflow task completed).
        const before = requests;
        const progressed = await eventually(
          async () => (requests >= before + 3 && (await completed()) > tasks + 1 ? true : undefined),
          90_000,
          `progress after stall ${i + 1}`,
        ).catch(() => false);
        if (!progressed) {
          stuckAfter = i + 1;
          break;
        }
        const d = await h.client.workflow.getHandle(workflowId, execution).describe();
        if (d.status.name !== 'RUNNING') break;
      }
      const events = await history();
      const lost = events.filter((e) => e.workflowTaskTimedOutEventAttributes || e.workflowTaskFailedEventAttributes);
      const verdicts = events.filter((e) => e.workflowExecutionSignaledEventAttributes?.signalName?.includes('erdict'));
      const d = await h.client.workflow.getHandle(workflowId, execution).describe();
      const runs = await h.pool.query<{ status: string; error_code: string | null }>(
        'SELECT status, error_code FROM sync_runs WHERE connection_id = $1',
        [ref.connectionId],
      );
      console.log(
        `[stalled run] stuck after stall ${stuckAfter} (0: never); ${requests} requests; last events ${JSON.stringify(events.slice(-12).map((e) => e.eventType))}; execution ${d.status.name}; ${lost.length} lost tasks recorded; ${verdicts.length} verdict signals; runs ${JSON.stringify(runs.rows)}`,
      );
      // A stall that fell inside an activation: its isolate timeout is excused (src/temporal/processStalls.ts).
      const excused = worker.output().match(/worker process stood still/g)?.length ?? 0;
      console.log(`[stalled run] activations interrupted during a stall, retried: ${excused}`);
      if (stuckAfter > 0) console.log(`[stalled run] worker output:\n${worker.output().slice(-3000)}`);
      expect({ stuckAfter, execution: d.status.name, verdicts: verdicts.length }).toEqual({
        stuckAfter: 0,
        execution: 'RUNNING',
        verdicts: 0,
      });
      await control.stop(ref, 'test over');
    } finally {
      worker.child.kill('SIGCONT');
      worker.child.kill('SIGTERM');
      await worker.exited;
    }
  }, 400_000);
});
