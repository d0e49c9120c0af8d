/**
 * The worker-process side of the script sandbox (src/sandbox/sdkInternals.ts lists the SDK internals it
 * relies on; src/sandbox/hostRealm.ts is the workflow-thread side). The rest of the service uses only
 * these functions:
 * - `sandboxWorkerOptions()`: the Worker options the sandbox needs (the isolate execution timeout);
 * - `shareThreadMarks()`: tells the workflow threads, before they start, where to keep their marks;
 * - `isThreadDeath()`, `isIsolateTimeout()`: read the SDK's failures;
 * - `workerClassWithThreads()`: a Worker class whose workflow threads the caller arranges (each its own
 *   creator, src/temporal/lanes.ts decides which workflow lives on which and when each activates).
 */
import { closeSync, openSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { setPriority } from 'node:os';
import { setEnvironmentData } from 'node:worker_threads';
import type { Logger } from '@temporalio/common';
import { Worker, type WorkerOptions } from '@temporalio/worker';
import type { CompiledWorkerOptions } from '@temporalio/worker/lib/worker-options.js';
import type { WorkflowCreator } from '@temporalio/worker/lib/workflow/interface.js';
import type { WorkflowBundleWithSourceMapAndFilename } from '@temporalio/worker/lib/workflow/workflow-worker-thread/input.js';
import { ISOLATE_TIMEOUT_MS, THREAD_MARKS_DATA_KEY } from '../runtime/definitions.js';
import { ISOLATE_TIMEOUT_FAILURE, ISOLATE_TIMEOUT_OPTION, THREAD_DEATH_FAILURE } from './sdkInternals.js';

export type { WorkflowCreator };

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

/**
 * A Worker class whose workflow threads are `threads` creators of one thread each, which `arrange` turns
 * into the one creator the Worker uses (sdkInternals.ts WORKFLOW_CREATOR_HOOK: the protected static
 * `Worker.createWorkflowCreator`, called by `Worker.create` on the class it was called on). A Worker in
 * debug mode (no threads) is left as the SDK makes it.
 */
export function workerClassWithThreads(
  threads: number,
  arrange: (
    creators: WorkflowCreator[],
    threadCpuMs: (index: number) => number | undefined,
    threadWaitMs: (index: number) => number | undefined,
  ) => WorkflowCreator,
  options: { lowPriority?: readonly number[] } = {},
): typeof Worker {
  return class WorkerWithThreads extends Worker {
    protected static override async createWorkflowCreator(
      bundle: WorkflowBundleWithSourceMapAndFilename,
      compiledOptions: CompiledWorkerOptions,
      logger: Logger,
    ): Promise<WorkflowCreator> {
      if (compiledOptions.debugMode) return super.createWorkflowCreator(bundle, compiledOptions, logger);
      const creators: WorkflowCreator[] = [];
      const threadIds: number[][] = [];
      for (let index = 0; index < threads; index++) {
        const before = osThreads();
        creators.push(
          await super.createWorkflowCreator(bundle, { ...compiledOptions, workflowThreadPoolSize: 1 }, logger),
        );
        threadIds.push(osThreads().filter((id) => !before.includes(id)));
        if (options.lowPriority?.includes(index)) lowerPriority(threadIds[index]!, logger);
      }
      // Read before every activation: through descriptors kept open while the threads run (procFiles).
      const files = procFiles();
      const arranged = arrange(
        creators,
        (index) => threadCpuMs(threadIds[index] ?? [], files.read),
        (index) => threadWaitMs(threadIds[index] ?? [], files.read),
      );
      return {
        createWorkflow: (options) => arranged.createWorkflow(options),
        async destroy() {
          try {
            await arranged.destroy();
          } finally {
            files.close();
          }
        },
      };
    }
  };
}

/** Is this failure of an activation the isolate timeout (the SDK's error, not a failed workflow task's message)? */
export function isIsolateTimeoutError(error: unknown): boolean {
  return error instanceof Error && ISOLATE_TIMEOUT_FAILURE.test(error.message);
}

/**
 * Does this activation start a workflow task? Only one whose jobs are all local activities' results
 * continues the task that scheduled them (Core resolves a local activity within the task).
 */
export function startsWorkflowTask(activation: unknown): boolean {
  const jobs = (activation as { jobs?: { resolveActivity?: { isLocal?: boolean } | null }[] | null }).jobs ?? [];
  return !(jobs.length > 0 && jobs.every((job) => job.resolveActivity?.isLocal === true));
}

/** Does this activation replay events of the history (Core's `isReplaying`), rather than run new work? */
export function replaysHistory(activation: unknown): boolean {
  return (activation as { isReplaying?: boolean | null }).isReplaying === true;
}

/** Does the workflow task go on after this activation's completion (it scheduled local activities)? */
export function continuesWorkflowTask(completion: unknown): boolean {
  const commands =
    (completion as { successful?: { commands?: { scheduleLocalActivity?: unknown }[] | null } | null }).successful
      ?.commands ?? [];
  return commands.some((command) => command.scheduleLocalActivity != null);
}

/**
 * Was this activation interrupted by the isolate timeout? The SDK answers it with a failed completion
 * (a failed workflow task) whose failure the service's failure converter has encoded: its message is in
 * the encoded attributes, a JSON payload not yet encrypted at this point (the codec runs afterwards).
 */
export function interruptedByIsolateTimeout(completion: unknown): boolean {
  const failure = (
    completion as {
      failed?: {
        failure?: { message?: string | null; encodedAttributes?: { data?: Uint8Array | null } | null } | null;
      } | null;
    }
  ).failed?.failure;
  if (!failure) return false;
  if (ISOLATE_TIMEOUT_FAILURE.test(failure.message ?? '')) return true;
  const data = failure.encodedAttributes?.data;
  return data != null && ISOLATE_TIMEOUT_FAILURE.test(Buffer.from(data).toString('utf8'));
}

/**
 * The failed completion of an interrupted activation that replayed history, with `message` as its
 * failure in place of the isolate timeout (src/temporal/lanes.ts `replayInterruption`): the server
 * records it as the failed workflow task, and it is not taken for a runaway script's evidence.
 */
export function withReplayFailure(completion: unknown, message: string): unknown {
  const failed = (completion as { failed?: object | null }).failed;
  if (!failed) return completion;
  return { ...(completion as object), failed: { ...failed, failure: { message, source: 'TypeScriptSDK' } } };
}

/**
 * The CPU time these threads of this process used so far, in ms (Linux: /proc/self/task/<id>/stat,
 * utime + stime, at the kernel's 10 ms resolution); undefined where it cannot be read.
 */
export function threadCpuMs(threadIds: readonly number[], read: ProcRead = readProcFile): number | undefined {
  if (threadIds.length === 0) return undefined;
  let ticks = 0;
  try {
    for (const id of threadIds) {
      const stat = read(`/proc/self/task/${id}/stat`);
      // The fields after the command's closing parenthesis, from the 3rd (state): utime is the 14th, stime the 15th.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks += Number(fields[11]) + Number(fields[12]);
    }
  } catch {
    return undefined;
  }
  return Number.isFinite(ticks) ? ticks * (1000 / CLOCK_TICKS_PER_SECOND) : undefined;
}

/**
 * How long these threads of this process waited for a CPU while runnable so far, in ms (Linux:
 * /proc/self/task/<id>/schedstat, its second field, in ns); undefined where it cannot be read. A thread
 * that waits so on a busy machine computes less than the wall clock says; one blocked or stopped does
 * not wait so.
 */
export function threadWaitMs(threadIds: readonly number[], read: ProcRead = readProcFile): number | undefined {
  if (threadIds.length === 0) return undefined;
  let ns = 0;
  try {
    for (const id of threadIds) ns += Number(read(`/proc/self/task/${id}/schedstat`).split(' ')[1]);
  } catch {
    return undefined;
  }
  return Number.isFinite(ns) ? ns / 1e6 : undefined;
}

/** Reads a /proc file whole, as latin1 text; throws where it cannot. */
export type ProcRead = (path: string) => string;

const readProcFile: ProcRead = (path) => readFileSync(path, 'latin1');

/**
 * Reads /proc files again and again, each through a descriptor kept open: a read at offset 0 makes the
 * kernel generate the file anew, one system call instead of readFileSync's open, fstat, read and close.
 * The lanes read their thread's two files before every workflow activation (src/temporal/lanes.ts),
 * on the worker's main thread, where each activation of every run waits behind them. A file that cannot
 * be read (its thread gone) is closed and opened again at the next read, which throws as readFileSync
 * would. `close()` closes them all.
 */
export function procFiles(): { read: ProcRead; close(): void } {
  const open = new Map<string, number>();
  const buffer = Buffer.alloc(4096);
  const forget = (path: string) => {
    const fd = open.get(path);
    open.delete(path);
    if (fd !== undefined) closeSync(fd);
  };
  return {
    read(path) {
      let fd = open.get(path);
      if (fd === undefined) {
        fd = openSync(path, 'r');
        open.set(path, fd);
      }
      let length: number;
      try {
        length = readSync(fd, buffer, 0, buffer.length, 0);
      } catch (error) {
        forget(path);
        throw error;
      }
      // Longer than the buffer (no thread's stat or schedstat is): read the whole file.
      return length < buffer.length ? buffer.toString('latin1', 0, length) : readProcFile(path);
    },
    close() {
      for (const path of [...open.keys()]) forget(path);
    },
  };
}

/** USER_HZ, the unit of /proc's times: 100 on every Linux the service runs on. */
const CLOCK_TICKS_PER_SECOND = 100;

/** The operating system's ids of this process's threads (Linux: /proc/self/task); empty elsewhere. */
export function osThreads(): number[] {
  try {
    return readdirSync('/proc/self/task').map(Number);
  } catch {
    return [];
  }
}

/**
 * Lowers the CPU priority of these threads (the workflow thread just started, by the difference of
 * /proc/self/task) to nice PENALTY_NICE: Linux sets a thread's nice value on its own, so the thread
 * that runs nothing but the workflows of environments past their budget gets about a third of the CPU
 * time of each other busy thread of the machine. Where this is not possible, the thread keeps the
 * process's priority.
 */
function lowerPriority(threadIds: number[], logger: Logger): void {
  for (const id of threadIds) {
    try {
      setPriority(id, PENALTY_NICE);
    } catch (error) {
      logger.debug(`could not lower the priority of workflow thread ${id}: ${String(error)}`);
    }
  }
}

/**
 * The penalty thread's nice value: weight 335 against 1024 for a thread at nice 0. It was 19 (weight
 * 15: 1.5 % of a busy core): on a machine at load 9 (2 cores), the penalty thread then got next to no
 * CPU time, a hot environment's healthy workflows made no progress for minutes (their workflow tasks
 * timed out waiting for it), and the isolate timeout, which is wall time, interrupted a healthy
 * activation there (test/chaos/scripts.test.ts: a runaway and healthy syncs of its environment still
 * running after 240 s). At nice 5 the same test passed at the same load (the lanes excuse a starved
 * interruption once: src/temporal/lanes.ts).
 */
const PENALTY_NICE = 5;
