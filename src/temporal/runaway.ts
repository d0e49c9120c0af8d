/**
 * The runaway-script watchdog (docs/architecture.md "Runaway scripts"). A script that never yields is
 * interrupted by the worker's isolate execution timeout (5 s), but Temporal then retries the same
 * workflow task forever, every ~10 s, each attempt burning 5 s of a workflow thread. A script that
 * exhausts memory takes its whole worker process down (V8 aborts the process; a worker thread shares
 * the process heap limit), and the run would take down every worker that picks it up again. Neither
 * can be seen from inside the run: the loop or the allocation happens at the same deterministic point
 * on every attempt. So the caller watches: a run whose workflow task has failed or timed out
 * RUNAWAY_ATTEMPTS times in a row is terminated with a clear reason.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';

/** Workflow task attempts after which a run counts as runaway: the first failure plus two retries. */
export const RUNAWAY_ATTEMPTS = 3;

export interface RunawayVerdict {
  code: 'script_timeout' | 'script_runaway';
  message: string;
}

/**
 * Checks one run; when its workflow task keeps failing, terminates it and returns why. Returns null
 * for a healthy (or finished, or unknown) run.
 */
export async function stopIfRunaway(client: Client, workflowId: string): Promise<RunawayVerdict | null> {
  const handle = client.workflow.getHandle(workflowId);
  let attempt: number;
  try {
    const description = await handle.describe();
    if (description.status.name !== 'RUNNING') return null;
    attempt = description.raw.pendingWorkflowTask?.attempt ?? 0;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  }
  if (attempt < RUNAWAY_ATTEMPTS) return null;
  const history = await handle.fetchHistory();
  const failures = (history.events ?? [])
    .map(
      (event) =>
        event.workflowTaskFailedEventAttributes?.failure?.message ??
        (event.workflowTaskTimedOutEventAttributes ? 'timed out' : undefined),
    )
    .filter((message): message is string => message !== undefined);
  const last = failures.at(-1) ?? 'unknown';
  // An interrupted endless loop sometimes aborts the worker process as well; one recorded isolate
  // timeout is enough to name the cause.
  const verdict: RunawayVerdict = failures.some((message) => /Script execution timed out/.test(message))
    ? {
        code: 'script_timeout',
        message: `the script ran for more than 5 s without awaiting a svc operation, ${attempt} times in a row (an endless loop?): run stopped`,
      }
    : {
        code: 'script_runaway',
        message: `the run's workflow task was lost ${attempt} times in a row (last: ${last}): its script took the worker process down, by exhausting its memory or by running without awaiting a svc operation past the 5 s isolate timeout: run stopped`,
      };
  try {
    await handle.terminate(`${verdict.code}: ${verdict.message}`);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
  return verdict;
}
