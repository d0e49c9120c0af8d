import { Client } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import {
  bundleWorkflowCode,
  Worker,
  type NativeConnection,
  type WorkerOptions,
  type WorkflowBundleWithSourceMap,
} from '@temporalio/worker';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ISOLATE_TIMEOUT_MS } from '../runtime/definitions.js';
import { FAILURE_CONVERTER_PATH } from '../runtime/payloadStorage.js';
import { isThreadDeath, prepareThreadMarks, reportIncidents } from './scriptThreads.js';
import { actionTaskQueue } from './taskQueues.js';

/** Entry of the deterministic workflow code that the worker bundles. */
export const WORKFLOWS_PATH = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'index.ts');

/**
 * Workflow interceptors of the bundle: workflows/failureLog.ts names a failed run's failure type on its
 * log lines (src/temporal/logger.ts), so that an ActionError logs one line, not a warning and a stack.
 */
export const WORKFLOW_INTERCEPTOR_MODULES: readonly string[] = [
  join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'failureLog.ts'),
];

/**
 * Bundles the workflow code once; a Node import in workflow code fails here, at build time. Tests
 * bundle other entries (a hostile variant, a single workflow) the same way.
 */
export async function bundleWorkflows(workflowsPath = WORKFLOWS_PATH): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({
    workflowsPath,
    workflowInterceptorModules: [...WORKFLOW_INTERCEPTOR_MODULES],
    // Workflow failures (a script's error, say) travel encoded like payloads: the codecs encrypt their
    // message and stack, as they do for activity failures (src/runtime/failureConverter.cjs).
    failureConverterPath: FAILURE_CONVERTER_PATH,
    logger: quietBundlerLogger,
  });
}

const quietBundlerLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (message: string) => process.stderr.write(`[bundler] ${message}\n`),
  error: (message: string) => process.stderr.write(`[bundler] ${message}\n`),
};

export interface CreateWorkerOptions {
  connection: NativeConnection;
  namespace: string;
  taskQueue: string;
  activities: object;
  /** A prebuilt bundle (tests build one per run); bundled on the spot when omitted. */
  workflowBundle?: WorkflowBundleWithSourceMap | { codePath: string } | undefined;
  /** The data converter with external storage (src/runtime/payloadStorage.ts); clients must use the same. */
  dataConverter?: DataConverter | undefined;
  /** Worker tunables (concurrency, timeouts); the defaults below suit the script runtime. */
  tuning?: Partial<Omit<WorkerOptions, 'connection' | 'namespace' | 'taskQueue' | 'activities' | 'workflowBundle'>>;
}

/**
 * Worker settings of the script runtime (docs/architecture.md "Runaway scripts"): a plain Error that
 * escapes a run's workflow code fails that run instead of retrying its workflow task forever. The
 * isolate timeout, which interrupts an activation that loop protection could not stop (one endless
 * statement, a flood of microtasks), is shorter than a run's workflow task timeout
 * (RUN_WORKFLOW_TASK_TIMEOUT_MS, 5 s), so that its failure is still recorded in the run's history,
 * where the watchdog finds it.
 */
export const RUNTIME_WORKER_DEFAULTS = {
  workflowFailureErrorTypes: { '*': [], runSync: ['Error'], runAction: ['Error'] },
  // Two workflow threads (with reuseV8Context the SDK's default is one): a script that computes up to
  // its budget, or a thread lost to memory exhaustion, stalls half of the runs, not all.
  workflowThreadPoolSize: 2,
  // Not in WorkerOptions' type in SDK 1.24, but read by Worker.create (worker-options.js, default 5 s).
  ...({ isolateExecutionTimeout: ISOLATE_TIMEOUT_MS } as Partial<WorkerOptions>),
} satisfies Partial<WorkerOptions>;

export async function createWorker(options: CreateWorkerOptions): Promise<Worker> {
  return Worker.create({
    connection: options.connection,
    namespace: options.namespace,
    taskQueue: options.taskQueue,
    activities: options.activities,
    workflowBundle: options.workflowBundle ?? (await bundleWorkflows()),
    ...RUNTIME_WORKER_DEFAULTS,
    ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
    ...options.tuning,
  });
}

/**
 * The runtime's workers of one process: `main` polls the task queue (sync entities, sync runs,
 * webhooks), `actions` polls its action queue (actionTaskQueue), with the same activities, bundle,
 * data converter and tuning. Two Workers, so the action runs have slots and a poller of their own and
 * never wait behind a sync backlog (docs/reliability.md, finding 4); one process, so a deployment
 * still runs a single worker process (an operator may start more, each serves both queues).
 */
export interface RuntimeWorkers {
  main: Worker;
  actions: Worker;
  /**
   * Runs both until shutdown. When either stops (a failure, or a shutdown of only one), the other is
   * shut down too and a failure is rethrown: a process is never left serving one queue only, and its
   * supervisor restarts it.
   */
  run(): Promise<void>;
  /** Shuts down whichever of the two is still running; `run()` resolves once both are done. */
  shutdown(): void;
}

export async function createRuntimeWorkers(options: CreateWorkerOptions): Promise<RuntimeWorkers> {
  // Bundled once for both (bundling takes seconds and the code is the same).
  const workflowBundle = options.workflowBundle ?? (await bundleWorkflows());
  // Before the Workers start their workflow threads, which read the folder from the environment.
  const marks = prepareThreadMarks();
  const orphans = marks.collectOrphans();
  if (orphans.length > 0) {
    const client = new Client({
      connection: options.connection,
      namespace: options.namespace,
      ...(options.dataConverter ? { dataConverter: options.dataConverter } : {}),
    });
    await reportIncidents(client, orphans);
  }
  const main = await createWorker({ ...options, workflowBundle });
  const actions = await createWorker({ ...options, workflowBundle, taskQueue: actionTaskQueue(options.taskQueue) });
  const shutdown = (): void => {
    for (const worker of [main, actions]) if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  return {
    main,
    actions,
    shutdown,
    async run() {
      const results = await Promise.allSettled([main, actions].map((worker) => worker.run().finally(shutdown)));
      const failed = results.find((result) => result.status === 'rejected');
      // After a workflow thread died the marks stay: the next process blames the run it was executing.
      // Any other end (a shutdown, a lost server) blames nobody.
      if (!failed || !isThreadDeath(failed.reason)) marks.clear();
      if (failed) throw failed.reason;
    },
  };
}
