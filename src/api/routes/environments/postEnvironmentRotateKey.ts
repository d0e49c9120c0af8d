import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { environmentIdParams, environmentWithKeySchema, environmentView, ADMIN_ROUTE } from './environmentView.js';

export const postEnvironmentRotateKeyRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN_ROUTE,
    method: 'post',
    path: '/environments/:id/rotate-key',
    summary: 'Replace an environment’s secret key; the old key stops working immediately (service admin key)',
    description:
      'No grace period: the old key is refused from the moment this answers, by every API server (the key is looked up in Postgres on every request). The public key stays.',
    params: environmentIdParams,
    responses: {
      200: { description: 'The environment and its new secret key, shown once', schema: environmentWithKeySchema },
      404: { description: '`unknown_environment`' },
    },
    handler: async ({ params }) => {
      const secretKey = await deps.environments.rotateSecretKey(params.id);
      return { environment: environmentView(await deps.environments.get(params.id)), secret_key: secretKey };
    },
  });
