/**
 * What the sync entity workflow does when a run has ended, besides updating its own state: record the
 * run in the history (src/runtime/runHistory.ts). Outbound webhooks are a child workflow of their own
 * (workflows/deliverWebhook.ts).
 */
import type { ConnectionScope } from '../src/connections/types.js';
import { redactSecrets } from '../src/connections/redaction.js';
import type { RunHistory, SyncRunRecord } from '../src/runtime/runHistory.js';
import { scopeDenied, syncEntityId, type RunAuthorities } from '../src/temporal/runAuthority.js';
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

export function createSyncRunActivities({
  runHistory,
  authorities,
  secretsOf,
}: {
  runHistory: RunHistory;
  authorities: RunAuthorities;
  secretsOf: SecretsOf;
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
        await runHistory.record({ ...run, error: await redactedError(run.error, run, secretsOf) });
      });
    },
  };
}

export type SyncRunActivities = ReturnType<typeof createSyncRunActivities>;
