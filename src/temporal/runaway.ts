/**
 * The runaway-script watchdog (docs/architecture.md "Runaway scripts"). Loops are stopped inside the
 * run by loop protection (workflows/scriptBudget.ts, `script_timeout`). What is left can only be seen
 * from outside the run, because it happens at the same deterministic point on every attempt of its
 * workflow task:
 * - a single statement that runs past the isolate timeout (ISOLATE_TIMEOUT_MS) (a catastrophic regular expression, a
 *   huge JSON.parse): the SDK records its isolate timeout in that run's history (src/sandbox/workerSide.ts);
 * - memory exhaustion: V8 kills the workflow thread, the Worker fails and every run of the process
 *   loses its workflow task; the dying process signals `scriptIncident` to the run that was executing
 *   (src/temporal/scriptThreads.ts).
 * A run with that evidence in its own history, and whose workflow task keeps failing, is terminated
 * with a clear reason. Runs that only lost their workflow task because the process went down have no
 * such evidence and are left to continue; only after UNEXPLAINED_ATTEMPTS lost attempts in a row is
 * a run stopped without it.
 */
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow/index.js';
import { ISOLATE_TIMEOUT_MS, SCRIPT_INCIDENT_SIGNAL } from '../runtime/definitions.js';
import { isIsolateTimeout } from '../sandbox/workerSide.js';

/** Workflow task attempts after which the watchdog looks at a run's history: the first failure plus one retry. */
export const RUNAWAY_ATTEMPTS = 2;
/** Incidents (deaths of the thread while the run was executing) that convict a run of exhausting memory. */
export const INCIDENTS_TO_STOP = 2;
/** Lost workflow task attempts in a row after which a run is stopped even without evidence. */
export const UNEXPLAINED_ATTEMPTS = 10;

export interface RunawayVerdict {
  code: 'script_timeout' | 'script_out_of_memory' | 'script_runaway';
  message: string;
}

/**
 * Checks one run; when its workflow task keeps failing and its history shows why, terminates it and
 * returns why. Returns null for a healthy (or finished, or unknown) run.
 */
export async function stopIfRunaway(client: Client, workflowId: string): Promise<RunawayVerdict | null> {
  const handle = client.workflow.getHandle(workflowId);
  let attempt: number;
  try {
    const description = await handle.describe();
    // A worker process may have stopped it already (src/temporal/scriptThreads.ts).
    if (description.status.name === 'TERMINATED') return await verdictOfTermination(client, workflowId);
    if (description.status.name !== 'RUNNING') return null;
    attempt = description.raw.pendingWorkflowTask?.attempt ?? 0;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  }
  if (attempt < RUNAWAY_ATTEMPTS) return null;
  // Only what happened since the run last made progress counts: an old incident or an interrupted
  // statement that a later workflow task got past is not evidence against it now.
  const events = sinceLastProgress((await handle.fetchHistory()).events ?? []);
  const incidents = events.filter(
    (event) => event.workflowExecutionSignaledEventAttributes?.signalName === SCRIPT_INCIDENT_SIGNAL,
  ).length;
  const verdict =
    isolateTimeoutVerdict(await taskFailureMessages(client, events), attempt) ??
    (incidents >= INCIDENTS_TO_STOP ? outOfMemoryVerdict(incidents) : null) ??
    (attempt >= UNEXPLAINED_ATTEMPTS
      ? {
          code: 'script_runaway' as const,
          message: `the run's workflow task was lost ${attempt} times in a row without a recorded cause (a worker that keeps dying?): run stopped`,
        }
      : null);
  if (!verdict) return null;
  await terminateRunaway(client, workflowId, verdict);
  return verdict;
}

type HistoryEvents = NonNullable<
  Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']
>;

function sinceLastProgress(events: HistoryEvents): HistoryEvents {
  const last = events.findLastIndex((event) => event.workflowTaskCompletedEventAttributes != null);
  return events.slice(last + 1);
}

/**
 * The messages of the failed workflow tasks among `events`. Failures travel encoded (and encrypted)
 * like payloads (src/runtime/failureConverter.cjs), so each is decoded with the client's converter.
 */
async function taskFailureMessages(client: Client, events: HistoryEvents): Promise<string[]> {
  const failures = events.flatMap((event) => {
    const failure = event.workflowTaskFailedEventAttributes?.failure;
    return failure ? [failure] : [];
  });
  return Promise.all(
    failures.map(async (failure) => {
      const error = await decodeOptionalFailureToOptionalError(client.options.loadedDataConverter, failure).catch(
        () => undefined,
      );
      return error?.message ?? failure.message ?? '';
    }),
  );
}

/** An interrupted statement, recorded by the SDK in the run's history as a failed workflow task. */
function isolateTimeoutVerdict(taskFailures: string[], attempts: number): RunawayVerdict | null {
  const recorded = taskFailures.some(isIsolateTimeout);
  return recorded
    ? {
        code: 'script_timeout',
        message: `the script ran for more than ${ISOLATE_TIMEOUT_MS / 1000} s in one statement (or one flood of promise callbacks) without awaiting a svc operation, ${attempts} times: run stopped`,
      }
    : null;
}

/**
 * Stops a run that took its worker down INCIDENTS_TO_STOP times (src/temporal/scriptThreads.ts): as
 * `script_timeout` when its history shows an interrupted statement, `script_out_of_memory` when it
 * had just filled the heap, `script_runaway` otherwise.
 */
export async function convict(
  client: Client,
  workflowId: string,
  evidence: { incidents: number; heavy: boolean },
): Promise<RunawayVerdict> {
  const events = sinceLastProgress((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? []);
  const verdict: RunawayVerdict =
    isolateTimeoutVerdict(await taskFailureMessages(client, events), evidence.incidents) ??
    (evidence.heavy
      ? outOfMemoryVerdict(evidence.incidents)
      : {
          code: 'script_runaway',
          message: `its worker died ${evidence.incidents} times while it was executing this script (a statement that never ends, or memory exhaustion): run stopped`,
        });
  await terminateRunaway(client, workflowId, verdict);
  return verdict;
}

export function outOfMemoryVerdict(incidents: number): RunawayVerdict {
  return {
    code: 'script_out_of_memory',
    message: `the script was exhausting its memory: its worker died ${incidents} times while it was filling the heap: run stopped`,
  };
}

/** Terminates a run with its verdict as the reason, in a form verdictOfTermination reads back. */
export async function terminateRunaway(client: Client, workflowId: string, verdict: RunawayVerdict): Promise<void> {
  try {
    await client.workflow.getHandle(workflowId).terminate(`${verdict.code}: ${verdict.message}`);
  } catch (error) {
    if (!(error instanceof WorkflowNotFoundError)) throw error;
  }
}

const VERDICT_REASON = /^(script_timeout|script_out_of_memory|script_runaway): ([\s\S]*)$/;

/** The verdict of a run that terminateRunaway stopped, or null for a run terminated for another reason. */
async function verdictOfTermination(client: Client, workflowId: string): Promise<RunawayVerdict | null> {
  const events = (await client.workflow.getHandle(workflowId).fetchHistory()).events ?? [];
  const reason = events.at(-1)?.workflowExecutionTerminatedEventAttributes?.reason ?? '';
  const match = VERDICT_REASON.exec(reason);
  return match ? { code: match[1] as RunawayVerdict['code'], message: match[2]! } : null;
}
