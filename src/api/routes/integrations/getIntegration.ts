import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { integrationAnswer, integrationInclude, integrationView } from './integrationView.js';

export const getIntegrationRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/integrations/:id',
    summary: 'One integration',
    tags: ['integrations'],
    auth: 'secret-key',
    params: z.object({ id: z.string().min(1) }).strict(),
    query: z
      .object({
        include: integrationInclude
          .optional()
          .describe('`webhook` adds `webhook_url`; `credentials` adds the OAuth client (never its secret).'),
      })
      .strict(),
    responses: { 200: { description: 'The integration', schema: integrationAnswer } },
    handler: async ({ params, query, environment }) => {
      const include = new Set(query.include ?? []);
      return {
        data: await integrationView(deps, await deps.integrations.get(environment.id, params.id), {
          ...(include.has('webhook') ? { webhook: { environmentName: environment.name } } : {}),
          credentials: include.has('credentials'),
        }),
      };
    },
  });
