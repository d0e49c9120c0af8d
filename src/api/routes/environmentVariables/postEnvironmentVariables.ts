import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { environmentVariableSchema } from './getEnvironmentVariables.js';

export const setVariablesBody = z
  .object({
    variables: z
      .array(z.object({ name: z.string().min(1), value: z.string() }).strict())
      .min(1)
      .max(1000),
    replace_all: z.boolean().default(false).describe('Delete every variable not listed (one transaction).'),
  })
  .strict();

export const postEnvironmentVariablesRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/environment-variables',
    summary: 'Set environment variables',
    description: 'Creates or replaces the variables given; with `replace_all` the given set becomes the whole set.',
    tags: ['environment'],
    auth: 'secret-key',
    body: setVariablesBody,
    responses: {
      200: { description: 'All variables now', schema: z.object({ variables: z.array(environmentVariableSchema) }) },
    },
    handler: async ({ body, environment }) => {
      if (body.replace_all) await deps.variables.replaceAll(environment.id, body.variables);
      else for (const variable of body.variables) await deps.variables.set(environment.id, variable);
      return { variables: await deps.variables.list(environment.id) };
    },
  });
