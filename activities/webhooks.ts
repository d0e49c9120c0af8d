/**
 * The activities of outbound webhooks (workflows/deliverWebhook.ts): record the deliveries of a
 * finished sync run, send one attempt, give one up. The retry policy of the workflow does the back-off.
 */
import { Context } from '@temporalio/activity';
import type { Encryptor } from '../src/connections/encryption.js';
import type { Pool } from '../src/db/pool.js';
import {
  attemptDelivery,
  markDeliveryFailed,
  recordSyncDeliveries,
  type SyncFinishedEvent,
} from '../src/api/webhooks/deliveries.js';
import { createWebhookSettingsStore } from '../src/api/webhooks/settings.js';

export interface WebhookActivityDeps {
  db: Pool;
  encryptor: Encryptor;
  /** @default globalThis.fetch */
  fetch?: typeof fetch;
}

export function createWebhookActivities({ db, encryptor, fetch }: WebhookActivityDeps) {
  const settings = createWebhookSettingsStore({ db, encryptor });
  return {
    /** The delivery rows of a finished run (idempotent per workflow); their ids, none without a webhook URL. */
    async recordWebhookDeliveries(event: SyncFinishedEvent): Promise<string[]> {
      const key = Context.current().info.workflowExecution?.workflowId;
      if (key === undefined) throw new Error('recordWebhookDeliveries runs only as an activity of a workflow');
      return recordSyncDeliveries(db, settings, event, key);
    },
    /** One attempt; throws (retryable) unless the application answered 2xx. */
    async sendWebhookDelivery(id: string): Promise<void> {
      await attemptDelivery(db, settings, id, fetch ? { fetch } : {});
    },
    async markWebhookDeliveryFailed(id: string, message: string): Promise<void> {
      await markDeliveryFailed(db, id, message);
    },
  };
}

export type WebhookActivities = ReturnType<typeof createWebhookActivities>;
