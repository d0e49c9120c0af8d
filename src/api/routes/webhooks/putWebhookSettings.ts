import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const putWebhookSettingsBody = z
  .object({
    url: z
      .url({ protocol: /^https?$/ })
      .nullable()
      .describe('The application’s webhook URL; null stops outbound webhooks.'),
    secret: z
      .string()
      .min(16)
      .max(4096)
      .optional()
      .describe('HMAC-SHA256 signing secret; generated (and returned once) when none is stored.'),
  })
  .strict();

export const putWebhookSettingsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'put',
    path: '/webhook-settings',
    summary: 'Set where outbound webhooks go and their signing secret',
    description:
      'Each webhook is signed: `X-Service-Hmac-Sha256` is the hex HMAC-SHA256 of the body with the secret. ' +
      'A URL whose host is or resolves to an internal address (loopback, private, link-local…) is refused with ' +
      '400 `webhook_url_refused`, unless the operator allowed it with SERVICE_OUTBOUND_ALLOW; every delivery is ' +
      'checked again when it connects.',
    tags: ['webhooks'],
    auth: 'secret-key',
    body: putWebhookSettingsBody,
    responses: {
      200: {
        description: 'Saved; `generated_secret` only when the service generated one (shown this once)',
        schema: z.object({ url: z.string().nullable(), generated_secret: z.string().optional() }),
      },
    },
    handler: async ({ body, environment }) => deps.webhookSettings.setOutbound(environment.id, body),
  });
