/**
 * What the sync entity workflow does when a run has ended, besides updating its own state: record the
 * run in the history (src/runtime/runHistory.ts) and, when the environment has a webhook URL, the
 * outbound webhook deliveries of the run, which a child workflow of their own sends
 * (workflows/deliverWebhook.ts).
 */
import type { ConnectionScope } from '../src/connections/types.js';
import { redactSecrets } from '../src/runtime/redaction.js';
import { syncRecords, syncRunDuration, syncRunsFinished } from '../src/metrics/index.js';
import type { RunHistory, SyncRunRecord } from '../src/runtime/runHistory.js';
import { scopeDenied, syncEntityId, type RunAuthorities } from '../src/temporal/runAuthority.js';
import type { InboundWebhookQueue } from '../src/webhooks/inboundQueue.js';
import type { RunSlots } from '../src/runtime/runSlots.js';
import type { SyncFinishedEvent } from '../src/webhooks/deliveries.js';
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

/**
 * Records the outbound webhook deliveries of a finished run under `key` (the id of the workflow that
 * will send them, `<run id>:webhook`); their ids, none when the environment has no webhook URL.
 */
export type RecordRunDeliveries = (event: SyncFinishedEvent, key: string) => Promise<string[]>;

export function createSyncRunActivities({
  runHistory,
  authorities,
  secretsOf,
  inboundQueue,
  runSlots,
  recordDeliveries,
}: {
  runHistory: RunHistory;
  authorities: RunAuthorities;
  secretsOf: SecretsOf;
  /** Where the webhook a run handled waited: recording the run removes it. */
  inboundQueue?: InboundWebhookQueue | undefined;
  /** The run's slot among its environment's sync runs: recording the run gives it back. */
  runSlots?: RunSlots | undefined;
  recordDeliveries: RecordRunDeliveries;
}) {
  /** Only the sync entity records its own runs. */
  async function record(run: SyncRunRecord): Promise<void> {
    const caller = await callingRun(authorities);
    const entity = syncEntityId(run);
    if (caller.workflowType !== 'manageSync' || caller.workflowId !== entity || !run.runId.startsWith(`${entity}:`)) {
      throw scopeDenied(`workflow ${caller.workflowId} may record only the runs of its own sync`);
    }
    const { webhookQueueId, ...row } = run;
    const stored = await runHistory.record({ ...row, error: await redactedError(run.error, run, secretsOf) });
    // Counted by the write that stored the run: a replayed or retried record counts nothing.
    if (stored) countFinishedRun(run);
    // A run that continued past one execution (issue 32) holds its slot under its last execution's id.
    for (const id of new Set([run.runId, ...(run.executions ?? [])])) await runSlots?.release(id);
    // The webhook is handled (or its run failed for good): it waits no more. A run that could not
    // begin (its environment busy) handled nothing: the entity queues the webhook again.
    if (webhookQueueId !== undefined && run.error?.code !== 'environment_busy') {
      await inboundQueue?.complete(run, webhookQueueId);
    }
  }

  return {
    /** The run history's row (entities that run each run as a child, version 1). */
    async recordSyncRun(run: SyncRunRecord): Promise<void> {
      await translated(() => record(run));
    },

    /**
     * The run history's row and the run's outbound webhook deliveries, in one step of the entity
     * (version 2): their ids, for the `deliverWebhook` child that sends them; none without a webhook
     * URL, so a run pays nothing for webhooks then.
     */
    async finishSyncRun(run: SyncRunRecord, event: SyncFinishedEvent): Promise<string[]> {
      return translated(async () => {
        await record(run);
        if (syncEntityId(event) !== syncEntityId(run)) {
          throw scopeDenied(`the webhook of run ${run.runId} must be of its own sync`);
        }
        const error = await redactedError(event.error, event, secretsOf);
        return recordDeliveries({ ...event, error }, `${run.runId}:webhook`);
      });
    },
  };
}

export type SyncRunActivities = ReturnType<typeof createSyncRunActivities>;
