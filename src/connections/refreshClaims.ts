/**
 * The background refresher's side of the connections table (its rounds: tokenRefresher.ts): claiming
 * the connections whose tokens expire soon, fair between environments and with a back-off per
 * connection, renewing one claimed connection under the same lock as an on-demand refresh, and giving
 * back the claims a round did not get to.
 */
import { describeConnection } from './connectionErrors.js';
import type { ConnectionStore } from './connectionStore.js';
import type { ConnectionResources } from './resources.js';
import type { TokenRefreshSystem } from './tokenRefresh.js';
import type { ConnectionScope } from '../runtime/connectionAccess.js';

/** A connection the background refresher claimed for one round (claimExpiring). */
export interface RefreshClaim {
  id: number;
  scope: ConnectionScope;
  /**
   * When the connection's token was last renewed, as the claim found it: a renewal after the claim (an
   * on-demand refresh in another process) makes the claim moot, even when the new token is itself inside
   * the refresher's window.
   */
  refreshedAt: Date | null;
}

export interface ClaimOptions {
  withinMs: number;
  limit: number;
  perEnvironment: number;
  backoff: { initialMs: number; maxMs: number };
}

export class RefreshClaimSystem {
  constructor(
    private readonly options: {
      resources: ConnectionResources;
      store: ConnectionStore;
      tokenRefresh: TokenRefreshSystem;
    },
  ) {}

  /**
   * Claims, for one round of the background refresher (src/connections/tokenRefresher.ts), up to
   * `limit` connections whose tokens expire within `withinMs` (and minted connections without a token
   * yet), taking the environments in turn: every environment's most urgent token before any
   * environment's second, at most `perEnvironment` of one environment. A claim moves the connection's
   * `refresh_retry_at` past now by a delay that doubles with each attempt that did not renew the token
   * (`backoff`), so that a connection whose token URL times out is tried again later rather than every
   * round, and so that other worker processes skip it meanwhile. A renewed token clears the delay.
   */
  async claimExpiring(options: ClaimOptions): Promise<RefreshClaim[]> {
    const { resources } = this.options;
    const now = resources.now();
    const { rows } = await resources.db.query<{
      id: number;
      environment_id: string;
      provider_config_key: string;
      connection_id: string;
      credentials_refreshed_at: Date | null;
    }>(
      `WITH due AS (
         SELECT id, environment_id, credentials_expires_at,
                row_number() OVER (PARTITION BY environment_id ORDER BY credentials_expires_at, id) AS rank
         FROM connections
         WHERE credentials_expires_at IS NOT NULL AND refresh_error_permanent = false AND credentials_expires_at < $1
           AND (refresh_retry_at IS NULL OR refresh_retry_at <= $2)
       ), picked AS (
         SELECT id FROM due WHERE rank <= $4 ORDER BY rank, credentials_expires_at, id LIMIT $3
       )
       UPDATE connections c
          SET refresh_attempts = c.refresh_attempts + 1,
              refresh_retry_at = $2::timestamptz
                + make_interval(secs => least($6::float8, $5::float8 * power(2, least(c.refresh_attempts, 30))) / 1000)
         FROM picked
        WHERE c.id = picked.id
          -- Re-checked on the row as another process's claim left it: a connection is claimed once.
          AND (c.refresh_retry_at IS NULL OR c.refresh_retry_at <= $2)
       RETURNING c.id, c.environment_id, c.provider_config_key, c.connection_id, c.credentials_refreshed_at`,
      [
        new Date(now.getTime() + options.withinMs),
        now,
        options.limit,
        options.perEnvironment,
        options.backoff.initialMs,
        options.backoff.maxMs,
      ],
    );
    return rows.map((row) => ({
      id: row.id,
      scope: {
        environmentId: row.environment_id,
        integrationId: row.provider_config_key,
        connectionId: row.connection_id,
      },
      refreshedAt: row.credentials_refreshed_at,
    }));
  }

  /**
   * Renews the token of one claimed connection, under the same lock as an on-demand refresh (a script
   * asking at the same moment causes no second token request): 'refreshed', or 'failed' (the failure
   * is stored on the connection, and its claim's delay stands).
   */
  async refreshClaimed(claim: RefreshClaim, withinMs: number): Promise<'refreshed' | 'failed'> {
    const { resources, store, tokenRefresh } = this.options;
    try {
      const row = await store.row(claim.scope);
      // Renewed since the claim: compared with the claim's mark, because the row just read already holds
      // the new token, which a provider issuing tokens shorter than the window would make look due again.
      const renewedSinceClaim =
        (row.credentials_refreshed_at?.getTime() ?? null) !== (claim.refreshedAt?.getTime() ?? null);
      const outcome = renewedSinceClaim ? { row } : await tokenRefresh.shared(claim.scope, row, withinMs);
      if (outcome.row.refresh_error_at !== null && outcome.row.refresh_error_code !== null) return 'failed';
      // Renewed meanwhile by someone else (an on-demand refresh): the claim's delay goes all the same.
      if (outcome.row.refresh_retry_at !== null) {
        await resources.db.query('UPDATE connections SET refresh_attempts = 0, refresh_retry_at = NULL WHERE id = $1', [
          row.id,
        ]);
      }
      return 'refreshed';
    } catch (error) {
      resources.log(
        `background refresh of ${describeConnection(claim.scope)} failed: ${error instanceof Error ? error.message : String(error)}`,
        'warn',
      );
      return 'failed';
    }
  }

  /** Gives back claims a round did not get to: due again at once, the attempt not counted. */
  async releaseClaims(claims: RefreshClaim[]): Promise<void> {
    if (claims.length === 0) return;
    await this.options.resources.db.query(
      `UPDATE connections SET refresh_retry_at = NULL, refresh_attempts = greatest(refresh_attempts - 1, 0)
       WHERE id = ANY($1::bigint[])`,
      [claims.map((claim) => claim.id)],
    );
  }
}
