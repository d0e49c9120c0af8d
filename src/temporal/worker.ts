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

/** Entry of the deterministic workflow code that the worker bundles. */
export const WORKFLOWS_PATH = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'index.ts');

/** Bundles the workflow code once; a Node import in workflow code fails here, at build time. */
export async function bundleWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({ workflowsPath: WORKFLOWS_PATH, logger: quietBundlerLogger });
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
 * escapes a run's workflow code fails that run instead of retrying its workflow task forever.
 */
export const RUNTIME_WORKER_DEFAULTS = {
  workflowFailureErrorTypes: { '*': [], runSync: ['Error'], runAction: ['Error'] },
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
