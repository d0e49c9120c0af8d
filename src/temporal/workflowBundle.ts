/**
 * The workflow bundle the service's workers run: workflows/index.ts, plus the interceptors of
 * workflows/failureLog.ts that name a failed run's failure type on its log lines (src/temporal/logger.ts).
 * src/main.ts and the test harness pass it to createRuntimeWorkers; once `bundleWorkflows` of
 * src/temporal/worker.ts registers WORKFLOW_INTERCEPTOR_MODULES itself, this file can go.
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bundleWorkflowCode, DefaultLogger, type WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { WORKFLOWS_PATH } from './worker.js';

/** Workflow interceptor modules of the bundle (`bundleWorkflowCode({ workflowInterceptorModules })`). */
export const WORKFLOW_INTERCEPTOR_MODULES: readonly string[] = [
  join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'failureLog.ts'),
];

/** Bundles the workflows with their interceptors; a Node import in workflow code fails here. */
export async function bundleServiceWorkflows(): Promise<WorkflowBundleWithSourceMap> {
  return bundleWorkflowCode({
    workflowsPath: WORKFLOWS_PATH,
    workflowInterceptorModules: [...WORKFLOW_INTERCEPTOR_MODULES],
    // Warnings and errors of webpack only.
    logger: new DefaultLogger('WARN'),
  });
}
