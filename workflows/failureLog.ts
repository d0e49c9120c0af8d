/**
 * Workflow interceptors (registered through the bundle's `workflowInterceptorModules`) that name the
 * failure type of a failed workflow on its log lines. The SDK logs every workflow failure as a WARN
 * "Workflow failed" with the error, and the error reaches the worker's logger stripped of its
 * ApplicationFailure `type` (it crosses a thread by structured clone); this attribute survives, so the
 * logger (src/temporal/logger.ts) can tell an expected failure, such as an ActionError, from a fault.
 */
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** The log attribute that carries the type of the ApplicationFailure a workflow failed with. */
export const FAILURE_TYPE_ATTRIBUTE = 'failureType';

export const interceptors: WorkflowInterceptorsFactory = () => {
  // One factory call per workflow execution, so this is the state of one execution only.
  let failureType: string | undefined;
  return {
    inbound: [
      {
        async execute(input, next) {
          try {
            return await next(input);
          } catch (error) {
            // Duck-typed: an ApplicationFailure carries its type as a string.
            const type = (error as { type?: unknown } | null)?.type;
            if (typeof type === 'string') failureType = type;
            throw error;
          }
        },
      },
    ],
    outbound: [
      {
        getLogAttributes(input, next) {
          return next(failureType === undefined ? input : { ...input, [FAILURE_TYPE_ATTRIBUTE]: failureType });
        },
      },
    ],
  };
};
