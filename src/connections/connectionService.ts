/**
 * The connection service: a thin facade over its parts, each in a file of its own and sharing one
 * resources object (resources.ts), as Trigger.dev v3's run engine composes its systems:
 * - credentials.ts: the credential schemas and what is shown or redacted of them (pure);
 * - requestAuthorizer.ts: where a request goes and what credentials ride on it (pure);
 * - connectionStore.ts: the rows: create, list, metadata, tags, delete, and their projections;
 * - tokenRefresh.ts: the locked refresh (its decisions pure, in refreshDecision.ts);
 * - refreshClaims.ts: the background refresher's claims (its rounds run in tokenRefresher.ts).
 * The runtime codes against `ConnectionService` (types.ts); the API and the OAuth flow use the rest.
 */
import { policyFetch } from '../runtime/outbound.js';
import { ServiceError } from '../errors.js';
import type { IntegrationDescription } from '../runtime/svcTypes.js';
import type { ConnectionRecord } from '../runtime/public.js';
import type { Pool } from '../db/pool.js';
import { lineLog, type LineLog } from '../log.js';
import type { Encryptor } from './encryption.js';
import type { IntegrationStore } from './integrationStore.js';
import type { Fetch } from './oauth2.js';
import { validateConnectionConfig } from './providers/catalog.js';
import { invalidInput, refreshFailed } from './connectionErrors.js';
import {
  createConnectionStore,
  type ConnectionFilter,
  type ConnectionStore,
  type ConnectionSummary,
} from './connectionStore.js';
import { credentialSecretForms, importConnectionInput, isMinted, type ImportConnectionInput } from './credentials.js';
import { RefreshClaimSystem, type ClaimOptions, type RefreshClaim } from './refreshClaims.js';
import { authorizeRequest } from './requestAuthorizer.js';
import type { ConnectionResources, ConnectionSavedEvent, NeedsReauthEvent } from './resources.js';
import type { ConnectionTags } from './tags.js';
import { TokenRefreshSystem } from './tokenRefresh.js';
import type { AuthorizedRequest, ConnectionManager, ConnectionScope, RequestToAuthorize } from './types.js';

export interface PostgresConnectionServiceDeps {
  db: Pool;
  encryptor: Encryptor;
  integrations: IntegrationStore;
  /** For token requests; tests may pass their own. @default policyFetch (the outbound request policy) */
  fetch?: Fetch;
  /** @default () => new Date() */
  now?: () => Date;
  /** One line per event, never with a secret in it. @default a line on stderr */
  log?: LineLog;
  /** The API's public URL (SERVICE_PUBLIC_URL): scripts see their integration's webhook URL under it. */
  publicUrl?: string;
  /** Called after a connection is created or reconnected (to start its auto-start syncs, say). */
  onConnectionSaved?: (event: ConnectionSavedEvent) => Promise<void>;
  /**
   * Called once when a failed refresh marks a connection as needing re-authorisation (the provider
   * refused its grant): not again for later failures, until a reconnect or a successful refresh
   * clears the mark.
   */
  onNeedsReauth?: (event: NeedsReauthEvent) => Promise<void>;
}

/** The object without its undefined values (zod's optional keys, for exactOptionalPropertyTypes). */
function definedOnly<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, inner]) => inner !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}

export class PostgresConnectionService implements ConnectionManager {
  private readonly resources: ConnectionResources;
  private readonly publicUrl: string | undefined;
  private readonly store: ConnectionStore;
  private readonly tokenRefresh: TokenRefreshSystem;
  private readonly refreshClaims: RefreshClaimSystem;

  constructor(deps: PostgresConnectionServiceDeps) {
    this.resources = {
      db: deps.db,
      encryptor: deps.encryptor,
      integrations: deps.integrations,
      fetch: deps.fetch ?? policyFetch,
      now: deps.now ?? (() => new Date()),
      log: deps.log ?? lineLog('connections', 'info'),
      onConnectionSaved: deps.onConnectionSaved,
      onNeedsReauth: deps.onNeedsReauth,
    };
    this.publicUrl = deps.publicUrl;
    const resources = this.resources;
    this.store = createConnectionStore(resources);
    this.tokenRefresh = new TokenRefreshSystem({ resources, store: this.store });
    this.refreshClaims = new RefreshClaimSystem({ resources, store: this.store, tokenRefresh: this.tokenRefresh });
  }

  // ---- ConnectionService (types.ts documents each method) -----------------------------------------

  async getConnection(
    scope: ConnectionScope,
    options: { forceRefresh?: boolean; refreshToken?: boolean } = {},
  ): Promise<ConnectionRecord> {
    const { row, credentials } = await this.tokenRefresh.fresh(scope, options.forceRefresh ?? false);
    return this.store.record(row, credentials, options.refreshToken ?? false);
  }

  async authorizeRequest(scope: ConnectionScope, request: RequestToAuthorize): Promise<AuthorizedRequest> {
    const integration = await this.resources.integrations.resolve(scope.environmentId, scope.integrationId);
    const { row, credentials } = await this.tokenRefresh.fresh(scope, false);
    return authorizeRequest({
      scope,
      request,
      credentials,
      connectionConfig: row.connection_config,
      integration,
      noToken: () => refreshFailed(scope, row),
    });
  }

