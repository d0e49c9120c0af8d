import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { createEnvironmentBody, environmentWithKeySchema, environmentView, ADMIN_ROUTE } from './environmentView.js';

export const postEnvironmentsRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN_ROUTE,
    method: 'post',
    path: '/environments',
    summary: 'Create an environment; its secret key is in the answer, once (service admin key)',
    body: createEnvironmentBody,
    responses: {
      200: { description: 'The environment and its secret key', schema: environmentWithKeySchema },
      409: { description: '`environment_exists`: the name is taken' },
    },
    handler: async ({ body }) => {
      const { environment, secretKey } = await deps.environments.create({ name: body.name });
      return { environment: environmentView(environment), secret_key: secretKey };
    },
  });
