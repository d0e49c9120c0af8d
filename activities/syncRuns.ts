/**
 * What the sync entity workflow does when a run has ended, besides updating its own state: record the
 * run in the history (src/runtime/runHistory.ts). Outbound webhooks are a child workflow of their own
 * (workflows/deliverWebhook.ts).
 */
import type { ConnectionScope } from '../src/connections/types.js';
import { redactSecrets } from '../src/runtime/redaction.js';
import { syncRecords, syncRunDuration, syncRunsFinished } from '../src/metrics/index.js';
import type { RunHistory, SyncRunRecord } from '../src/runtime/runHistory.js';
import { scopeDenied, syncEntityId, type RunAuthorities } from '../src/temporal/runAuthority.js';
import type { InboundWebhookQueue } from '../src/webhooks/inboundQueue.js';
import type { RunSlots } from '../src/runtime/runSlots.js';
import { callingRun, translated } from './runtime.js';

/** The credential values of a connection, for redaction (ConnectionService.credentialSecrets). */
export type SecretsOf = (scope: ConnectionScope) => Promise<string[]>;

/** A run's error message without the connection's credential values (a script may have put one there). */
export async function redactedError<E extends { code: string; message: string } | null>(
  error: E,
  scope: ConnectionScope,
  secretsOf: SecretsOf,
): Promise<E> {
  if (error === null) return error;
  return { ...error, message: redactSecrets(error.message, await secretsOf(scope)) };
}

/** The run's outcome in the metrics (src/metrics): status, duration and, for a success, its record counts. */
export function countFinishedRun(run: SyncRunRecord): void {
  const labels = { integration: run.integrationId, sync: run.syncName };
  syncRunsFinished.inc({ ...labels, status: run.status });
  const seconds = (Date.parse(run.finishedAt) - Date.parse(run.startedAt)) / 1000;
  if (Number.isFinite(seconds) && seconds >= 0) syncRunDuration.observe({ ...labels, status: run.status }, seconds);
  for (const [model, summary] of Object.entries(run.models)) {
    for (const action of ['added', 'updated', 'deleted'] as const) {
      const count = summary[action];
      if (count > 0) syncRecords.inc({ ...labels, model, action }, count);
    }
  }
}

export function createSyncRunActivities({
  runHistory,
  authorities,
  secretsOf,
  inboundQueue,
  runSlots,
}: {
  runHistory: RunHistory;
  authorities: RunAuthorities;
  secretsOf: SecretsOf;
  /** Where the webhook a run handled waited: recording the run removes it. */
  inboundQueue?: InboundWebhookQueue | undefined;
  /** The run's slot among its environment's sync runs: recording the run gives it back. */
  runSlots?: RunSlots | undefined;
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
        const { webhookQueueId, ...record } = run;
        const stored = await runHistory.record({ ...record, error: await redactedError(run.error, run, secretsOf) });
        // Counted by the write that stored the run: a replayed or retried recordSyncRun counts nothing.
        if (stored) countFinishedRun(run);
        await runSlots?.release(run.runId);
        // The webhook is handled (or its run failed for good): it waits no more. A run that could not
        // begin (its environment busy) handled nothing: the entity queues the webhook again.
        if (webhookQueueId !== undefined && run.error?.code !== 'environment_busy') {
          await inboundQueue?.complete(run, webhookQueueId);
        }
      });
    },
  };
}

export type SyncRunActivities = ReturnType<typeof createSyncRunActivities>;
