import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { connectionRecordSchema, connectionRecordView } from './connectionView.js';
import { booleanFlag } from '../shared.js';

export { connectionRecordSchema } from './connectionView.js';

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
        refresh_github_app_jwt_token: booleanFlag
          .optional()
          .describe('Accepted for compatibility; it has no effect, as no provider here authenticates as a GitHub App.'),
      })
      .strict(),
    responses: { 200: { description: 'The connection record', schema: connectionRecordSchema } },
    handler: async ({ params, query, environment }) => {
      const record = await deps.connections.getConnection(
        { environmentId: environment.id, integrationId: query.provider_config_key, connectionId: params.connection_id },
        { forceRefresh: query.force_refresh ?? false, refreshToken: query.refresh_token ?? false },
      );
      return connectionRecordView(deps, environment.id, record);
    },
  });
