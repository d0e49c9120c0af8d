/**
 * What the sync entity workflow does when a run has ended, besides updating its own state: record the
 * run in the history (src/runtime/runHistory.ts). Outbound webhooks are a child workflow of their own
 * (workflows/deliverWebhook.ts).
 */
import type { RunHistory, SyncRunRecord } from '../src/runtime/runHistory.js';
import { scopeDenied, syncEntityId, type RunAuthorities } from '../src/temporal/runAuthority.js';
import { callingRun, translated } from './runtime.js';

export function createSyncRunActivities({
  runHistory,
  authorities,
}: {
  runHistory: RunHistory;
  authorities: RunAuthorities;
}) {
  return {
    /** Only the sync entity records its own runs. */
    async recordSyncRun(run: SyncRunRecord): Promise<void> {
      await translated(async () => {
        const caller = await callingRun(authorities);
        const entity = syncEntityId(run);
        if (
          caller.workflowType !== 'manageSync' ||
          caller.workflowId !== entity ||
          !run.runId.startsWith(`${entity}:`)
        ) {
          throw scopeDenied(`workflow ${caller.workflowId} may record only the runs of its own sync`);
        }
        await runHistory.record(run);
      });
    },
  };
}

export type SyncRunActivities = ReturnType<typeof createSyncRunActivities>;
