import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const environmentVariableSchema = z.object({ name: z.string(), value: z.string() });

export const getEnvironmentVariablesRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/environment-variables',
    summary: 'The environment variables, with their values',
    description: 'A JSON array, as in the de-facto API (POST answers `{ variables }`).',
    tags: ['environment'],
    auth: 'secret-key',
    responses: {
      200: { description: 'The variables', schema: z.array(environmentVariableSchema) },
    },
    handler: async ({ environment }) => deps.variables.list(environment.id),
  });
