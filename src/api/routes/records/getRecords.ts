import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { recordsPageQuery, recordsPageSchema, scopeOf, sendRecords } from '../shared.js';

export const recordsQuery = recordsPageQuery.extend({
  model: z.string().min(1).describe('An output model of a deployed sync of the integration.'),
});

export const getRecordsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/records',
    summary: 'Read a page of records of one model of one connection',
    description:
      'Pages are ordered by modification: a record that changes while you page appears again later, never skipped. Deleted records are returned, with `_service_metadata.deleted_at` set and `last_action` DELETED.',
    tags: ['records'],
    auth: 'secret-key',
    connectionScoped: true,
    query: recordsQuery,
    responses: { 200: { description: 'One page', schema: recordsPageSchema } },
    handler: async ({ query, connection, res }) => {
      const scope = scopeOf(connection);
      return sendRecords(deps, res, scope, query.model, query, async () => {
        const models = await deps.generated.syncModels(scope.environmentId, scope.integrationId);
        if (!models.includes(query.model)) {
          throw new ServiceError(
            'unknown_model',
            `integration '${scope.integrationId}' has no deployed sync with output model '${query.model}'; its models: ${models.join(', ') || 'none'}`,
          );
        }
      });
    },
  });
