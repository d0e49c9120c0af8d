/**
 * The workflow executions this process's workers hold in their caches, as Temporal described each when
 * the worker began it (issue 31): the run authority (src/temporal/runAuthority.ts) answers a lookup of
 * one of them from here instead of asking Temporal (a `describe`, about 4-5 ms of an action's first
 * request under load, bench/actionProfile.ts).
 *
 * Why this is the describe's answer (docs/architecture.md "Threat model"): the type, the ids and the
 * parent come from the execution's start event, which Core hands the worker in the activation that
 * begins the workflow; the SDK builds the workflow's `info` from it in the worker's main thread, before
 * any workflow code runs. A script runs in a V8 context of a workflow thread: it can neither reach this
 * map nor change which execution Temporal says an activity of its run came from. An execution is held
 * here from its creation to its disposal (its eviction or end); a local activity always runs while the
 * workflow that scheduled it is held, so a run's steps find it.
 */

/** What Temporal says an execution is: its type, and its parent if a workflow started it. */
export interface ExecutionFacts {
  type: string;
  parent?: { workflowId: string; runId: string } | undefined;
}

interface Held {
  facts: ExecutionFacts;
  /** Instances held (an evicted workflow may be recreated before the old instance is disposed). */
  count: number;
}

const held = new Map<string, Held>();
const keyOf = (workflowId: string, runId: string) => `${workflowId}\n${runId}`;

/** The workflow info fields the registry reads (the SDK's WorkflowInfo). */
export interface HeldWorkflowInfo {
  workflowId: string;
  runId: string;
  workflowType: string;
  parent?: { workflowId: string; runId: string } | undefined;
}

/** The facts of an execution this process holds; undefined for any other. */
export function runningExecution(workflowId: string, runId: string): ExecutionFacts | undefined {
  return held.get(keyOf(workflowId, runId))?.facts;
}

/** The number of executions held (for tests). */
export function runningExecutionCount(): number {
  return held.size;
}

/**
 * The workflow creator of a Worker (the SDK's `WorkflowCreator`), keeping each execution it creates in
 * the registry until the workflow instance is disposed.
 */
export function holdingExecutions<
  O extends { info: HeldWorkflowInfo },
  W extends { dispose(): Promise<void> },
>(creator: {
  createWorkflow(options: O): Promise<W>;
  destroy(): Promise<void>;
}): { createWorkflow(options: O): Promise<W>; destroy(): Promise<void> } {
  return {
    createWorkflow: async (options: O): Promise<W> => {
      // Read before the workflow exists: no code of the workflow's can have touched what Temporal gave.
      const { workflowId, runId, workflowType, parent } = options.info;
      const parentIds = parent ? { workflowId: parent.workflowId, runId: parent.runId } : undefined;
      const workflow = await creator.createWorkflow(options);
      const key = keyOf(workflowId, runId);
      const entry = held.get(key);
      if (entry) entry.count++;
      else {
        const facts: ExecutionFacts = {
          type: workflowType,
          parent: parentIds,
        };
        held.set(key, { facts, count: 1 });
      }
      let disposed = false;
      const dispose = workflow.dispose.bind(workflow);
      return Object.assign(workflow, {
        dispose: async () => {
          if (!disposed) {
            disposed = true;
            const current = held.get(key);
            if (current && --current.count === 0) held.delete(key);
          }
          await dispose();
        },
      });
    },
    destroy: () => creator.destroy(),
  };
}
