import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { environmentSchema, environmentIdParams, environmentView, ADMIN_ROUTE } from './environmentView.js';

export const deleteEnvironmentRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN_ROUTE,
    method: 'delete',
    path: '/environments/:id',
    summary: 'Delete an environment without connections, with everything it holds (service admin key)',
    description:
      'Refused with 409 `environment_not_empty` while the environment has connections: delete them first with the environment’s own key (DELETE /connections/:id stops their syncs and erases their records). Then the environment goes with its integrations (and OAuth client secrets), environment variables, webhook settings and secrets, deployments, logs, run history and delivery log; its key stops working.',
    params: environmentIdParams,
    responses: {
      200: {
        description: 'What was removed besides the rows that cascade',
        schema: z.object({
          deleted: z.literal(true),
          environment: environmentSchema,
          removed: z.record(z.string(), z.number()),
        }),
      },
      404: { description: '`unknown_environment`' },
      409: { description: '`environment_not_empty`: it still has connections' },
    },
    handler: async ({ params }) => {
      const { environment, removed } = await deps.environments.delete(params.id);
      return { deleted: true as const, environment: environmentView(environment), removed };
    },
  });
