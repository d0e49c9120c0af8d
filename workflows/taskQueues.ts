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
