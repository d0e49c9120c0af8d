/**
 * The `connections` table: a connection's row, its credentials encrypted at rest, its settings,
 * metadata and tags; creating, listing, reading and deleting them, and the projections the API and
 * scripts are shown (a summary without credentials, the connection record of SPEC.md). The token
 * refresh (tokenRefresh.ts) and the background refresher's claims (refreshClaims.ts) write their own
 * columns of the same rows.
 */
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import type { ConnectionRecord } from '../runtime/public.js';
import {
  connectionExists,
  describeConnection,
  invalidInput,
  refreshErrorOf,
  unknownConnection,
  type RefreshError,
} from './connectionErrors.js';
import {
  connectionIdSchema,
  credentialsSchema,
  jsonObject,
  publicCredentials,
  renewableAt,
  type StoredCredentials,
} from './credentials.js';
import type { ConnectionResources } from './resources.js';
import { connectionTagsSchema, type ConnectionTags } from './tags.js';
import type { ConnectionScope } from '../runtime/connectionAccess.js';

const MAX_METADATA_BYTES = 1024 * 1024;

export interface ConnectionRow {
  id: number;
  environment_id: string;
  provider_config_key: string;
  connection_id: string;
  credentials_encrypted: string;
  connection_config: Record<string, string>;
  metadata: Record<string, unknown>;
  tags: ConnectionTags;
  credentials_refreshed_at: Date | null;
  refresh_error_code: string | null;
  refresh_error_message: string | null;
  refresh_error_at: Date | null;
  refresh_error_permanent: boolean;
  credentials_expires_at: Date | null;
  refresh_attempts: number;
  refresh_retry_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

/** A connection without its credentials: for lists and status. */
export interface ConnectionSummary {
  id: number;
  connection_id: string;
  provider_config_key: string;
  provider: string;
  auth_mode: StoredCredentials['type'];
  created_at: string;
  updated_at: string;
  refresh_error: RefreshError | null;
  metadata: Record<string, unknown>;
  tags: ConnectionTags;
  /** When the credentials were last obtained or refreshed. */
  last_fetched_at: string | null;
}

/** Which connections `list` returns; every filter given must match. */
export interface ConnectionFilter {
  integrationId?: string | undefined;
  /** Any of these integrations. */
  integrationIds?: string[] | undefined;
  /** Exactly this connection id (across integrations). */
  connectionId?: string | undefined;
  /** A case-insensitive substring of the connection id or of a tag value. */
  search?: string | undefined;
  /** Every one of these tags (keys in lower case). */
  tags?: ConnectionTags | undefined;
  limit?: number | undefined;
  offset?: number | undefined;
}

export interface ConnectionStore {
  /** The connection's row (through `db`, a transaction's client say), or `unknown_connection`. */
  row(scope: ConnectionScope, db?: Pool | PoolClient): Promise<ConnectionRow>;
  find(scope: ConnectionScope, db?: Pool | PoolClient): Promise<ConnectionRow | undefined>;
  decrypt(row: ConnectionRow): StoredCredentials;
  /**
   * Creates or replaces a connection's credentials, clearing any refresh error. With `replace: false`
   * an existing connection is left as it is and the call fails with `connection_exists`.
   */
  save(
    scope: ConnectionScope,
    credentials: StoredCredentials,
    connectionConfig: Record<string, string>,
    metadata?: Record<string, unknown>,
    tags?: ConnectionTags,
    options?: { replace?: boolean },
  ): Promise<ConnectionRow>;
  /**
   * The ids of an integration's connections whose `field` equals `value`: `connection_id`, or a key of
   * `metadata` or `connection_config` (`metadata.account`), as an inbound webhook names its connection.
   */
  idsWhere(scope: { environmentId: string; integrationId: string }, field: string, value: string): Promise<string[]>;
  list(environmentId: string, filter?: ConnectionFilter): Promise<ConnectionSummary[]>;
  /** Replaces a connection's tags. */
  setTags(scope: ConnectionScope, tags: ConnectionTags): Promise<void>;
  /**
   * Replaces (or merges into) the metadata of several connections of one integration at once: all of
   * them, or none when one does not exist or would grow too large.
   */
  writeMetadata(
    environmentId: string,
    integrationId: string,
    connectionIds: string[],
    metadata: Record<string, unknown>,
    mode: 'replace' | 'merge',
  ): Promise<void>;
  /** Deletes a connection and its credentials; false when there was none. */
  delete(scope: ConnectionScope): Promise<boolean>;
  /** The environment's name (what its inbound webhook URLs carry), or undefined when there is none. */
  environmentName(environmentId: string): Promise<string | undefined>;
  summary(row: ConnectionRow, provider: string): ConnectionSummary;
  /** The connection record (SPEC.md "Connection record"), the refresh token only when asked for. */
  record(row: ConnectionRow, credentials: StoredCredentials, includeRefreshToken: boolean): Promise<ConnectionRecord>;
}

export function createConnectionStore(resources: ConnectionResources): ConnectionStore {
  async function find(
    scope: ConnectionScope,
    db: Pool | PoolClient = resources.db,
  ): Promise<ConnectionRow | undefined> {
    const { rows } = await db.query<ConnectionRow>(
      'SELECT * FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3',
      [scope.environmentId, scope.integrationId, scope.connectionId],
    );
    return rows[0];
  }

  function decrypt(row: ConnectionRow): StoredCredentials {
    const parsed = credentialsSchema.safeParse(
      resources.encryptor.decryptJson(row.credentials_encrypted, 'connection_credentials'),
    );
    if (!parsed.success) {
      throw new ServiceError(
        'corrupt_credentials',
        `the stored credentials of connection #${row.id} do not have a known shape`,
      );
    }
    return parsed.data;
  }

  function summary(row: ConnectionRow, provider: string): ConnectionSummary {
    return {
      id: row.id,
      connection_id: row.connection_id,
      provider_config_key: row.provider_config_key,
      provider,
      auth_mode: decrypt(row).type,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
      refresh_error: refreshErrorOf(row),
      metadata: row.metadata,
      tags: row.tags,
      last_fetched_at: row.credentials_refreshed_at?.toISOString() ?? null,
    };
  }

  return {
    find,
    decrypt,
    summary,

    async row(scope: ConnectionScope, db: Pool | PoolClient = resources.db): Promise<ConnectionRow> {
      const row = await find(scope, db);
      if (!row) throw unknownConnection(scope);
      return row;
    },

    async save(
      scope: ConnectionScope,
      credentials: StoredCredentials,
      connectionConfig: Record<string, string>,
      metadata?: Record<string, unknown>,
      tags?: ConnectionTags,
      options: { replace?: boolean } = {},
    ): Promise<ConnectionRow> {
      const { db, encryptor, now, log, onConnectionSaved } = resources;
      const id = connectionIdSchema.safeParse(scope.connectionId);
      if (!id.success) throw invalidInput('connection_id', id.error);
      const onConflict =
        options.replace === false
          ? 'DO NOTHING'
          : `DO UPDATE SET
           credentials_encrypted = EXCLUDED.credentials_encrypted,
           connection_config = EXCLUDED.connection_config,
           metadata = COALESCE($6::jsonb, connections.metadata),
           tags = COALESCE($8::jsonb, connections.tags),
           credentials_refreshed_at = EXCLUDED.credentials_refreshed_at,
           credentials_expires_at = EXCLUDED.credentials_expires_at,
           refresh_error_code = NULL, refresh_error_message = NULL, refresh_error_at = NULL, refresh_error_permanent = false,
           updated_at = now()`;
      const { rows } = await db.query<ConnectionRow & { inserted: boolean }>(
        `INSERT INTO connections (environment_id, provider_config_key, connection_id, credentials_encrypted, connection_config, metadata, credentials_refreshed_at, tags, credentials_expires_at)
         VALUES ($1, $2, $3, $4, $5, COALESCE($6::jsonb, '{}'::jsonb), $7, COALESCE($8::jsonb, '{}'::jsonb), $9)
         ON CONFLICT (environment_id, provider_config_key, connection_id) ${onConflict}
         RETURNING *, (xmax = 0) AS inserted`,
        [
          scope.environmentId,
          scope.integrationId,
          scope.connectionId,
          encryptor.encryptJson(credentials, 'connection_credentials'),
          JSON.stringify(connectionConfig),
          metadata === undefined ? null : JSON.stringify(metadata),
          now(),
          tags === undefined ? null : JSON.stringify(tags),
          renewableAt(credentials, now()),
        ],
      );
      const row = rows[0];
      if (!row) throw connectionExists(scope);
      log(`${row.inserted ? 'created' : 'updated'} ${describeConnection(scope)} (${credentials.type})`);
      // The credentials are stored whatever the hook does: a hook failure (starting syncs, say) is
      // reported, not allowed to turn a successful connect into a failure page.
      try {
        await onConnectionSaved?.({ scope, created: row.inserted });
      } catch (error) {
        log(
          `after saving ${describeConnection(scope)}, onConnectionSaved failed: ${error instanceof Error ? error.message : String(error)}`,
          'warn',
        );
      }
      return row;
    },

    async idsWhere(
      scope: { environmentId: string; integrationId: string },
      field: string,
      value: string,
    ): Promise<string[]> {
      const [column, key] = field.split('.', 2) as [string, string | undefined];
      const condition =
        column === 'metadata'
          ? 'metadata ->> $4 = $3'
          : column === 'connection_config'
            ? 'connection_config ->> $4 = $3'
            : 'connection_id = $3';
      const { rows } = await resources.db.query<{ connection_id: string }>(
        `SELECT connection_id FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND ${condition} ORDER BY connection_id`,
        [scope.environmentId, scope.integrationId, value, ...(key === undefined ? [] : [key])],
      );
      return rows.map((row) => row.connection_id);
    },

    async list(environmentId: string, filter: ConnectionFilter = {}): Promise<ConnectionSummary[]> {
      const integrationIds = [
        ...(filter.integrationId === undefined ? [] : [filter.integrationId]),
        ...(filter.integrationIds ?? []),
      ];
      const search = filter.search === undefined ? null : `%${filter.search.replace(/[\\%_]/g, '\\$&')}%`;
      const { rows } = await resources.db.query<ConnectionRow & { provider: string }>(
        `SELECT c.*, i.provider FROM connections c
         JOIN integrations i ON i.environment_id = c.environment_id AND i.id = c.provider_config_key
         WHERE c.environment_id = $1
           AND (cardinality($2::text[]) = 0 OR c.provider_config_key = ANY($2))
           AND ($3::text IS NULL OR c.connection_id = $3)
           AND ($4::text IS NULL OR c.connection_id ILIKE $4
                OR EXISTS (SELECT 1 FROM jsonb_each_text(c.tags) t WHERE t.value ILIKE $4))
           AND c.tags @> $5::jsonb
         ORDER BY c.provider_config_key, c.connection_id
         LIMIT $6 OFFSET $7`,
        [
          environmentId,
          integrationIds,
          filter.connectionId ?? null,
          search,
          JSON.stringify(filter.tags ?? {}),
          filter.limit ?? null,
          filter.offset ?? 0,
        ],
      );
      return rows.map((row) => summary(row, row.provider));
    },

    async setTags(scope: ConnectionScope, tags: ConnectionTags): Promise<void> {
      const parsed = connectionTagsSchema.safeParse(tags);
      if (!parsed.success) throw invalidInput('tags', parsed.error);
      const { rowCount } = await resources.db.query(
        `UPDATE connections SET tags = $4::jsonb, updated_at = now()
         WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3`,
        [scope.environmentId, scope.integrationId, scope.connectionId, JSON.stringify(parsed.data)],
      );
      if (rowCount === 0) throw unknownConnection(scope);
    },

    async writeMetadata(
      environmentId: string,
      integrationId: string,
      connectionIds: string[],
      metadata: Record<string, unknown>,
      mode: 'replace' | 'merge',
    ): Promise<void> {
      const parsed = jsonObject.safeParse(metadata);
      if (!parsed.success) throw invalidInput('metadata', parsed.error);
      const json = JSON.stringify(parsed.data);
      const ids = [...new Set(connectionIds)];
      // One statement, so concurrent merges of different keys never lose each other's keys; in a
      // transaction, so that a missing connection or an oversized result changes nothing.
      await inTransaction(resources.db, async (client) => {
        const { rows } = await client.query<{ connection_id: string; size: number }>(
          `UPDATE connections SET metadata = ${mode === 'merge' ? 'metadata || $4::jsonb' : '$4::jsonb'}, updated_at = now()
           WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = ANY($3)
           RETURNING connection_id, octet_length(metadata::text) AS size`,
          [environmentId, integrationId, ids, json],
        );
        const missing = ids.filter((id) => !rows.some((row) => row.connection_id === id));
        if (missing.length > 0) {
          throw new ServiceError(
            'unknown_connection',
            `integration '${integrationId}' has no connection ${missing.map((id) => `'${id}'`).join(', ')}; no metadata was changed`,
          );
        }
        const large = rows.find((row) => row.size > MAX_METADATA_BYTES);
        if (large) {
          throw new ServiceError(
            'metadata_too_large',
            `metadata of connection '${large.connection_id}' of integration '${integrationId}' would exceed ${MAX_METADATA_BYTES} bytes; no metadata was changed`,
          );
        }
      });
    },

    async delete(scope: ConnectionScope): Promise<boolean> {
      const { rowCount } = await resources.db.query(
        'DELETE FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3',
        [scope.environmentId, scope.integrationId, scope.connectionId],
      );
      if ((rowCount ?? 0) > 0) resources.log(`deleted ${describeConnection(scope)}`);
      return (rowCount ?? 0) > 0;
    },

    async environmentName(environmentId: string): Promise<string | undefined> {
      const { rows } = await resources.db.query<{ name: string }>('SELECT name FROM environments WHERE id = $1', [
        environmentId,
      ]);
      return rows[0]?.name;
    },

    async record(
      row: ConnectionRow,
      credentials: StoredCredentials,
      includeRefreshToken: boolean,
    ): Promise<ConnectionRecord> {
      const environment = await resources.db.query<{ account_id: number }>(
        'SELECT account_id FROM environments WHERE id = $1',
        [row.environment_id],
      );
      return {
        id: row.id,
        created_at: row.created_at.toISOString(),
        updated_at: row.updated_at.toISOString(),
        provider_config_key: row.provider_config_key,
        connection_id: row.connection_id,
        credentials: publicCredentials(credentials, includeRefreshToken),
        connection_config: row.connection_config,
        account_id: environment.rows[0]?.account_id ?? 0,
        metadata: row.metadata,
      };
    },
  };
}
