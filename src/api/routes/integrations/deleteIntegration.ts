import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { booleanFlag } from '../shared.js';

export const deleteIntegrationRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'delete',
    path: '/integrations/:id',
    summary: 'Delete an integration',
    description:
      'Refused with 409 integration_has_connections while it has connections, unless `delete_connections=true`, which deletes them (their records are erased and their syncs stopped).',
    tags: ['integrations'],
    auth: 'secret-key',
    params: z.object({ id: z.string().min(1) }).strict(),
    query: z.object({ delete_connections: booleanFlag.optional() }).strict(),
    responses: {
      200: { description: 'Deleted', schema: z.object({ success: z.literal(true), deleted: z.literal(true) }) },
    },
    handler: async ({ params, query, environment }) => {
      await deps.integrations.get(environment.id, params.id);
      if (query.delete_connections) {
        const definitions = await deps.deployments.syncDefinitions(environment.id, params.id);
        for (const connection of await deps.connections.listConnections(environment.id, { integrationId: params.id })) {
          const scope = {
            environmentId: environment.id,
            integrationId: params.id,
            connectionId: connection.connection_id,
          };
          for (const definition of definitions) {
            await deps.syncs.stop({ ...definition, connectionId: scope.connectionId }, 'integration deleted');
          }
          await deps.records.eraseConnection(scope);
        }
      }
      await deps.integrations.delete(environment.id, params.id, {
        deleteConnections: query.delete_connections ?? false,
      });
      return { success: true as const, deleted: true as const };
    },
  });
