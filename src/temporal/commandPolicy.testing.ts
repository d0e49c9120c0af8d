/**
 * Workflow commands as the TS SDK 1.24 encodes them for the service's options (`startChild` and
 * `executeChild` without a reuse policy, cron or parent close policy; `getExternalWorkflowHandle(id)
 * .signal`), for commandPolicy.test.ts and bench/commandPolicy.ts.
 */
import type { PolicyCommand } from './commandPolicy.js';

export function childStart(
  namespace: string,
  taskQueue: string,
  workflowType: string,
  workflowId: string,
  extra: object = {},
): PolicyCommand {
  return {
    startChildWorkflowExecution: {
      workflowType,
      workflowId,
      namespace,
      taskQueue,
      workflowIdReusePolicy: undefined,
      parentClosePolicy: undefined,
      cronSchedule: undefined,
      ...extra,
    },
  };
}

export function signalTo(namespace: string, workflowId: string, signalName: string): PolicyCommand {
  return { signalExternalWorkflowExecution: { workflowExecution: { namespace, workflowId, runId: '' }, signalName } };
}
