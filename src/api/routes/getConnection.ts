import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { booleanFlag } from './shared.js';

export const connectionRecordSchema = z.object({
  id: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
  provider_config_key: z.string(),
  connection_id: z.string(),
  credentials: z.record(z.string(), z.unknown()).describe('Depends on the type: OAUTH2, OAUTH1, API_KEY, BASIC.'),
  connection_config: z.record(z.string(), z.string()),
  account_id: z.number(),
  metadata: z.record(z.string(), z.unknown()),
});

export const getConnectionRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/connections/:connection_id',
    summary: 'A connection with its credentials, refreshed when they expire within 15 minutes',
    tags: ['connections'],
    auth: 'secret-key',
    params: z.object({ connection_id: z.string().min(1) }).strict(),
    query: z
      .object({
        provider_config_key: z.string().min(1),
        force_refresh: booleanFlag.optional().describe('Refresh the token even when it is fresh (testing only).'),
        refresh_token: booleanFlag.optional().describe('Include the refresh token (not advised in production).'),
      })
      .strict(),
    responses: { 200: { description: 'The connection record', schema: connectionRecordSchema } },
    handler: async ({ params, query, environment }) =>
      deps.connections.getConnection(
        { environmentId: environment.id, integrationId: query.provider_config_key, connectionId: params.connection_id },
        { forceRefresh: query.force_refresh ?? false, refreshToken: query.refresh_token ?? false },
      ),
  });
