/**
 * Builds the connections area from its dependencies. The service composes it in src/service.ts
 * (createService), which hands `service` and `variables` to the runtime's activities and the rest to
 * the API.
 *
 * @example
 * const connections = createConnections({ db, encryptor: loadEncryptor({ env: loadSettings() }), callbackUrl: 'https://svc.example.com/oauth/callback' });
 * app.use(createOAuthRouter({ flow: connections.oauthFlow, environments: connections.environments }));
 */
import type { EnvironmentHoldings } from '../db/environmentHoldings.js';
import type { Pool } from '../db/pool.js';
import { PostgresConnectionService } from './connectionService.js';
import type { ConnectionSavedEvent, NeedsReauthEvent } from './resources.js';
import type { Encryptor } from './encryption.js';
import { createEnvironmentStore } from './environmentStore.js';
import { createEnvironmentVariableStore } from './environmentVariableStore.js';
import { createIntegrationStore } from './integrationStore.js';
import type { Fetch } from './oauth2.js';
import { OAuthFlow } from './oauthFlow.js';
import { loadProviderCatalog, type ProviderCatalog } from './providers/catalog.js';

export interface CreateConnectionsOptions {
  db: Pool;
  encryptor: Encryptor;
  /** Absolute URL of GET /oauth/callback as the providers' OAuth apps know it (SERVICE_CALLBACK_URL). */
  callbackUrl: string;
  /** The API's public URL (SERVICE_PUBLIC_URL), under which scripts see their webhook URL. */
  publicUrl?: string;
  /** @default loadProviderCatalog(): the built-ins (the service adds SERVICE_PROVIDERS_FILE's: src/service.ts) */
  catalog?: ProviderCatalog;
  fetch?: Fetch;
  now?: () => Date;
  log?: (message: string) => void;
  onConnectionSaved?: (event: ConnectionSavedEvent) => Promise<void>;
  onNeedsReauth?: (event: NeedsReauthEvent) => Promise<void>;
  /** The other modules' rows of an environment, which deleting it removes (src/db/environmentHoldings.ts). */
  environmentHoldings?: readonly EnvironmentHoldings[];
}

export function createConnections(options: CreateConnectionsOptions) {
  const { db, encryptor } = options;
  const catalog = options.catalog ?? loadProviderCatalog();
  const integrations = createIntegrationStore({ db, encryptor, catalog });
  const service = new PostgresConnectionService({
    db,
    encryptor,
    integrations,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.now ? { now: options.now } : {}),
    ...(options.log ? { log: options.log } : {}),
    ...(options.publicUrl ? { publicUrl: options.publicUrl } : {}),
    ...(options.onConnectionSaved ? { onConnectionSaved: options.onConnectionSaved } : {}),
    ...(options.onNeedsReauth ? { onNeedsReauth: options.onNeedsReauth } : {}),
  });
  const oauthFlow = new OAuthFlow({
    db,
    encryptor,
    integrations,
    connections: service,
    callbackUrl: options.callbackUrl,
    ...(options.fetch ? { fetch: options.fetch } : {}),
    ...(options.now ? { now: options.now } : {}),
  });
  return {
    catalog,
    environments: createEnvironmentStore({ db, holdings: options.environmentHoldings }),
    variables: createEnvironmentVariableStore({ db, encryptor }),
    integrations,
    service,
    oauthFlow,
  };
}

export type Connections = ReturnType<typeof createConnections>;
export { PostgresConnectionService } from './connectionService.js';
export { Encryptor, loadEncryptor } from './encryption.js';
export { createEnvironmentStore, type EnvironmentStore } from './environmentStore.js';
export { createEnvironmentVariableStore, type EnvironmentVariableManager } from './environmentVariableStore.js';
export { createIntegrationStore, type IntegrationStore } from './integrationStore.js';
export { OAuthFlow } from './oauthFlow.js';
export { loadProviderCatalog } from './providers/catalog.js';
export { reencryptAll } from './reencrypt.js';
export { signOAuth1 } from './oauth1.js';
