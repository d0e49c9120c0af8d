import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';

export const environmentVariableSchema = z.object({ name: z.string(), value: z.string() });

export const getEnvironmentVariablesRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/environment-variables',
    summary: 'The environment variables, with their values',
    tags: ['environment'],
    auth: 'secret-key',
    responses: {
      200: { description: 'The variables', schema: z.object({ variables: z.array(environmentVariableSchema) }) },
    },
    handler: async ({ environment }) => ({ variables: await deps.variables.list(environment.id) }),
  });
