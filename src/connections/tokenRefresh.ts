/**
 * The locked token refresh: renews an OAuth 2 token with its refresh token, or obtains a new one for a
 * minted kind (client credentials, service account, app installation), and stores the outcome either
 * way.
 *
 * Refresh under concurrency: every refresh of a connection runs under a transaction-scoped advisory
 * lock on the connection's id and re-reads the row after taking it. A caller that waited finds the
 * token already fresh (or the grant already marked revoked) and does not ask the provider again, so
 * two runs on any two processes that need a refresh at once cause one token request. The decisions are
 * pure functions (refreshDecision.ts); this file holds the lock, the provider calls and the writes.
 */
import { inTransaction, type PoolClient } from '../db/pool.js';
import { codeLabel, tokenRefreshFailures } from '../metrics/index.js';
import { ServiceError } from '../errors.js';
import { describeConnection, modeMismatch, refreshErrorOf, refreshFailed } from './connectionErrors.js';
import type { ConnectionRow, ConnectionStore } from './connectionStore.js';
import {
  hasToken,
  isMinted,
  renewableAt,
  REFRESH_WINDOW_MS,
  withToken,
  type MintedCredentials,
  type OAuth2Credentials,
  type StoredCredentials,
  type TokenCredentials,
} from './credentials.js';
import type { ResolvedIntegration } from './integrationStore.js';
import {
  credentialsFromTokenResponse,
  requestIntegrationToken,
  settingsFromTokenResponse,
  TokenRequestError,
} from './oauth2.js';
import { beforeRefresh, keepsCurrentToken, underLock } from './refreshDecision.js';
import type { ConnectionResources } from './resources.js';
import { mintToken, type MintedToken } from './tokenGrants.js';
import type { ConnectionScope } from '../runtime/connectionAccess.js';

/** First key of the two-key advisory lock form; the second is the connection's integer id. */
const REFRESH_LOCK_NAMESPACE = 7_411_106;

export interface Refreshed {
  row: ConnectionRow;
  credentials: StoredCredentials;
}
interface FailedRefresh extends Refreshed {
  error: ServiceError;
  /** This failure is the one that marked the connection as needing re-authorisation. */
  newlyPermanent?: boolean;
}

export class TokenRefreshSystem {
  /**
   * Refreshes in flight in this process, by connection row id. Callers of one process join the same
   * refresh instead of each holding a pooled Postgres connection while they wait on the advisory lock.
   */
  private readonly refreshing = new Map<number, Promise<Refreshed>>();

  constructor(
    private readonly options: {
      resources: ConnectionResources;
      store: ConnectionStore;
    },
  ) {}

  /** The row and credentials, refreshed first when SPEC.md "Authentication" says so. */
  async fresh(scope: ConnectionScope, forceRefresh: boolean): Promise<Refreshed> {
    const { store, resources } = this.options;
    const row = await store.row(scope);
    const credentials = store.decrypt(row);
    switch (beforeRefresh({ credentials, row, forceRefresh, now: resources.now() })) {
      case 'current':
        return { row, credentials };
      case 'failed':
        throw refreshFailed(scope, row);
      case 'refresh':
        return forceRefresh ? this.refresh(scope, row, true) : this.shared(scope, row);
    }
  }

  /**
   * The refresh of this connection in flight in this process, or a new one (not forced): a token
   * expiring within `windowMs` is renewed.
   */
  shared(scope: ConnectionScope, row: ConnectionRow, windowMs = REFRESH_WINDOW_MS): Promise<Refreshed> {
    const inFlight = this.refreshing.get(row.id);
    if (inFlight) return inFlight;
    const started = this.refresh(scope, row, false, windowMs).finally(() => this.refreshing.delete(row.id));
    this.refreshing.set(row.id, started);
    return started;
  }

