import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { integrationSchema, integrationView } from './integrationView.js';

export const getIntegrationRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/integrations/:id',
    summary: 'One integration',
    tags: ['integrations'],
    auth: 'secret-key',
    params: z.object({ id: z.string().min(1) }).strict(),
    responses: { 200: { description: 'The integration', schema: integrationSchema } },
    handler: async ({ params, environment }) =>
      integrationView(deps, await deps.integrations.get(environment.id, params.id)),
  });
