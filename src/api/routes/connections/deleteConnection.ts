import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { assertConnection } from '../shared.js';

export const deleteConnectionRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'delete',
    path: '/connections/:connection_id',
    summary: 'Delete a connection: stops its syncs and erases its records',
    tags: ['connections'],
    auth: 'secret-key',
    params: z.object({ connection_id: z.string().min(1) }).strict(),
    query: z.object({ provider_config_key: z.string().min(1) }).strict(),
    responses: {
      200: {
        description: 'What was removed',
        schema: z.object({
          success: z.literal(true),
          deleted: z.literal(true),
          syncs_stopped: z.number(),
          records_erased: z.number(),
        }),
      },
    },
    handler: async ({ params, query, environment }) => {
      const scope = {
        environmentId: environment.id,
        integrationId: query.provider_config_key,
        connectionId: params.connection_id,
      };
      await assertConnection(deps, scope);
      // Syncs first, so no run writes records after they are erased.
      const definitions = await deps.deployments.syncDefinitions(scope.environmentId, scope.integrationId);
      for (const definition of definitions) {
        await deps.syncs.stop({ ...definition, connectionId: scope.connectionId }, 'connection deleted');
      }
      const erased = await deps.records.eraseConnection(scope);
      const deleted = await deps.connections.deleteConnection(scope);
      if (!deleted) {
        throw new ServiceError('unknown_connection', `connection '${scope.connectionId}' was deleted meanwhile`);
      }
      return {
        success: true as const,
        deleted: true as const,
        syncs_stopped: definitions.length,
        records_erased: erased,
      };
    },
  });
