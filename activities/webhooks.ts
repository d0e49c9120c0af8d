/**
 * The activities of outbound webhooks (workflows/deliverWebhook.ts): record the deliveries of a
 * finished sync run, send one attempt, give one up. The retry policy of the workflow does the back-off.
 */
import type { Encryptor } from '../src/connections/encryption.js';
import type { Pool } from '../src/db/pool.js';
import { createWebhookDeliveryStore, type SyncFinishedEvent } from '../src/webhooks/deliveries.js';
import { createWebhookSettingsStore } from '../src/webhooks/settings.js';
import { requireSyncWebhook, scopeDenied, type RunAuthorities } from '../src/temporal/runAuthority.js';
import { callingRun, translated } from './runtime.js';
import { redactedError, type SecretsOf } from './syncRuns.js';

export interface WebhookActivityDeps {
  db: Pool;
  encryptor: Encryptor;
  /** Credential values to keep out of a failed run's webhook body. @default none */
  secretsOf?: SecretsOf;
  /** @default globalThis.fetch */
  fetch?: typeof fetch;
  /** Verifies the calling workflow (src/temporal/runAuthority.ts): only a sync's own webhook workflow acts here. */
  authorities: RunAuthorities;
}

export function createWebhookActivities({
  db,
  encryptor,
  fetch,
  authorities,
  secretsOf = async () => [],
}: WebhookActivityDeps) {
  const deliveries = createWebhookDeliveryStore({ db, settings: createWebhookSettingsStore({ db, encryptor }) });

  /** The calling deliverWebhook workflow, verified to be a child of the sync entity it reports on. */
  async function deliveringWorkflow(): Promise<string> {
    const run = await callingRun(authorities);
    if (run.workflowType !== 'deliverWebhook') {
      throw scopeDenied(`workflow ${run.workflowId} (${run.workflowType}) does not deliver webhooks`);
    }
    return run.workflowId;
  }

  /** Refuses a delivery that the calling workflow did not record. */
  async function ownDelivery(id: string): Promise<void> {
    const workflowId = await deliveringWorkflow();
    if (!(await deliveries.keyOf(id))?.startsWith(`${workflowId}:`)) {
      throw scopeDenied(`workflow ${workflowId} did not record webhook delivery ${id}`);
    }
  }

  return {
    /** The delivery rows of a finished run (idempotent per workflow); their ids, none without a webhook URL. */
    async recordWebhookDeliveries(event: SyncFinishedEvent): Promise<string[]> {
      return translated(async () => {
        const run = await callingRun(authorities);
        requireSyncWebhook(run, event);
        const error = await redactedError(event.error, event, secretsOf);
        return deliveries.record({ ...event, error }, run.workflowId);
      });
    },
    /** One attempt; throws (retryable) unless the application answered 2xx. */
    async sendWebhookDelivery(id: string): Promise<void> {
      await translated(() => ownDelivery(id));
      await deliveries.attempt(id, fetch ? { fetch } : {});
    },
    async markWebhookDeliveryFailed(id: string, message: string): Promise<void> {
      await translated(() => ownDelivery(id));
      await deliveries.markFailed(id, message);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