  async credentialSecrets(
    scope: ConnectionScope,
    options: { existedAt?: Date; ids?: readonly number[] } = {},
  ): Promise<string[] | undefined> {
    const row = await this.store.find(scope);
    if (!row) return undefined;
    if (options.existedAt !== undefined && row.created_at.getTime() > options.existedAt.getTime()) return undefined;
    if (options.ids !== undefined && options.ids.length > 0 && !options.ids.includes(row.id)) return undefined;
    const resolved = await this.resources.integrations
      .resolve(scope.environmentId, scope.integrationId)
      .catch(() => undefined);
    return credentialSecretForms(this.store.decrypt(row), resolved?.clientSecret);
  }

  async getMetadata(scope: ConnectionScope): Promise<Record<string, unknown>> {
    return (await this.store.row(scope)).metadata;
  }

  async setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
    await this.store.writeMetadata(scope.environmentId, scope.integrationId, [scope.connectionId], metadata, 'replace');
  }

  async updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
    await this.store.writeMetadata(scope.environmentId, scope.integrationId, [scope.connectionId], metadata, 'merge');
  }

  async describeIntegration(scope: Omit<ConnectionScope, 'connectionId'>): Promise<IntegrationDescription> {
    const { integration, provider } = await this.resources.integrations.resolve(
      scope.environmentId,
      scope.integrationId,
    );
    const name = (await this.store.environmentName(scope.environmentId)) ?? scope.environmentId;
    return {
      integration: {
        unique_key: integration.id,
        provider: integration.provider,
        display_name: integration.displayName,
        created_at: integration.createdAt,
        updated_at: integration.updatedAt,
        // As GET /integrations/:id?include=webhook answers it (src/api/routes/integrations/integrationView.ts).
        webhook_url: `${this.publicUrl ?? ''}/webhook/${encodeURIComponent(name)}/${encodeURIComponent(integration.id)}`,
      },
      ...(provider.paginate ? { pagination: definedOnly(provider.paginate) } : {}),
    };
  }

  // ---- ConnectionManager: for the API, the OAuth flow and sync selection (types.ts) ----------------

  async importConnection(input: ImportConnectionInput): Promise<ConnectionRecord> {
    return this.connectWith(input, { replace: true });
  }

  async connectWith(
    input: ImportConnectionInput,
    options: { replace: boolean; claim?: () => Promise<void> },
  ): Promise<ConnectionRecord> {
    const parsed = importConnectionInput.safeParse(input);
    if (!parsed.success) throw invalidInput('connection', parsed.error);
    const data = parsed.data;
    const resolved = await this.resources.integrations.resolve(data.environmentId, data.integrationId);
    if (resolved.provider.auth_mode !== data.credentials.type) {
      throw new ServiceError(
        'credentials_type_mismatch',
        `integration '${data.integrationId}' uses provider '${resolved.integration.provider}' (${resolved.provider.auth_mode}); credentials of type ${data.credentials.type} do not fit it`,
      );
    }
    const config = data.connection_config ?? {};
    validateConnectionConfig(resolved.provider, config);
    const scope = {
      environmentId: data.environmentId,
      integrationId: data.integrationId,
      connectionId: data.connectionId,
    };
    const credentials = isMinted(data.credentials)
      ? await this.tokenRefresh.firstToken(scope, resolved, data.credentials, config)
      : data.credentials;
    await options.claim?.();
    const row = await this.store.save(scope, credentials, config, data.metadata, data.tags, {
      replace: options.replace,
    });
    return this.store.record(row, credentials, false);
  }

  async saveConnection(...args: Parameters<ConnectionStore['save']>): Promise<void> {
    await this.store.save(...args);
  }

  async connectionIdsWhere(...args: Parameters<ConnectionStore['idsWhere']>): Promise<string[]> {
    return this.store.idsWhere(...args);
  }

  async listConnections(environmentId: string, filter: ConnectionFilter = {}): Promise<ConnectionSummary[]> {
    return this.store.list(environmentId, filter);
  }

  async setTags(scope: ConnectionScope, tags: ConnectionTags): Promise<void> {
    await this.store.setTags(scope, tags);
  }

  async writeMetadataOf(...args: Parameters<ConnectionStore['writeMetadata']>): Promise<void> {
    await this.store.writeMetadata(...args);
  }

  async getConnectionStatus(scope: ConnectionScope): Promise<ConnectionSummary> {
    const row = await this.store.row(scope);
    const integration = await this.resources.integrations.get(scope.environmentId, scope.integrationId);
    return this.store.summary(row, integration.provider);
  }

  async deleteConnection(scope: ConnectionScope): Promise<boolean> {
    return this.store.delete(scope);
  }

  // ---- For the background refresher (tokenRefresher.ts) -----------------------------------------

  /** refreshClaims.ts `claimExpiring`. */
  async claimExpiring(options: ClaimOptions): Promise<RefreshClaim[]> {
    return this.refreshClaims.claimExpiring(options);
  }

  /** refreshClaims.ts `refreshClaimed`. */
  async refreshClaimed(claim: RefreshClaim, withinMs: number): Promise<'refreshed' | 'failed'> {
    return this.refreshClaims.refreshClaimed(claim, withinMs);
  }

  /** refreshClaims.ts `releaseClaims`. */
  async releaseClaims(claims: RefreshClaim[]): Promise<void> {
    await this.refreshClaims.releaseClaims(claims);
  }
}
