import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { environmentSchema, environmentView, ADMIN_ROUTE } from './environmentView.js';

export const getEnvironmentsRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN_ROUTE,
    method: 'get',
    path: '/environments',
    summary: 'List the environments (service admin key)',
    responses: {
      200: {
        description: 'Every environment, by name',
        schema: z.object({ environments: z.array(environmentSchema) }),
      },
    },
    handler: async () => ({ environments: (await deps.environments.list()).map(environmentView) }),
  });
