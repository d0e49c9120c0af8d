import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';

export const connectionSummarySchema = z.object({
  id: z.number(),
  connection_id: z.string(),
  provider_config_key: z.string(),
  provider: z.string(),
  auth_mode: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  refresh_error: z
    .object({ code: z.string(), message: z.string(), at: z.string(), permanent: z.boolean() })
    .nullable()
    .describe('The last failed token refresh; `permanent` means the user must reconnect.'),
});

export const getConnectionsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/connections',
    summary: 'List connections (without credentials)',
    tags: ['connections'],
    auth: 'secret-key',
    query: z.object({ provider_config_key: z.string().min(1).optional() }).strict(),
    responses: {
      200: { description: 'The connections', schema: z.object({ connections: z.array(connectionSummarySchema) }) },
    },
    handler: async ({ query, environment }) => ({
      connections: await deps.connections.listConnections(environment.id, {
        ...(query.provider_config_key === undefined ? {} : { integrationId: query.provider_config_key }),
      }),
    }),
  });
