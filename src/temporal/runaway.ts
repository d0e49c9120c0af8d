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
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { decodeOptionalFailureToOptionalError } from '@temporalio/common/lib/internal-non-workflow/index.js';
import {
  ISOLATE_TIMEOUT_MS,
  RUNAWAY_VERDICT_SIGNAL,
  SCRIPT_INCIDENT_SIGNAL,
  type RunawayVerdictSignal,
} from '../runtime/definitions.js';
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
  try {
    const description = await handle.describe();
    // A worker process may have stopped it already (src/temporal/scriptThreads.ts).
    if (description.status.name === 'TERMINATED') return await verdictOfTermination(client, workflowId);
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return null;
    throw error;
  }
  const verdict = await findRunaway(client, workflowId);
  if (verdict) await terminateRunaway(client, workflowId, verdict);
  return verdict;
}

/**
 * Stops the run of a sync entity's execution (issue 31: the run runs in the entity's own execution,
 * which must go on, so it is not terminated). The verdict goes to the execution as a signal; once the
 * signal is in its history, the execution is reset to its first workflow task (Temporal's reset: a new
 * execution that replays the history up to there and applies the signals received since, the verdict
 * among them). Nothing of the run's script is replayed that way, whatever a stuck workflow task left in
 * the history, and the entity, which sees the verdict before it chooses its run, fails the run at once
 * with the verdict's code and message (workflows/manageSync.ts). A reset is one billable action.
 */
export async function stopEntityRun(
  client: Client,
  workflowId: string,
  runId: string,
  verdict: RunawayVerdict,
): Promise<void> {
  const handle = client.workflow.getHandle(workflowId, runId);
  const signalled = (events: HistoryEvents) =>
    events.some((event) => event.workflowExecutionSignaledEventAttributes?.signalName === RUNAWAY_VERDICT_SIGNAL);
  let events: HistoryEvents;
  try {
    events = (await handle.fetchHistory()).events ?? [];
    // A reset keeps the execution's original run id: the verdict names the run across it.
    const started = events[0]?.workflowExecutionStartedEventAttributes;
    const original = started?.originalExecutionRunId || runId;
    if (!signalled(events)) {
      await handle.signal<[RunawayVerdictSignal]>(RUNAWAY_VERDICT_SIGNAL, { runId: original, ...verdict });
    }
    // A signal reaches the history once the workflow task under way ends (a stuck one times out).
    const deadline = Date.now() + VERDICT_LANDING_MS;
    while (!signalled(events)) {
      if (Date.now() > deadline) throw new Error(`the verdict did not reach the history of ${workflowId} in time`);
      await new Promise((resolve) => setTimeout(resolve, 500));
      events = (await handle.fetchHistory()).events ?? [];
    }
  } catch (error) {
    // The execution ended meanwhile: nothing left to stop.
    if (error instanceof WorkflowNotFoundError) return;
    throw error;
  }
  if (!isOpen(events)) return;
  const firstTask = events.find((event) => event.workflowTaskStartedEventAttributes)?.eventId;
  if (firstTask === undefined || firstTask === null) return;
  // Reset only the entity's current execution, while it is stuck: a reset of an execution that has
  // continued as new meanwhile terminates the current one (its pause, its queued signals, its run went
  // with it: a hostile review's test lost a pause so), and an execution that completed a workflow task
  // after the verdict arrived handled the verdict itself (workflows/manageSync.ts fails the run).
  try {
    const current = await client.workflow.getHandle(workflowId).describe();
    if (current.runId !== runId || current.status.name !== 'RUNNING') return;
    const latest = (await handle.fetchHistory()).events ?? [];
    const verdictAt = latest.findIndex(
      (event) => event.workflowExecutionSignaledEventAttributes?.signalName === RUNAWAY_VERDICT_SIGNAL,
    );
    if (!isOpen(latest) || latest.slice(verdictAt + 1).some((event) => event.workflowTaskCompletedEventAttributes)) {
      return;
    }
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return;
    throw error;
  }
  try {
    await client.workflowService.resetWorkflowExecution({
      namespace: client.options.namespace,
      workflowExecution: { workflowId, runId },
      reason: `${verdict.code}: stopping its run (the sync goes on)`,
      workflowTaskFinishEventId: firstTask,
      requestId: randomUUID(),
    });
  } catch (error) {
    // Closed meanwhile (the run ended after all), or reset already by another worker's watch.
    if (!isGrpcCode(error, [5, 9])) throw error;
  }
}

/**
 * Whether the run of a sync entity's execution is runaway, and whether the execution still runs. Its
 * workflow task's attempt count alone does not tell (a workflow task that a local activity kept open
 * completes on its heartbeat, which starts the count again), so the evidence is counted since the
 * execution last completed a workflow task: every workflow task it lost since (failed or timed out:
 * those the history holds, and the attempts of the task under way before this one), at least RUNAWAY_ATTEMPTS, with an
 * isolate timeout among the recorded failures (`script_timeout`), or INCIDENTS_TO_STOP incidents
 * (`script_out_of_memory`), or UNEXPLAINED_ATTEMPTS of them (`script_runaway`).
 */
