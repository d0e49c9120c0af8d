import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import {
  Worker,
  type NativeConnection,
  type WorkerOptions,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import {
  continuesWorkflowTask,
  interruptedByIsolateTimeout,
  isIsolateTimeoutError,
  isThreadDeath,
  replaysHistory,
  withReplayFailure,
  sandboxWorkerOptions,
  startsWorkflowTask,
  workerClassWithThreads,
} from '../sandbox/workerSide.js';
import { ISOLATE_TIMEOUT_MS } from '../runtime/definitions.js';
import { createLanes, type RunawayNotice } from './lanes.js';
import { holdingExecutions } from './runningExecutions.js';
import { policingCommands } from './commandPolicy.js';
import { lineLog, log } from '../log.js';
import { stopEntityRun, terminateRunaway } from './runaway.js';
import { createRunWatch } from './runWatch.js';
import { prepareThreadMarks, reportIncidents } from './scriptThreads.js';
import { actionTaskQueue, watchTaskQueue } from '../../workflows/taskQueues.js';
import { loadWorkflowBundle } from './workflowBundle.js';

export { bundleWorkflows, WORKFLOW_INTERCEPTOR_MODULES, WORKFLOWS_PATH } from './workflowBundle.js';

export interface CreateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: object;
  /**
   * The bundle to run (tests build one per run). When omitted, the prebuilt one (src/temporal/workflowBundle.ts),
   * or one bundled on the spot when that is missing or stale.
   */
  workflowBundle?: WorkflowBundleWithSourceMap | { code: string } | { codePath: string } | undefined;
  /** The data converter with external storage (src/runtime/payloadStorage.ts); clients must use the same. */
  dataConverter?: DataConverter | undefined;
  /**
   * The folder where this process's workflow threads keep their marks (src/temporal/scriptThreads.ts;
   * createRuntimeWorkers only). src/service.ts passes SERVICE_THREAD_MARKS_DIR or a folder per
   * process; when omitted, `$TMPDIR/integration-service-threads`.
   */
  threadMarksDir?: string | undefined;
  /** Worker tunables (concurrency, timeouts); the defaults below suit the script runtime. */
  tuning?: Partial<Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue' | 'activities' | 'workflowBundle'>>;
  /**
   * Told when a run's statement was interrupted by the isolate timeout (src/temporal/lanes.ts); the
   * runtime's workers terminate the run with `script_timeout` (or, for a run inside its sync entity,
   * stop that run and let the entity go on). Without it the lanes only confine the environment.
   */
  onRunaway?: ((notice: RunawayNotice) => void) | undefined;
  /** The workflow sinks (createRuntimeWorkers adds its run watch's). */
  sinks?: WorkerOptions['sinks'];
  /** Whether a sync entity's execution runs its script now (the run watch knows: src/temporal/lanes.ts). */
  runsInEntity?: ((workflowId: string, runId: string) => boolean) | undefined;
}

/**
 * Worker settings of the script runtime (docs/architecture.md "Runaway scripts"): a plain Error that
 * escapes a run's workflow code fails that run instead of retrying its workflow task forever. The
 * isolate timeout, which interrupts an activation that loop protection could not stop (one endless
 * statement, a flood of microtasks), is shorter than a run's workflow task timeout
 * (RUN_WORKFLOW_TASK_TIMEOUT_MS, 4 s), so that its failure is still recorded in the run's history,
 * where the watchdog finds it.
 */
export const RUNTIME_WORKER_DEFAULTS = {
  // The isolate timeout (ISOLATE_TIMEOUT_MS), set the way the sandbox module knows the SDK reads it.
  ...sandboxWorkerOptions(),
  workflowFailureErrorTypes: { '*': [], runSync: ['Error'], runAction: ['Error'] },
} satisfies Partial<WorkerOptions>;

/**
 * The workflow threads every environment shares (with reuseV8Context the SDK's default is one): a
 * script that computes up to its budget stalls half of the runs, not all. One more thread, the penalty
 * lane, runs the workflows of environments whose scripts ran past their budget (src/temporal/lanes.ts).
 */
export const SHARED_WORKFLOW_THREADS = 2;

const lanesLog = lineLog('lanes');

/** The Worker class of the runtime: its workflow threads are lanes (src/temporal/lanes.ts). */
function lanedWorker(
  onRunaway: CreateWorkerOptions['onRunaway'],
  runsInEntity: CreateWorkerOptions['runsInEntity'],
): typeof Worker {
  return workerClassWithThreads(
    SHARED_WORKFLOW_THREADS + 1,
    // Each execution the lanes hold is known to the run authority without a describe; the commands of
    // each completion are checked before the SDK sends them (src/temporal/commandPolicy.ts).
    (creators, threadCpuMs, threadWaitMs) =>
      holdingExecutions(
        policingCommands(
          createLanes(creators, {
            threadCpuMs,
            threadWaitMs,
            sharedLanes: SHARED_WORKFLOW_THREADS,
            isIsolateTimeout: isIsolateTimeoutError,
            interrupted: interruptedByIsolateTimeout,
            startsTask: startsWorkflowTask,
            continuesTask: continuesWorkflowTask,
            replaying: replaysHistory,
            replayInterruption: withReplayFailure,
            onRunaway: onRunaway ?? (() => undefined),
            ...(runsInEntity ? { runsInEntity } : {}),
            log: lanesLog,
          }),
          // Without the refusal's message: it names the ids the script chose (a child's, a signal's
          // target), where a script can put what it read. The run's error holds it.
          (sender) =>
            log.warn(
              { component: 'commandPolicy', workflowId: sender.workflowId, workflowType: sender.workflowType },
              "run failed scope_denied, its commands not sent: one of them is outside what its workflow type may send (the run's error says which)",
            ),
        ),
      ),
    // The penalty lane's thread runs at nice 5: about a third of each busy thread's CPU time (src/sandbox/workerSide.ts).
    { lowPriority: [SHARED_WORKFLOW_THREADS] },
  );
}

