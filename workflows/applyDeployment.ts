/**
 * Applies a recorded deploy version (src/deploy/deployments.ts starts it, id `deploy:<env>`, so one
 * apply runs at a time per environment): for each step, page through the integration's connections
 * and stop, start or reconfigure their sync entities, then mark the version active. Its progress is
 * Temporal's history: a worker that dies mid-apply is replaced and the apply goes on from the last
 * finished batch, the version never left `applying`. Starts are idempotent by workflow id (and
 * recognised by memo when repeated, activities/deploy.ts); reconfigures are signals sent by this
 * workflow, which Temporal sends once however often the workflow replays.
 */
import {
  continueAsNew,
  defineQuery,
  getExternalWorkflowHandle,
  proxyActivities,
  setHandler,
  workflowInfo,
} from '@temporalio/workflow';
import type { DeployActivities } from '../activities/deploy.js';
import type { ApplyDeploymentInput } from '../src/deploy/plan.js';
import { reconfigureSignal } from './manageSync.js';

// Connections per activity call, and calls at once, of an apply started without `batch` (before it
// existed): a replay of such an apply must page exactly as it did. A call repeated after a worker died
// redoes at most its connections, idempotently.
const UNBATCHED = { size: 50, parallel: 1 };
// Continue as new well before Temporal's history limits (a batch adds a few events per connection).
const HISTORY_EVENTS_PER_RUN = 10_000;

const activities = proxyActivities<DeployActivities>({
  startToCloseTimeout: '2 minutes',
  // The entity calls heartbeat: a batch on a worker that died is retried within this.
  heartbeatTimeout: '10 seconds',
  retry: { initialInterval: '1 second', maximumInterval: '10 seconds', maximumAttempts: 30 },
});

export interface ApplyProgress {
  step: number;
  steps: number;
  /** Connections done over all steps (a connection counts once per step). */
  done: number;
}

export const applyProgressQuery = defineQuery<ApplyProgress>('progress');

export async function applyDeployment(input: ApplyDeploymentInput): Promise<{ version: number; active: boolean }> {
  const { environmentId, version, steps } = input;
  const { size, parallel } = input.batch ?? UNBATCHED;
  let step = input.cursor?.step ?? 0;
  let after = input.cursor?.after ?? null;
  let done = input.cursor?.done ?? 0;
  setHandler(applyProgressQuery, () => ({ step, steps: steps.length, done }));

  for (; step < steps.length; step++, after = null) {
    const current = steps[step]!;
    const integrationId = current.integration;
    const connections = await activities.deployConnections({ environmentId, integrationId });
    let pending = after === null ? connections : connections.filter((id) => id > after!);
    while (pending.length > 0) {
      // A wave of up to `parallel` calls; the cursor moves past the whole wave once all of it is done.
      const wave: string[][] = [];
      while (wave.length < parallel && pending.length > 0) {
        wave.push(pending.slice(0, size));
        pending = pending.slice(size);
      }
      await Promise.all(
        wave.map(async (connectionIds) => {
          const batch = { environmentId, version, integrationId, connectionIds };
          if (current.kind === 'remove_sync') {
            await activities.stopSyncEntities({ ...batch, syncName: current.sync });
            return;
          }
          const existing = await activities.startSyncEntities({ ...batch, syncNames: current.syncs });
          await Promise.all(
            existing.map(({ workflowId, definition }) =>
              // An entity stopped meanwhile (its connection deleted) has nothing to reconfigure.
              getExternalWorkflowHandle(workflowId)
                .signal(reconfigureSignal, definition)
                .catch(() => undefined),
            ),
          );
        }),
      );
      const last = wave[wave.length - 1]!;
      done += wave.reduce((sum, connectionIds) => sum + connectionIds.length, 0);
      after = last[last.length - 1] ?? after;
      if (
        pending.length > 0 &&
        (workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > HISTORY_EVENTS_PER_RUN)
      ) {
        await continueAsNew<typeof applyDeployment>({ ...input, cursor: { step, after, done } });
      }
    }
    // After every entity of a removed sync stopped, so no run writes after the erase.
    if (current.kind === 'remove_sync') {
      await activities.eraseSyncRecords({ environmentId, integrationId, syncName: current.sync });
    }
  }
  const active = await activities.activateDeployment({ environmentId, version });
  return { version, active };
}