export async function findRunawayEntityRun(
  client: Client,
  workflowId: string,
  runId: string,
): Promise<{ verdict: RunawayVerdict | null; running: boolean }> {
  const handle = client.workflow.getHandle(workflowId, runId);
  let attempt: number;
  try {
    const description = await handle.describe();
    if (description.status.name !== 'RUNNING') return { verdict: null, running: false };
    attempt = description.raw.pendingWorkflowTask?.attempt ?? 0;
  } catch (error) {
    if (error instanceof WorkflowNotFoundError) return { verdict: null, running: false };
    throw error;
  }
  // Only what happened since the run last completed a workflow task counts: a healthy long run whose
  // worker stalled now and then (a GC pause, a starved machine, a restart) lost tasks in between, and
  // counted over the whole execution ten such losses convicted it (script_runaway, a 1,000,000-record
  // backfill at load 17-22 and test/runtime/stalledHealthyRun.test.ts).
  const events = sinceLastProgress((await handle.fetchHistory()).events ?? []);
  const recorded = events.filter(
    (event) => event.workflowTaskFailedEventAttributes || event.workflowTaskTimedOutEventAttributes,
  ).length;
  // The task under way at attempt N follows N - 1 lost attempts, the first of which the history holds.
  const lost = recorded + Math.max(0, attempt - 2);
  if (lost < RUNAWAY_ATTEMPTS) return { verdict: null, running: true };
  return { verdict: await verdictOf(client, events, lost, 'since its last completed workflow task'), running: true };
}

/** How long stopEntityRun waits for its verdict to reach the history (a stuck task times out in 4 s). */
const VERDICT_LANDING_MS = 60_000;

function isOpen(events: HistoryEvents): boolean {
  const last = events.at(-1);
  return !(
    last?.workflowExecutionCompletedEventAttributes ||
    last?.workflowExecutionFailedEventAttributes ||
    last?.workflowExecutionTerminatedEventAttributes ||
    last?.workflowExecutionTimedOutEventAttributes ||
    last?.workflowExecutionCanceledEventAttributes ||
    last?.workflowExecutionContinuedAsNewEventAttributes
  );
}

/** A gRPC error of one of these codes (5 NOT_FOUND, 9 FAILED_PRECONDITION, …). */
function isGrpcCode(error: unknown, codes: number[]): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' && codes.includes(code);
}

/**
 * Whether a running workflow's task keeps failing with evidence of a runaway script in its history
 * (see the file's comment); null for a healthy, finished or unknown one.
 */
async function findRunaway(client: Client, workflowId: string): Promise<RunawayVerdict | null> {
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
  // Only what happened since the run last made progress counts: an old incident or an interrupted
  // statement that a later workflow task got past is not evidence against it now.
  const events = sinceLastProgress((await handle.fetchHistory()).events ?? []);
  return verdictOf(client, events, attempt, 'in a row');
}

/** The verdict `events` support, for a run whose workflow task was lost `lost` times; null for none. */
async function verdictOf(
  client: Client,
  events: HistoryEvents,
  lost: number,
  how: 'in a row' | 'since its last completed workflow task',
): Promise<RunawayVerdict | null> {
  const incidents = events.filter(
    (event) => event.workflowExecutionSignaledEventAttributes?.signalName === SCRIPT_INCIDENT_SIGNAL,
  ).length;
  return (
    isolateTimeoutVerdict(await taskFailureMessages(client, events), lost) ??
    (incidents >= INCIDENTS_TO_STOP ? outOfMemoryVerdict(incidents) : null) ??
    (lost >= UNEXPLAINED_ATTEMPTS
      ? {
          code: 'script_runaway' as const,
          message: `the run's workflow task was lost ${lost} times ${how} without a recorded cause (a worker that keeps dying?): run stopped`,
        }
      : null)
  );
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
  evidence: { incidents: number; heavy: boolean; runId?: string | undefined },
): Promise<RunawayVerdict | null> {
  // A sync entity runs its run in its own execution: that execution is stopped by signal, not
  // terminated, and only that one: once it has ended (continued as new), its run is over and the
  // entity's next run is not the one blamed.
  const description = await client.workflow.getHandle(workflowId, evidence.runId).describe();
  if (description.type === 'manageSync' && description.status.name !== 'RUNNING') return null;
  const entityRun = description.type === 'manageSync' ? description.runId : undefined;
  const events = sinceLastProgress(
    (await client.workflow.getHandle(workflowId, entityRun).fetchHistory()).events ?? [],
  );
  const verdict: RunawayVerdict =
    isolateTimeoutVerdict(await taskFailureMessages(client, events), evidence.incidents) ??
    (evidence.heavy
      ? outOfMemoryVerdict(evidence.incidents)
      : {
          code: 'script_runaway',
          message: `its worker died ${evidence.incidents} times while it was executing this script (a statement that never ends, or memory exhaustion): run stopped`,
        });
  if (entityRun !== undefined) await stopEntityRun(client, workflowId, entityRun, verdict);
  else await terminateRunaway(client, workflowId, verdict);
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
