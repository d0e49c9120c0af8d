/**
 * For unit tests of workflow code with Temporal's workflow module mocked (the samples' pattern, no
 * server): `vi.mock('@temporalio/workflow', async (original) => stubbedWorkflow(await original(), …))`.
 * workflowInfo answers the test's object, every patch is taken, and every activity, local or not,
 * answers what `answer(name, args)` gives.
 */
import { RawValue } from '@temporalio/common';
import type * as Workflow from '@temporalio/workflow';

export function stubbedWorkflow(
  real: typeof Workflow,
  info: object,
  answer: (name: string, args: unknown[]) => unknown = (name) =>
    name === 'saveRecords' ? { added: 1, updated: 0, deleted: 0, unchanged: 0 } : 1,
): typeof Workflow {
  const stub = new Proxy(
    {},
    {
      get: (_target, name) => ({
        executeWithOptions: (_options: unknown, args: unknown[]) => Promise.resolve(answer(String(name), args)),
      }),
    },
  );
  return {
    ...real,
    workflowInfo: () => info,
    patched: () => true,
    proxyLocalActivities: () => stub,
    proxyActivities: () => stub,
  } as unknown as typeof Workflow;
}

/** An activity's arguments as the workflow sent them: a local activity's input travels as a RawValue of its JSON (src/runtime/localActivityInput.ts). */
export function sentArgs(sent: unknown[]): unknown[] {
  return sent.map((arg) =>
    arg instanceof RawValue ? (JSON.parse(new TextDecoder().decode(arg.payload.data)) as unknown) : arg,
  );
}
