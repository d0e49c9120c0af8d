import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { createRateLimiter } from '../../rateLimit.js';
import { receiveWebhook } from '../../webhooks/inbound.js';

// The default of WEBHOOK_RATE_LIMIT_PER_SECOND (src/settings.ts), for an API built without it.
const DEFAULT_WEBHOOK_RATE = 100;

export const postWebhookRoute = (deps: ApiDeps) => {
  // Per environment and integration, per API process (as the per-key limit: docs/operations.md).
  const limiter = createRateLimiter(deps.webhookRateLimit ?? { perSecond: DEFAULT_WEBHOOK_RATE });
  return defineRoute({
    method: 'post',
    path: '/webhook/:environment/:integration',
    summary: 'Receive a webhook of an external API (no key; HMAC-signed when the integration has a webhook secret)',
    description:
      'The type comes from the integration’s `type_header` or the body at `type_path` (default `type`); the connection from the `connection_id` query parameter, or the body at `connection_path` compared with `connection_field`, or every connection. Each deployed sync listing the type in `webhook_subscriptions` runs with it as `svc.webhook`.',
    tags: ['webhooks'],
    auth: 'none',
    params: z.object({ environment: z.string().min(1), integration: z.string().min(1) }).strict(),
    responses: {
      200: {
        description: 'Received; where it was delivered',
        schema: z.object({
          type: z.string(),
          delivered: z.array(z.object({ connection_id: z.string(), sync: z.string() })),
          reason: z.enum(['no_subscribed_sync', 'no_matching_connection']).optional(),
        }),
      },
    },
    handler: async ({ req, params }) => {
      const settings = deps.webhookSettings;
      return receiveWebhook(
        deps,
        (environmentId, integrationId) => settings.inbound(environmentId, integrationId),
        req,
        params,
        limiter,
      );
    },
  });
};
