/**
 * Task queue names. Plain functions with no imports: the workflow bundle uses them too (a sync run
 * starts its child actions on the action queue).
 *
 * Actions are request-response calls that a caller waits on; sync runs are background work that can
 * pile up by the thousand when many connections fall due together. On one queue an action waits
 * behind that backlog (docs/reliability.md, finding 4), so action runs get a queue of their own,
 * served by a second Worker in the same process (createRuntimeWorkers) with slots of its own.
 */

/**
 * The action queue of a deployment whose main task queue is `taskQueue` (TEMPORAL_TASK_QUEUE, the
 * only setting): derived, so that the API, the workers and workflow code always agree on it.
 */
export function actionTaskQueue(taskQueue: string): string {
  return `${taskQueue}-actions`;
}

/**
 * The queue of the sync runs' watchdogs (`watchRun`: one activity beside each open run, for as long as
 * it runs). On the main queue they took every activity slot once ~100 runs were open, and the runs'
 * own ordinary activities (the step ledger's `forgetSteps`) waited behind them forever: the runs
 * never ended. A third Worker of each process serves this queue, with slots for thousands.
 */
export function watchTaskQueue(taskQueue: string): string {
  return `${taskQueue}-watch`;
}
