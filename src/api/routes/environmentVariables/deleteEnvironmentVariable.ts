import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const deleteEnvironmentVariableRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'delete',
    path: '/environment-variables/:name',
    summary: 'Delete an environment variable',
    tags: ['environment'],
    auth: 'secret-key',
    params: z.object({ name: z.string().min(1) }).strict(),
    responses: { 200: { description: 'Deleted', schema: z.object({ deleted: z.literal(true) }) } },
    handler: async ({ params, environment }) => {
      if (!(await deps.variables.delete(environment.id, params.name))) {
        throw new ServiceError('unknown_environment_variable', `no environment variable '${params.name}'`);
      }
      return { deleted: true as const };
    },
  });
