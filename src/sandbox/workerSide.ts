/**
 * The worker-process side of the script sandbox (src/sandbox/sdkInternals.ts lists the SDK internals it
 * relies on; src/sandbox/hostRealm.ts is the workflow-thread side). The rest of the service uses only
 * these functions:
 * - `sandboxWorkerOptions()`: the Worker options the sandbox needs (the isolate execution timeout);
 * - `shareThreadMarks()`: tells the workflow threads, before they start, where to keep their marks;
 * - `isThreadDeath()`, `isIsolateTimeout()`: read the SDK's failures.
 */
import { setEnvironmentData } from 'node:worker_threads';
import type { WorkerOptions } from '@temporalio/worker';
import { ISOLATE_TIMEOUT_MS, THREAD_MARKS_DATA_KEY } from '../runtime/definitions.js';
import { ISOLATE_TIMEOUT_FAILURE, ISOLATE_TIMEOUT_OPTION, THREAD_DEATH_FAILURE } from './sdkInternals.js';

/**
 * The Worker options of the sandbox: the isolate execution timeout, which interrupts an activation
 * that loop protection could not stop (one endless statement, a flood of microtasks). The option is
 * read by Worker.create but missing from WorkerOptions' type (sdkInternals.ts ISOLATE_TIMEOUT_OPTION).
 */
export function sandboxWorkerOptions(isolateTimeoutMs: number = ISOLATE_TIMEOUT_MS): Partial<WorkerOptions> {
  return { [ISOLATE_TIMEOUT_OPTION]: isolateTimeoutMs } as Partial<WorkerOptions>;
}

/** Where the workflow threads of this process keep their marks (src/temporal/scriptThreads.ts). */
export interface ThreadMarksPlace {
  /** The folder; it must exist. */
  dir: string;
  /** The prefix of this process's files, `<pid>-<nonce>`. */
  owner: string;
}

/**
 * Tells the workflow threads that start from now on where to keep their marks: worker_threads
 * environment data, which every thread spawned later receives a copy of (the SDK starts its workflow
 * threads in Worker.create). Process-wide, like the environment: one folder per process.
 */
export function shareThreadMarks(place: ThreadMarksPlace): void {
  setEnvironmentData(THREAD_MARKS_DATA_KEY, { dir: place.dir, owner: place.owner });
}

/** Is this Worker failure the death of a workflow thread (memory exhaustion), not a lost server? */
export function isThreadDeath(error: unknown): boolean {
  const text = error instanceof Error ? `${error.message} ${String(error.cause)}` : String(error);
  return THREAD_DEATH_FAILURE.test(text);
}

/** Is this failed workflow task's message the SDK's isolate timeout (an interrupted activation)? */
export function isIsolateTimeout(message: string): boolean {
  return ISOLATE_TIMEOUT_FAILURE.test(message);
}
