/**
 * What the sync entity workflow does when a run has ended, besides updating its own state: record the
 * run in the history (src/runtime/runHistory.ts). Outbound webhooks are a child workflow of their own
 * (workflows/deliverWebhook.ts).
 */
import type { RunHistory, SyncRunRecord } from '../src/runtime/runHistory.js';

export function createSyncRunActivities({ runHistory }: { runHistory: RunHistory }) {
  return {
    async recordSyncRun(run: SyncRunRecord): Promise<void> {
      await runHistory.record(run);
    },
  };
}

export type SyncRunActivities = ReturnType<typeof createSyncRunActivities>;
