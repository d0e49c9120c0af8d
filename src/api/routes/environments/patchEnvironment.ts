import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import {
  environmentSchema,
  renameEnvironmentBody,
  environmentIdParams,
  environmentView,
  ADMIN_ROUTE,
} from './environmentView.js';

export const patchEnvironmentRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN_ROUTE,
    method: 'patch',
    path: '/environments/:id',
    summary: 'Rename an environment (service admin key)',
    description:
      'Only the name changes; the id, keys, connections and records stay. Inbound webhook URLs carry the name (`/webhook/<name>/<integration>`), so they change with it: `warnings` says so.',
    params: environmentIdParams,
    body: renameEnvironmentBody,
    responses: {
      200: {
        description: 'The environment now',
        schema: z.object({ environment: environmentSchema, warnings: z.array(z.string()) }),
      },
      404: { description: '`unknown_environment`' },
      409: { description: '`environment_exists`: the name is taken' },
    },
    handler: async ({ params, body }) => {
      const before = await deps.environments.get(params.id);
      const environment = await deps.environments.rename(params.id, body.name);
      const warnings =
        before.name === environment.name
          ? []
          : [
              `inbound webhook URLs of this environment's integrations are now ${deps.publicUrl ?? ''}/webhook/${environment.name}/<integration>: update them at the providers (the old name answers 404)`,
            ];
      return { environment: environmentView(environment), warnings };
    },
  });
