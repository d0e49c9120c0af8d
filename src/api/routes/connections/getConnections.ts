import { z } from 'zod';
import { connectionTagsSchema } from '../../../connections/tags.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { connectionListItems, connectionSummarySchema } from './connectionView.js';
import { commaList } from '../shared.js';

export const connectionsQuery = z
  .object({
    connectionId: z.string().min(1).max(255).optional().describe('Exactly this connection id (across integrations).'),
    integrationId: commaList.optional().describe('Only these integrations (comma-separated).'),
    provider_config_key: z.string().min(1).optional().describe('Only this integration (same as `integrationId`).'),
    search: z
      .string()
      .min(1)
      .max(255)
      .optional()
      .describe('A case-insensitive part of the connection id or of a tag value (the end user’s email, say).'),
    tags: connectionTagsSchema.optional().describe('Every one of these tags: `tags[key]=value`.'),
    endUserId: z.string().min(1).max(255).optional().describe('Deprecated: the tag `end_user_id`.'),
    endUserOrganizationId: z.string().min(1).max(255).optional().describe('Deprecated: the tag `organization_id`.'),
    limit: z.coerce.number().int().min(1).max(10_000).optional().describe('At most this many; all when omitted.'),
    // Bounded so that page × limit stays a Postgres bigint offset (schemathesis found 6.4e15 × 8902: a 500).
    page: z.coerce
      .number()
      .int()
      .min(0)
      .max(1_000_000)
      .optional()
      .describe('With `limit`: the page (from 0, at most 1,000,000) of `limit` connections.'),
  })
  .strict();

export const getConnectionsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/connections',
    summary: 'List connections (without credentials)',
    tags: ['connections'],
    auth: 'secret-key',
    query: connectionsQuery,
    responses: {
      200: { description: 'The connections', schema: z.object({ connections: z.array(connectionSummarySchema) }) },
    },
    handler: async ({ query, environment }) => {
      const tags = {
        ...query.tags,
        ...(query.endUserId === undefined ? {} : { end_user_id: query.endUserId }),
        ...(query.endUserOrganizationId === undefined ? {} : { organization_id: query.endUserOrganizationId }),
      };
      const integrationIds = [
        ...(query.integrationId ?? []),
        ...(query.provider_config_key === undefined ? [] : [query.provider_config_key]),
      ];
      const connections = await deps.connections.listConnections(environment.id, {
        integrationIds,
        connectionId: query.connectionId,
        search: query.search,
        tags,
        limit: query.limit,
        offset: query.limit === undefined ? undefined : (query.page ?? 0) * query.limit,
      });
      return { connections: await connectionListItems(deps, environment.id, connections) };
    },
  });
