/**
 * Delivers the outbound webhooks of one finished sync run (or of one connection event, recorded by the
 * service before it starts this workflow): records them in the delivery log, then
 * sends each, retrying with exponential back-off (the activity retry policy) until the application
 * answers 2xx or the attempts run out, when the delivery is marked failed. Started by the sync entity
 * (manageSync) as an abandoned child, so a slow application never delays the next run.
 */
import { proxyActivities, ActivityFailure } from '@temporalio/workflow';
import type { WebhookActivities } from '../activities/webhooks.js';
import type { DeliverWebhookInput } from '../src/webhooks/deliveries.js';

// Recording is a database write: a few quick retries cover a restarting Postgres.
const { recordWebhookDeliveries, markWebhookDeliveryFailed } = proxyActivities<WebhookActivities>({
  startToCloseTimeout: '30 seconds',
  retry: { maximumAttempts: 10 },
});

export async function deliverWebhook(input: DeliverWebhookInput): Promise<{ delivered: number; failed: number }> {
  // 1 s doubling up to 10 min over 12 attempts: about 40 minutes of an application being down is
  // ridden out; each attempt waits at most 15 s for an answer (the activity's own timeout).
  const { sendWebhookDelivery } = proxyActivities<WebhookActivities>({
    startToCloseTimeout: '30 seconds',
    retry: {
      initialInterval: input.retry?.initialIntervalMs ?? 1000,
      backoffCoefficient: 2,
      maximumInterval: input.retry?.maximumIntervalMs ?? 600_000,
      maximumAttempts: input.retry?.maximumAttempts ?? 12,
    },
  });
  const ids = input.deliveries ?? (input.event ? await recordWebhookDeliveries(input.event) : []);
  let delivered = 0;
  let failed = 0;
  await Promise.all(
    ids.map(async (id) => {
      try {
        await sendWebhookDelivery(id);
        delivered++;
      } catch (error) {
        const cause = error instanceof ActivityFailure ? error.cause : error;
        await markWebhookDeliveryFailed(id, cause instanceof Error ? cause.message : String(cause));
        failed++;
      }
    }),
  );
  return { delivered, failed };
}
