import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { webhookDeliverySchema } from '../../../webhooks/deliveries.js';

export const webhookDeliveriesQuery = z
  .object({
    status: z.enum(['pending', 'delivered', 'failed']).optional(),
    connection_id: z.string().min(1).optional(),
    before: z
      .string()
      .regex(/^\d{1,18}$/, 'a delivery id (a bigint)')
      .optional(),
    limit: z.coerce.number().int().min(1).max(500).default(50),
  })
  .strict();

export const getWebhookDeliveriesRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/webhook-deliveries',
    summary: 'The delivery log of outbound webhooks, newest first',
    tags: ['webhooks'],
    auth: 'secret-key',
    query: webhookDeliveriesQuery,
    responses: {
      200: {
        description: 'Deliveries',
        schema: z.object({ deliveries: z.array(webhookDeliverySchema), next_before: z.string().nullable() }),
      },
    },
    handler: async ({ query, environment }) => {
      const deliveries = await deps.webhookDeliveries.list({ environmentId: environment.id, ...query });
      const last = deliveries[deliveries.length - 1];
      return { deliveries, next_before: deliveries.length === query.limit && last ? last.id : null };
    },
  });
