import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const webhookSettingsSchema = z.object({
  url: z.string().nullable().describe('Where sync-finished webhooks go; null: none are sent.'),
  has_secret: z.boolean(),
});

export const getWebhookSettingsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/webhook-settings',
    summary: 'Where this environment’s outbound webhooks go',
    tags: ['webhooks'],
    auth: 'secret-key',
    responses: { 200: { description: 'The settings (never the secret)', schema: webhookSettingsSchema } },
    handler: async ({ environment }) => {
      const settings = await deps.webhookSettings.outbound(environment.id);
      return { url: settings?.url ?? null, has_secret: settings !== undefined };
    },
  });