  /**
   * The first token of a minted kind, obtained before anything is stored: credentials the provider
   * refuses (a bad private key, a wrong client secret) are refused here with the provider's reason and
   * nothing is saved. When the provider is only unreachable, the connection is stored without a token
   * and the background refresher (or the first request) obtains one.
   */
  async firstToken(
    scope: ConnectionScope,
    resolved: ResolvedIntegration,
    credentials: MintedCredentials,
    config: Record<string, string>,
  ): Promise<MintedCredentials> {
    try {
      return withToken(credentials, await this.mint(resolved, credentials, config));
    } catch (error) {
      if (!(error instanceof TokenRequestError)) throw error;
      if (!error.permanent) {
        this.options.resources.log(
          `no first token for ${describeConnection(scope)} yet (${error.message}); it is stored and retried`,
          'warn',
        );
        return credentials;
      }
      throw new ServiceError(
        error.code === 'invalid_private_key' ? 'invalid_private_key' : 'connection_credentials_rejected',
        `${describeConnection(scope)} was not saved: ${error.message}`,
      );
    }
  }

  private async refresh(
    scope: ConnectionScope,
    seen: ConnectionRow,
    forceRefresh: boolean,
    windowMs = REFRESH_WINDOW_MS,
  ): Promise<Refreshed> {
    const { resources, store } = this.options;
    const resolved = await resources.integrations.resolve(scope.environmentId, scope.integrationId);
    const outcome = await inTransaction(resources.db, async (client): Promise<Refreshed | FailedRefresh> => {
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', [REFRESH_LOCK_NAMESPACE, seen.id]);
      // Re-read under the lock: another caller may have refreshed (or failed to) while this one waited.
      const row = await store.row(scope, client);
      const credentials = store.decrypt(row);
      const decision = underLock({ seen, row, credentials, forceRefresh, now: resources.now(), windowMs });
      if (decision === 'failed') return { row, credentials, error: refreshFailed(scope, row) };
      if (decision === 'current' || !hasToken(credentials)) return { row, credentials };
      if (isMinted(credentials)) return this.mintLocked(client, scope, resolved, row, credentials);
      return this.refreshLocked(client, scope, resolved, row, credentials);
    });
    if ('error' in outcome) {
      const refreshError = refreshErrorOf(outcome.row);
      if (outcome.newlyPermanent && refreshError) {
        // After the transaction: the mark is stored whatever the hook does, and the lock is not held meanwhile.
        await resources.onNeedsReauth?.({ scope, refreshError }).catch((error: unknown) => {
          resources.log(
            `after marking ${describeConnection(scope)} as needing re-authorisation, onNeedsReauth failed: ${error instanceof Error ? error.message : String(error)}`,
            'warn',
          );
        });
      }
      const current = outcome.credentials;
      if (
        keepsCurrentToken({
          retryable: outcome.error.retryable,
          forceRefresh,
          credentials: current,
          now: resources.now(),
        })
      )
        return { row: outcome.row, credentials: current };
      throw outcome.error;
    }
    return outcome;
  }

  /** Asks the provider for a new token while holding the lock, and stores the outcome either way. */
  private async refreshLocked(
    client: PoolClient,
    scope: ConnectionScope,
    resolved: ResolvedIntegration,
    row: ConnectionRow,
    credentials: OAuth2Credentials,
  ): Promise<Refreshed | FailedRefresh> {
    const { resources } = this.options;
    const { provider } = resolved;
    if (provider.auth_mode !== 'OAUTH2') throw modeMismatch(scope, provider.auth_mode, 'OAUTH2');
    if (credentials.refresh_token === undefined) {
      const expired =
        credentials.expires_at !== undefined && Date.parse(credentials.expires_at) <= resources.now().getTime();
      // Without a refresh token a still-valid token is the best there is; an expired one is useless.
      if (!expired) return { row, credentials };
      return this.recordFailure(
        client,
        scope,
        row,
        new TokenRequestError(
          'no_refresh_token',
          'the access token expired and the connection has no refresh token',
          true,
        ),
      );
    }
    let raw: Record<string, unknown>;
    try {
      raw = await requestIntegrationToken(scope.integrationId, resolved, {
        provider,
        connectionConfig: row.connection_config,
        grant: { grant_type: 'refresh_token', refresh_token: credentials.refresh_token },
        fetch: resources.fetch,
      });
    } catch (error) {
      if (error instanceof TokenRequestError) return this.recordFailure(client, scope, row, error);
      throw error;
    }
    const next = credentialsFromTokenResponse(raw, resources.now(), credentials.refresh_token);
    const config = { ...row.connection_config, ...settingsFromTokenResponse(provider, raw) };
    return this.storeToken(client, scope, row, next, config, 'refreshed');
  }

