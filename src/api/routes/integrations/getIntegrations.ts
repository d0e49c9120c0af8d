import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { integrationSchema, integrationView } from './integrationView.js';

export const getIntegrationsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/integrations',
    summary: 'List integrations',
    tags: ['integrations'],
    auth: 'secret-key',
    responses: {
      200: { description: 'The integrations', schema: z.object({ data: z.array(integrationSchema) }) },
    },
    handler: async ({ environment }) => ({
      data: await Promise.all(
        (await deps.integrations.list(environment.id)).map((integration) => integrationView(deps, integration)),
      ),
    }),
  });
