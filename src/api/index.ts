/**
 * The REST API, composed: every built-in route, authentication by environment secret key, the OAuth
 * connect/callback router, and the generated endpoints of the current deployment. Returns the
 * Express app without `listen`; the service's composition root owns the socket.
 *
 * @example
 * const app = createApi({ db, environments, connections: connections.service, integrations, variables, records, logs, syncs, deployments, encryptor, oauthFlow });
 * app.listen(3003);
 */
import { createDashboardRouter } from '../dashboard/index.js';
import { createConnectPageRouter } from './connectPage.js';
import { createOAuthRouter } from './oauthRoutes.js';
import type { ApiDeps } from './deps.js';
import { createApiRoutes, createGeneratedEndpointFallback } from './routes/index.js';
import { createServer } from './server.js';

export type { ApiDeps, ProxyOptions } from './deps.js';

export function createApi(deps: ApiDeps) {
  const routes = createApiRoutes(deps);
  return createServer({
    routes,
    authenticate: async (secretKey) => {
      const environment = await deps.environments.findBySecretKey(secretKey);
      return environment ? { id: environment.id, name: environment.name } : undefined;
    },
    mount: [
      ...(deps.oauthFlow
        ? [
            createOAuthRouter({ flow: deps.oauthFlow, environments: deps.environments }),
            createConnectPageRouter({
              flow: deps.oauthFlow,
              integrations: deps.integrations,
              connections: deps.connections,
            }),
          ]
        : []),
      createDashboardRouter({ ...deps.dashboard, environments: deps.environments }),
    ],
    fallback: createGeneratedEndpointFallback(deps),
    adminKey: deps.adminKey,
    ...(deps.bodyLimit === undefined ? {} : { bodyLimit: deps.bodyLimit }),
    ...(deps.rateLimit === undefined ? {} : { rateLimit: deps.rateLimit }),
    ...(deps.logger === undefined ? {} : { logger: deps.logger }),
  });
}