  /** Obtains a new token for a minted kind (client credentials, service account, app) while holding the lock. */
  private async mintLocked(
    client: PoolClient,
    scope: ConnectionScope,
    resolved: ResolvedIntegration,
    row: ConnectionRow,
    credentials: MintedCredentials,
  ): Promise<Refreshed | FailedRefresh> {
    const { provider } = resolved;
    if (provider.auth_mode !== credentials.type) throw modeMismatch(scope, provider.auth_mode, credentials.type);
    let minted;
    try {
      minted = await this.mint(resolved, credentials, row.connection_config);
    } catch (error) {
      if (error instanceof TokenRequestError) return this.recordFailure(client, scope, row, error);
      throw error;
    }
    return this.storeToken(client, scope, row, withToken(credentials, minted), row.connection_config, 'obtained');
  }

  private async mint(
    resolved: ResolvedIntegration,
    credentials: MintedCredentials,
    connectionConfig: Record<string, string>,
  ): Promise<MintedToken> {
    const { resources } = this.options;
    const { provider } = resolved;
    if (provider.auth_mode !== 'OAUTH2_CC' && provider.auth_mode !== 'JWT' && provider.auth_mode !== 'APP') {
      throw new TokenRequestError(
        'credentials_type_mismatch',
        `${credentials.type} credentials do not fit a provider that uses ${provider.auth_mode}`,
        true,
      );
    }
    return mintToken({
      provider,
      credentials,
      connectionConfig,
      scopes: resolved.integration.oauthScopes,
      fetch: resources.fetch,
      now: resources.now(),
    });
  }

  private async storeToken(
    client: PoolClient,
    scope: ConnectionScope,
    row: ConnectionRow,
    next: TokenCredentials,
    config: Record<string, string>,
    verb: string,
  ): Promise<Refreshed> {
    const { resources } = this.options;
    const now = resources.now();
    const { rows } = await client.query<ConnectionRow>(
      `UPDATE connections SET credentials_encrypted = $2, connection_config = $3, credentials_refreshed_at = $4,
         credentials_expires_at = $5,
         refresh_error_code = NULL, refresh_error_message = NULL, refresh_error_at = NULL, refresh_error_permanent = false,
         refresh_attempts = 0, refresh_retry_at = NULL, updated_at = now()
       WHERE id = $1 RETURNING *`,
      [
        row.id,
        resources.encryptor.encryptJson(next, 'connection_credentials'),
        JSON.stringify(config),
        now,
        renewableAt(next, now),
      ],
    );
    resources.log(
      `${verb} the access token of ${describeConnection(scope)}; it expires at ${next.expires_at ?? 'no stated time'}`,
    );
    return { row: rows[0]!, credentials: next };
  }

  private async recordFailure(
    client: PoolClient,
    scope: ConnectionScope,
    row: ConnectionRow,
    failure: TokenRequestError,
  ): Promise<FailedRefresh> {
    const { resources, store } = this.options;
    const { rows } = await client.query<ConnectionRow>(
      `UPDATE connections SET refresh_error_code = $2, refresh_error_message = $3, refresh_error_at = $4,
         refresh_error_permanent = $5, updated_at = now()
       WHERE id = $1 RETURNING *`,
      [row.id, failure.code, failure.message, resources.now(), failure.permanent],
    );
    const updated = rows[0]!;
    tokenRefreshFailures.inc({
      integration: scope.integrationId,
      code: codeLabel(failure.code),
      permanent: String(failure.permanent),
    });
    resources.log(`refresh of ${describeConnection(scope)} failed: ${failure.message}`, 'warn');
    return {
      row: updated,
      credentials: store.decrypt(updated),
      error: refreshFailed(scope, updated),
      // Read under the refresh lock: of racing refreshes, only the one that set the mark says so.
      newlyPermanent: failure.permanent && !row.refresh_error_permanent,
    };
  }
}