export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  return lanedWorker(options.onRunaway, options.runsInEntity).create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: options.activities,
    workflowBundle: options.workflowBundle ?? (await loadWorkflowBundle()),
    ...RUNTIME_WORKER_DEFAULTS,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
    ...(options.sinks ? { sinks: options.sinks } : {}),
    ...options.tuning,
  });
}

/**
 * The runtime's workers of one process: `main` polls the task queue (sync entities, sync runs,
 * webhooks), `actions` polls its action queue (actionTaskQueue), with the same activities, bundle,
 * data converter and tuning. Two Workers, so the action runs have slots and a poller of their own and
 * never wait behind a sync backlog (docs/reliability.md, finding 4); one process, so a deployment
 * still runs a single worker process (an operator may start more, each serves every queue). A third,
 * `watch`, runs no workflow: it serves the sync runs' watchdogs (watchTaskQueue), one long activity
 * per open run, with WATCH_SLOTS slots.
 */
export interface RuntimeWorkers {
  main: Worker;
  actions: Worker;
  watch: Worker;
  /**
   * Runs both until shutdown. When either stops (a failure, or a shutdown of only one), the other is
   * shut down too and a failure is rethrown: a process is never left serving one queue only, and its
   * supervisor restarts it.
   */
  run(): Promise<void>;
  /** Shuts down whichever of the two is still running; `run()` resolves once both are done. */
  shutdown(): void;
}

/** Watchdogs one process holds at once: each mostly sleeps, heartbeating every 5 s. */
export const WATCH_SLOTS = 10_000;

export async function createRuntimeWorkers(options: CreateWorkerOptions): Promise<RuntimeWorkers> {
  // Loaded (or bundled) once for both: the code is the same.
  const workflowBundle = options.workflowBundle ?? (await loadWorkflowBundle());
  // Before the Workers start their workflow threads, which learn the folder when they start.
  const marks = prepareThreadMarks(options.threadMarksDir ?? join(tmpdir(), 'integration-service-threads'));
  const client = new Client({
    connection: options.connection,
    namespace: options.namespace,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
  });
  // The sync runs this process executes inside their entities, watched for a runaway script
  // (src/temporal/runWatch.ts).
  const runWatch = createRunWatch(() => client);
  const sinks = { ...runWatch.sinks, ...options.sinks };
  // A run whose statement the isolate timeout interrupted is stopped at once, with its verdict (read
  // back by the sync entity and the action's caller: src/temporal/runaway.ts). A run inside its sync
  // entity is stopped without ending the entity (stopEntityRun).
  const onRunaway =
    options.onRunaway ??
    ((notice: RunawayNotice): void => {
      const verdict = {
        code: 'script_timeout' as const,
        message: `the script ran for more than ${ISOLATE_TIMEOUT_MS / 1000} s in one statement (or one flood of promise callbacks) without awaiting a svc operation: run stopped`,
      };
      const stopped =
        notice.workflowType === 'manageSync'
          ? stopEntityRun(client, notice.workflowId, notice.runId, verdict)
          : terminateRunaway(client, notice.workflowId, verdict);
      void stopped.then(
        () =>
          log.info(
            { component: 'lanes', workflowId: notice.workflowId },
            'run stopped: a statement ran past its budget',
          ),
        (error: unknown) =>
          log.warn(
            { component: 'lanes', workflowId: notice.workflowId },
            `could not stop a runaway run: ${String(error)}`,
          ),
      );
    });
  const runsInEntity = (workflowId: string, runId: string): boolean => runWatch.watching(workflowId, runId);
  const main = await createWorker({ ...options, workflowBundle, onRunaway, sinks, runsInEntity });
  const actions = await createWorker({
    ...options,
    workflowBundle,
    onRunaway,
    sinks,
    runsInEntity,
    taskQueue: actionTaskQueue(options.taskQueue),
  });
  const watch = await Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: watchTaskQueue(options.taskQueue),
    activities: options.activities,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
    maxConcurrentActivityTaskExecutions: WATCH_SLOTS,
  });
  const all = [main, actions, watch];
  let shutdownRequested = false;
  const shutdown = (): void => {
    shutdownRequested = true;
    for (const worker of all) if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  return {
    main,
    actions,
    watch,
    shutdown,
    async run() {
      // The runs that workers of this host died executing, blamed when this process starts polling (a
      // warm standby is created while the worker it replaces is still alive: src/main.ts).
      const orphans = marks.collectOrphans();
      if (orphans.length > 0) await reportIncidents(client, orphans);
      if (shutdownRequested) return;
      const results = await Promise.allSettled(all.map((worker) => worker.run().finally(shutdown)));
      runWatch.stop();
      const failed = results.find((result) => result.status === 'rejected');
      // After a workflow thread died the marks stay: the next process blames the run it was executing.
      // Any other end (a shutdown, a lost server) blames nobody.
      if (!failed || !isThreadDeath(failed.reason)) marks.clear();
      if (failed) throw failed.reason;
    },
  };
}
