/**
 * The runaway watch of sync runs (issue 31; docs/architecture.md "Runaway scripts"). A sync run runs
 * inside its sync entity's execution, so there is no run of its own to terminate and no `watchRun`
 * activity beside it: the worker process that executes a run watches it. The entity tells that worker,
 * through a workflow sink (nothing in the history), that its run is under way and when it has ended
 * (workflows/manageSync.ts); a sink call made in an activation that then fails (an interrupted
 * statement) still reaches this process, since the SDK collects sink calls after every activation,
 * failed ones included. Every WATCH_INTERVAL_MS this process looks at each run under way here for
 * longer than that (most runs end sooner and cost no look-up): a run whose workflow tasks keep being
 * lost with evidence of a runaway script (src/temporal/runaway.ts findRunawayEntityRun) is stopped
 * (stopEntityRun), and its entity goes on. A run that kills its worker (memory) is blamed by the next
 * process (src/temporal/scriptThreads.ts), which stops it the same way.
 */
import type { Client } from '@temporalio/client';
import type { InjectedSinks } from '@temporalio/worker';
import type { RunWatchSinks } from '../runtime/definitions.js';
import { log } from '../log.js';
import { findRunawayEntityRun, stopEntityRun } from './runaway.js';

/** How often the runs under way are looked at, and how old a run is before its first look. */
export const WATCH_INTERVAL_MS = 5000;

export interface RunWatch {
  sinks: InjectedSinks<RunWatchSinks>;
  /** Whether a run is under way in this execution of a sync entity, here. */
  watching(workflowId: string, runId: string): boolean;
  stop(): void;
}

export function createRunWatch(client: () => Client, intervalMs = WATCH_INTERVAL_MS): RunWatch {
  const runs = new Map<string, { workflowId: string; runId: string; since: number }>();
  const key = (workflowId: string, runId: string) => `${workflowId}\n${runId}`;
  let checking = false;

  async function check(): Promise<void> {
    const due = [...runs.entries()].filter(([, run]) => Date.now() - run.since >= intervalMs);
    for (const [at, run] of due) {
      try {
        const { verdict, running } = await findRunawayEntityRun(client(), run.workflowId, run.runId);
        // Ended while this process was not looking (another worker took it over and finished it).
        if (!running) runs.delete(at);
        if (!verdict) continue;
        runs.delete(at);
        log.warn(
          { component: 'worker', workflowId: run.workflowId, runId: run.runId },
          `[worker] stopping the run of ${run.workflowId}: ${verdict.code}`,
        );
        await stopEntityRun(client(), run.workflowId, run.runId, verdict);
      } catch (error) {
        log.warn(
          { component: 'worker', workflowId: run.workflowId },
          `[worker] run watch of ${run.workflowId}: ${(error as Error).message}`,
        );
      }
    }
  }

  const timer = setInterval(() => {
    if (checking || runs.size === 0) return;
    checking = true;
    void check().finally(() => {
      checking = false;
    });
  }, intervalMs);
  timer.unref();

  return {
    sinks: {
      runWatch: {
        active: {
          fn(info) {
            const at = key(info.workflowId, info.runId);
            if (!runs.has(at)) runs.set(at, { workflowId: info.workflowId, runId: info.runId, since: Date.now() });
          },
        },
        ended: {
          fn(info) {
            runs.delete(key(info.workflowId, info.runId));
          },
        },
      },
    },
    watching: (workflowId, runId) => runs.has(key(workflowId, runId)),
    stop: () => clearInterval(timer),
  };
}
