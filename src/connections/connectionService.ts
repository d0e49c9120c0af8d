/**
 * Connections in Postgres: the ConnectionService the runtime codes against (get with refresh, request
 * authorization, metadata), plus what the API and the OAuth flow need (import, save, list, delete).
 *
 * Refresh under concurrency: every refresh of a connection runs under a transaction-scoped advisory
 * lock on the connection's id and re-reads the row after taking it. A caller that waited finds the
 * token already fresh (or the grant already marked revoked) and does not ask the provider again, so
 * two runs on any two processes that need a refresh at once cause one token request.
 */
import { z } from 'zod';
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { policyFetch } from '../runtime/outbound.js';
import { ServiceError } from '../errors.js';
import { codeLabel, tokenRefreshFailures } from '../metrics/index.js';
import type { IntegrationDescription } from '../runtime/svcTypes.js';
import type { ConnectionRecord, Credentials } from '../runtime/public.js';
import type { Encryptor } from './encryption.js';
import { secretForms } from '../runtime/redaction.js';
import type { IntegrationStore, ResolvedIntegration } from './integrationStore.js';
import { signOAuth1 } from './oauth1.js';
import {
  credentialsFromTokenResponse,
  missingClient,
  requestToken,
  settingsFromTokenResponse,
  TokenRequestError,
  type Fetch,
} from './oauth2.js';
import { fillTemplate, validateConnectionConfig } from './providers/catalog.js';
import { mintToken, type MintedToken } from './tokenGrants.js';
import { lineLog, type LineLog } from '../log.js';
import { connectionTagsSchema, type ConnectionTags } from './tags.js';
import type { AuthorizedRequest, ConnectionScope, ConnectionService, RequestToAuthorize } from './types.js';

/** SPEC.md "Limits": a token expiring within this window is refreshed. */
export const REFRESH_WINDOW_MS = 15 * 60 * 1000;
/** First key of the two-key advisory lock form; the second is the connection's integer id. */
const REFRESH_LOCK_NAMESPACE = 7_411_106;
const MAX_METADATA_BYTES = 1024 * 1024;

export const connectionIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9._@+=-]{1,255}$/, 'letters, digits and . _ @ + = -, 1 to 255 characters');

const isoTimestamp = z.iso.datetime({ offset: true });
const jsonObject = z.record(z.string(), z.unknown());

/** The token the service obtained last for a minted kind: absent until the first one. */
const mintedTokenFields = {
  access_token: z.string().min(1).optional(),
  expires_at: isoTimestamp.optional(),
  raw: jsonObject.optional(),
};
const privateKeyField = z
  .string()
  .max(16_384)
  .refine((text) => text.includes('PRIVATE KEY-----'), {
    error: 'a PEM private key, from -----BEGIN PRIVATE KEY----- to -----END PRIVATE KEY-----',
  });

/** Credentials as stored (and as imported): the refresh token is always kept here. */
export const credentialsSchema = z.discriminatedUnion('type', [
  z
    .object({
      type: z.literal('OAUTH2'),
      access_token: z.string().min(1),
      refresh_token: z.string().min(1).optional(),
      expires_at: isoTimestamp.optional(),
      raw: jsonObject.default({}),
    })
    .strict(),
  z
    .object({
      type: z.literal('OAUTH1'),
      oauth_token: z.string().min(1),
      oauth_token_secret: z.string().min(1),
      raw: jsonObject.default({}),
    })
    .strict(),
  z.object({ type: z.literal('API_KEY'), apiKey: z.string().min(1) }).strict(),
  z.object({ type: z.literal('BASIC'), username: z.string().min(1), password: z.string() }).strict(),
  z
    .object({
      type: z.literal('OAUTH2_CC'),
      client_id: z.string().min(1).max(1024),
      client_secret: z.string().min(1).max(4096),
      ...mintedTokenFields,
    })
    .strict(),
  z
    .object({
      type: z.literal('JWT'),
      client_email: z.string().min(1).max(1024),
      private_key: privateKeyField,
      private_key_id: z.string().min(1).max(256).optional(),
      subject: z.string().min(1).max(1024).optional(),
      ...mintedTokenFields,
    })
    .strict(),
  z
    .object({
      type: z.literal('APP'),
      app_id: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'the app id (or client id) of the app'),
      private_key: privateKeyField,
      ...mintedTokenFields,
    })
    .strict(),
]);
type StoredCredentials = z.infer<typeof credentialsSchema>;
type OAuth2Credentials = Extract<StoredCredentials, { type: 'OAUTH2' }>;
type MintedCredentials = Extract<StoredCredentials, { type: 'OAUTH2_CC' | 'JWT' | 'APP' }>;
/** Credentials with an access token that expires: refreshed (OAuth 2) or minted again (the others). */
type TokenCredentials = OAuth2Credentials | MintedCredentials;

function isMinted(credentials: StoredCredentials): credentials is MintedCredentials {
  return credentials.type === 'OAUTH2_CC' || credentials.type === 'JWT' || credentials.type === 'APP';
}
function hasToken(credentials: StoredCredentials): credentials is TokenCredentials {
  return credentials.type === 'OAUTH2' || isMinted(credentials);
}

/**
 * When the background refresher should renew these credentials (the `credentials_expires_at` column):
 * the token's expiry for what the service can renew by itself, now for a minted kind without a token
 * yet, null otherwise (an OAuth 2 token without a refresh token or an expiry, the other kinds).
 */
function renewableAt(credentials: StoredCredentials, now: Date): Date | null {
  if (isMinted(credentials)) {
    if (credentials.access_token === undefined) return now;
    return credentials.expires_at === undefined ? null : new Date(credentials.expires_at);
  }
  if (
    credentials.type === 'OAUTH2' &&
    credentials.refresh_token !== undefined &&
    credentials.expires_at !== undefined
  ) {
    return new Date(credentials.expires_at);
  }
  return null;
}

export const importConnectionInput = z
  .object({
    environmentId: z.string().min(1),
    integrationId: z.string().min(1),
    connectionId: connectionIdSchema,
    credentials: credentialsSchema,
    connection_config: z.record(z.string().max(128), z.string().max(2048)).optional(),
    metadata: jsonObject.optional(),
    /** Replaces the connection's tags when given; kept otherwise. */
    tags: connectionTagsSchema.optional(),
  })
  .strict();
export type ImportConnectionInput = z.input<typeof importConnectionInput>;

/** The last failed refresh, as status and the API show it. */
export interface RefreshError {
  code: string;
  message: string;
  at: string;
  /** True when the user must reconnect; false when the provider was only unreachable. */
  permanent: boolean;
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

/** Which connections `listConnections` returns; every filter given must match. */
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

interface ConnectionRow {
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

interface Refreshed {
  row: ConnectionRow;
  credentials: StoredCredentials;
}
interface FailedRefresh extends Refreshed {
  error: ServiceError;
  /** This failure is the one that marked the connection as needing re-authorisation. */
  newlyPermanent?: boolean;
}

/** A connection the background refresher claimed for one round (claimExpiring). */
export interface RefreshClaim {
  id: number;
  scope: ConnectionScope;
}

export interface ConnectionSavedEvent {
  scope: ConnectionScope;
  /** True for a new connection; false when an existing one got new credentials (a reconnect). */
  created: boolean;
}

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

export interface NeedsReauthEvent {
  scope: ConnectionScope;
  refreshError: RefreshError;
}

/** The object without its undefined values (zod's optional keys, for exactOptionalPropertyTypes). */
function definedOnly<T extends object>(value: T): { [K in keyof T]: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(value).filter(([, inner]) => inner !== undefined)) as {
    [K in keyof T]: Exclude<T[K], undefined>;
  };
}

function describe(scope: ConnectionScope): string {
  return `connection '${scope.connectionId}' of integration '${scope.integrationId}'`;
}

/** A connect flow may not replace an existing connection unless its session said so. */
export function connectionExists(scope: ConnectionScope): ServiceError {
  return new ServiceError(
    'connection_exists',
    `${describe(scope)} already exists; re-authorising it needs a connect session made with allow_reconnect`,
  );
}

function invalidInput(what: 'connection' | 'connection_id' | 'tags' | 'metadata', error: z.ZodError): ServiceError {
  const problems = error.issues.map((issue) => `${issue.path.join('.') || '(value)'}: ${issue.message}`);
  return new ServiceError(`invalid_${what}`, `invalid ${what}: ${problems.join('; ')}`, {
    details: problems,
  });
}

export class PostgresConnectionService implements ConnectionService {
  private readonly db: Pool;
  private readonly encryptor: Encryptor;
  private readonly integrations: IntegrationStore;
  private readonly fetch: Fetch;
  private readonly now: () => Date;
  private readonly log: LineLog;
  private readonly onConnectionSaved: ((event: ConnectionSavedEvent) => Promise<void>) | undefined;
  private readonly onNeedsReauth: ((event: NeedsReauthEvent) => Promise<void>) | undefined;
  private readonly publicUrl: string | undefined;
  /**
   * Refreshes in flight in this process, by connection row id. Callers of one process join the same
   * refresh instead of each holding a pooled Postgres connection while they wait on the advisory lock.
   */
  private readonly refreshing = new Map<number, Promise<Refreshed>>();

  constructor(deps: PostgresConnectionServiceDeps) {
    this.db = deps.db;
    this.encryptor = deps.encryptor;
    this.integrations = deps.integrations;
    this.fetch = deps.fetch ?? policyFetch;
    this.now = deps.now ?? (() => new Date());
    this.log = deps.log ?? lineLog('connections', 'info');
    this.onConnectionSaved = deps.onConnectionSaved;
    this.onNeedsReauth = deps.onNeedsReauth;
    this.publicUrl = deps.publicUrl;
  }

  // ---- ConnectionService -------------------------------------------------------------------------

  async getConnection(
    scope: ConnectionScope,
    options: { forceRefresh?: boolean; refreshToken?: boolean } = {},
  ): Promise<ConnectionRecord> {
    const { row, credentials } = await this.fresh(scope, options.forceRefresh ?? false);
    return this.toRecord(row, credentials, options.refreshToken ?? false);
  }

  async authorizeRequest(scope: ConnectionScope, request: RequestToAuthorize): Promise<AuthorizedRequest> {
    const resolved = await this.integrations.resolve(scope.environmentId, scope.integrationId);
    const { row, credentials } = await this.fresh(scope, false);
    const { provider } = resolved;
    const catalogBase =
      provider.base_url === undefined
        ? undefined
        : fillTemplate(
            provider.base_url,
            provider,
            row.connection_config,
            `the base URL of provider '${resolved.integration.provider}'`,
          );
    const hosts = {
      base: catalogBase === undefined ? undefined : new URL(catalogBase),
      allowed: provider.allowed_hosts,
    };
    const override = request.baseUrlOverride;
    if (override !== undefined) {
      const parsed = httpUrl(override, 'the base URL override');
      if (!isProviderHost(parsed, hosts)) {
        throw new ServiceError(
          'base_url_not_allowed',
          `the base URL override ${parsed.origin} is not a host of integration '${scope.integrationId}' (its base URL${catalogBase === undefined ? ' is not set' : ` is ${hosts.base?.origin}`}${provider.allowed_hosts.length > 0 ? `, its allowed hosts are ${provider.allowed_hosts.join(', ')}` : ''}); add the host to the integration's provider_settings.allowed_hosts to allow it`,
        );
      }
    }
    const base = override ?? catalogBase;
    const absolute = /^https?:\/\//i.test(request.endpoint);
    if (base === undefined && !absolute) {
      throw new ServiceError(
        'missing_base_url',
        `provider '${resolved.integration.provider}' of integration '${scope.integrationId}' has no base URL in the catalog; set base_url in the integration's provider_settings (or pass an allowed baseUrlOverride)`,
      );
    }
    const url = httpUrl(base === undefined ? request.endpoint : joinUrl(base, request.endpoint), 'the request URL');
    for (const [name, value] of Object.entries(request.params)) url.searchParams.append(name, String(value));
    const secrets = this.secretsOf(credentials, resolved);

    // A URL on another host (a next-page link or a download URL that an API answered with, a
    // redirect) is sent without the connection's credentials or the provider's headers, as browsers
    // and HTTP clients do on a cross-origin redirect, and without any header or query parameter that
    // carries a credential value: an answer must not be able to lead the credentials to another host.
    if (!isProviderHost(url, hosts)) {
      const plain: Record<string, string> = {};
      for (const [name, value] of Object.entries(request.headers)) {
        if (!carriesSecret(value, secrets)) setHeader(plain, name, value);
      }
      for (const [name, value] of [...url.searchParams.entries()]) {
        if (carriesSecret(value, secrets)) url.searchParams.delete(name, value);
      }
      return { method: request.method.toUpperCase(), url: url.toString(), headers: plain, secrets };
    }

    const headers: Record<string, string> = { ...provider.headers };
    for (const [name, value] of Object.entries(request.headers)) setHeader(headers, name, value);

    switch (credentials.type) {
      case 'OAUTH2': {
        if (provider.auth_mode !== 'OAUTH2') throw modeMismatch(scope, provider.auth_mode, credentials.type);
        setHeader(
          headers,
          provider.token_header.name,
          provider.token_header.format.replace('${accessToken}', credentials.access_token),
        );
        break;
      }
      case 'API_KEY': {
        if (provider.auth_mode !== 'API_KEY') throw modeMismatch(scope, provider.auth_mode, credentials.type);
        if (provider.api_key.in === 'header') {
          setHeader(headers, provider.api_key.name, provider.api_key.format.replace('${apiKey}', credentials.apiKey));
        } else {
          url.searchParams.set(provider.api_key.name, credentials.apiKey);
        }
        break;
      }
      case 'BASIC': {
        const pair = Buffer.from(`${credentials.username}:${credentials.password}`).toString('base64');
        setHeader(headers, 'Authorization', `Basic ${pair}`);
        break;
      }
      case 'OAUTH2_CC':
      case 'JWT':
      case 'APP': {
        if (provider.auth_mode !== credentials.type) throw modeMismatch(scope, provider.auth_mode, credentials.type);
        // fresh() obtained one, or failed: a minted kind never gets here without a token.
        if (credentials.access_token === undefined) throw this.refreshFailed(scope, row);
        setHeader(
          headers,
          provider.token_header.name,
          provider.token_header.format.replace('${accessToken}', credentials.access_token),
        );
        break;
      }
      case 'OAUTH1': {
        if (!resolved.clientId || resolved.clientSecret === undefined) throw missingClient(scope.integrationId);
        const { authorization } = signOAuth1({
          method: request.method,
          url: url.toString(),
          consumerKey: resolved.clientId,
          consumerSecret: resolved.clientSecret,
          token: credentials.oauth_token,
          tokenSecret: credentials.oauth_token_secret,
          formParams: request.formParams,
        });
        setHeader(headers, 'Authorization', authorization);
        break;
      }
    }
    return { method: request.method.toUpperCase(), url: url.toString(), headers, secrets };
  }

  /**
   * Every credential value of a connection in the forms it can be echoed in (src/runtime/redaction.ts),
   * for redacting error messages and statuses; undefined when the connection does not exist, was made
   * after `existedAt`, or is not one of the records `ids` (ConnectionService.credentialSecrets).
   */
  async credentialSecrets(
    scope: ConnectionScope,
    options: { existedAt?: Date; ids?: readonly number[] } = {},
  ): Promise<string[] | undefined> {
    const { rows } = await this.db.query<ConnectionRow>(
      'SELECT * FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3',
      [scope.environmentId, scope.integrationId, scope.connectionId],
    );
    if (!rows[0]) return undefined;
    if (options.existedAt !== undefined && rows[0].created_at.getTime() > options.existedAt.getTime()) return undefined;
    if (options.ids !== undefined && options.ids.length > 0 && !options.ids.includes(rows[0].id)) return undefined;
    const resolved = await this.integrations.resolve(scope.environmentId, scope.integrationId).catch(() => undefined);
    return this.secretsOf(this.decrypt(rows[0]), resolved);
  }

  private secretsOf(credentials: StoredCredentials, resolved: ResolvedIntegration | undefined): string[] {
    switch (credentials.type) {
      case 'OAUTH2':
        return secretForms([credentials.access_token, credentials.refresh_token, resolved?.clientSecret]);
      case 'OAUTH1':
        return secretForms([credentials.oauth_token, credentials.oauth_token_secret, resolved?.clientSecret]);
      case 'API_KEY':
        return secretForms([credentials.apiKey]);
      case 'BASIC':
        return secretForms([credentials.password, `${credentials.username}:${credentials.password}`]);
      case 'OAUTH2_CC':
        return secretForms([credentials.access_token, credentials.client_secret]);
      case 'JWT':
      case 'APP':
        return secretForms([credentials.access_token, credentials.private_key]);
    }
  }

  async getMetadata(scope: ConnectionScope): Promise<Record<string, unknown>> {
    return (await this.row(this.db, scope)).metadata;
  }

  async setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
    await this.writeMetadata(scope, metadata, 'replace');
  }

  async describeIntegration(scope: Omit<ConnectionScope, 'connectionId'>): Promise<IntegrationDescription> {
    const { integration, provider } = await this.integrations.resolve(scope.environmentId, scope.integrationId);
    const environment = await this.db.query<{ name: string }>('SELECT name FROM environments WHERE id = $1', [
      scope.environmentId,
    ]);
    const name = environment.rows[0]?.name ?? scope.environmentId;
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

  async updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
    await this.writeMetadata(scope, metadata, 'merge');
  }

  // ---- For the API and the OAuth flow ------------------------------------------------------------

  /**
   * Stores existing credentials as a connection (migrating from another system, tests). An existing
   * connection of the same id gets the new credentials and settings; its metadata is kept unless given.
   */
  async importConnection(input: ImportConnectionInput): Promise<ConnectionRecord> {
    return this.connectWith(input, { replace: true });
  }

  /**
   * Stores credentials an end user or operator typed in (the hosted connect page): validated, and for
   * the minted kinds a first token obtained, before `claim` runs (spending the connect session); an
   * existing connection is replaced only with `replace`. Tags replace the connection's when given.
   */
  async connectWith(
    input: ImportConnectionInput,
    options: { replace: boolean; claim?: () => Promise<void> },
  ): Promise<ConnectionRecord> {
    const parsed = importConnectionInput.safeParse(input);
    if (!parsed.success) throw invalidInput('connection', parsed.error);
    const data = parsed.data;
    const resolved = await this.integrations.resolve(data.environmentId, data.integrationId);
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
      ? await this.firstToken(scope, resolved, data.credentials, config)
      : data.credentials;
    await options.claim?.();
    const row = await this.saveConnection(scope, credentials, config, data.metadata, data.tags, {
      replace: options.replace,
    });
    return this.toRecord(row, credentials, false);
  }

  /**
   * The first token of a minted kind, obtained before anything is stored: credentials the provider
   * refuses (a bad private key, a wrong client secret) are refused here with the provider's reason and
   * nothing is saved. When the provider is only unreachable, the connection is stored without a token
   * and the background refresher (or the first request) obtains one.
   */
  private async firstToken(
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
        this.log(`no first token for ${describe(scope)} yet (${error.message}); it is stored and retried`, 'warn');
        return credentials;
      }
      throw new ServiceError(
        error.code === 'invalid_private_key' ? 'invalid_private_key' : 'connection_credentials_rejected',
        `${describe(scope)} was not saved: ${error.message}`,
      );
    }
  }

  /**
   * Creates or replaces a connection's credentials, clearing any refresh error (used by import and the
   * OAuth callback). With `replace: false` an existing connection is left as it is and the call fails
   * with `connection_exists` (a connect flow whose session did not allow a reconnect).
   */
  async saveConnection(
    scope: ConnectionScope,
    credentials: StoredCredentials,
    connectionConfig: Record<string, string>,
    metadata?: Record<string, unknown>,
    tags?: ConnectionTags,
    options: { replace?: boolean } = {},
  ): Promise<ConnectionRow> {
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
    const { rows } = await this.db.query<ConnectionRow & { inserted: boolean }>(
      `INSERT INTO connections (environment_id, provider_config_key, connection_id, credentials_encrypted, connection_config, metadata, credentials_refreshed_at, tags, credentials_expires_at)
       VALUES ($1, $2, $3, $4, $5, COALESCE($6::jsonb, '{}'::jsonb), $7, COALESCE($8::jsonb, '{}'::jsonb), $9)
       ON CONFLICT (environment_id, provider_config_key, connection_id) ${onConflict}
       RETURNING *, (xmax = 0) AS inserted`,
      [
        scope.environmentId,
        scope.integrationId,
        scope.connectionId,
        this.encryptor.encryptJson(credentials, 'connection_credentials'),
        JSON.stringify(connectionConfig),
        metadata === undefined ? null : JSON.stringify(metadata),
        this.now(),
        tags === undefined ? null : JSON.stringify(tags),
        renewableAt(credentials, this.now()),
      ],
    );
    const row = rows[0];
    if (!row) throw connectionExists(scope);
    this.log(`${row.inserted ? 'created' : 'updated'} ${describe(scope)} (${credentials.type})`);
    // The credentials are stored whatever the hook does: a hook failure (starting syncs, say) is
    // reported, not allowed to turn a successful connect into a failure page.
    try {
      await this.onConnectionSaved?.({ scope, created: row.inserted });
    } catch (error) {
      this.log(
        `after saving ${describe(scope)}, onConnectionSaved failed: ${error instanceof Error ? error.message : String(error)}`,
        'warn',
      );
    }
    return row;
  }

  /**
   * The ids of an integration's connections whose `field` equals `value`: `connection_id`, or a key of
   * `metadata` or `connection_config` (`metadata.account`), as an inbound webhook names its connection.
   */
  async connectionIdsWhere(
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
    const { rows } = await this.db.query<{ connection_id: string }>(
      `SELECT connection_id FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND ${condition} ORDER BY connection_id`,
      [scope.environmentId, scope.integrationId, value, ...(key === undefined ? [] : [key])],
    );
    return rows.map((row) => row.connection_id);
  }

  async listConnections(environmentId: string, filter: ConnectionFilter = {}): Promise<ConnectionSummary[]> {
    const integrationIds = [
      ...(filter.integrationId === undefined ? [] : [filter.integrationId]),
      ...(filter.integrationIds ?? []),
    ];
    const search = filter.search === undefined ? null : `%${filter.search.replace(/[\\%_]/g, '\\$&')}%`;
    const { rows } = await this.db.query<ConnectionRow & { provider: string }>(
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
    return rows.map((row) => this.toSummary(row, row.provider));
  }

  /** Replaces a connection's tags. */
  async setTags(scope: ConnectionScope, tags: ConnectionTags): Promise<void> {
    const parsed = connectionTagsSchema.safeParse(tags);
    if (!parsed.success) throw invalidInput('tags', parsed.error);
    const { rowCount } = await this.db.query(
      `UPDATE connections SET tags = $4::jsonb, updated_at = now()
       WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3`,
      [scope.environmentId, scope.integrationId, scope.connectionId, JSON.stringify(parsed.data)],
    );
    if (rowCount === 0) throw new ServiceError('unknown_connection', `${describe(scope)} does not exist`);
  }

  /**
   * Replaces (or merges into) the metadata of several connections of one integration at once: all of
   * them, or none when one does not exist or would grow too large.
   */
  async writeMetadataOf(
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
    await inTransaction(this.db, async (client) => {
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
  }

  /** The connection without credentials, with its last refresh error: what status pages show. */
  async getConnectionStatus(scope: ConnectionScope): Promise<ConnectionSummary> {
    const row = await this.row(this.db, scope);
    const integration = await this.integrations.get(scope.environmentId, scope.integrationId);
    return this.toSummary(row, integration.provider);
  }

  /** Deletes a connection and its credentials; false when there was none. */
  async deleteConnection(scope: ConnectionScope): Promise<boolean> {
    const { rowCount } = await this.db.query(
      'DELETE FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3',
      [scope.environmentId, scope.integrationId, scope.connectionId],
    );
    if ((rowCount ?? 0) > 0) this.log(`deleted ${describe(scope)}`);
    return (rowCount ?? 0) > 0;
  }

  // ---- Refresh -----------------------------------------------------------------------------------

  /** The row and credentials, refreshed first when SPEC.md "Authentication" says so. */
  private async fresh(
    scope: ConnectionScope,
    forceRefresh: boolean,
  ): Promise<{ row: ConnectionRow; credentials: StoredCredentials }> {
    const row = await this.row(this.db, scope);
    const credentials = this.decrypt(row);
    if (!hasToken(credentials) || !(forceRefresh || this.expiresSoon(credentials))) return { row, credentials };
    if (row.refresh_error_permanent && !forceRefresh) throw this.refreshFailed(scope, row);
    if (forceRefresh) return this.refresh(scope, row, true);
    const inFlight = this.refreshing.get(row.id);
    if (inFlight) return inFlight;
    const started = this.refresh(scope, row, false).finally(() => this.refreshing.delete(row.id));
    this.refreshing.set(row.id, started);
    return started;
  }

  private expiresSoon(credentials: TokenCredentials, windowMs = REFRESH_WINDOW_MS): boolean {
    if (credentials.access_token === undefined) return true;
    if (credentials.expires_at === undefined) return false;
    return Date.parse(credentials.expires_at) - this.now().getTime() < windowMs;
  }

  private async refresh(
    scope: ConnectionScope,
    seen: ConnectionRow,
    forceRefresh: boolean,
    windowMs = REFRESH_WINDOW_MS,
  ): Promise<Refreshed> {
    const resolved = await this.integrations.resolve(scope.environmentId, scope.integrationId);
    const outcome = await inTransaction(this.db, async (client): Promise<Refreshed | FailedRefresh> => {
      await client.query('SELECT pg_advisory_xact_lock($1, $2)', [REFRESH_LOCK_NAMESPACE, seen.id]);
      // Re-read under the lock: another caller may have refreshed (or failed to) while this one waited.
      const row = await this.row(client, scope);
      const credentials = this.decrypt(row);
      if (!hasToken(credentials)) return { row, credentials };
      // "Meanwhile" = the row changed since this caller read it; comparing stored values, not clocks,
      // keeps this right when the processes' clocks disagree.
      const refreshedMeanwhile = !sameTime(row.credentials_refreshed_at, seen.credentials_refreshed_at);
      // Also when not forced: a provider issuing tokens shorter than the window must not make every waiter refresh.
      if (refreshedMeanwhile || (!forceRefresh && !this.expiresSoon(credentials, windowMs)))
        return { row, credentials };
      const failedMeanwhile = !sameTime(row.refresh_error_at, seen.refresh_error_at);
      if (row.refresh_error_permanent && (failedMeanwhile || !forceRefresh)) {
        return { row, credentials, error: this.refreshFailed(scope, row) };
      }
      if (isMinted(credentials)) return this.mintLocked(client, scope, resolved, row, credentials);
      return this.refreshLocked(client, scope, resolved, row, credentials);
    });
    if ('error' in outcome) {
      const refreshError = this.refreshError(outcome.row);
      if (outcome.newlyPermanent && refreshError) {
        // After the transaction: the mark is stored whatever the hook does, and the lock is not held meanwhile.
        await this.onNeedsReauth?.({ scope, refreshError }).catch((error: unknown) => {
          this.log(
            `after marking ${describe(scope)} as needing re-authorisation, onNeedsReauth failed: ${error instanceof Error ? error.message : String(error)}`,
            'warn',
          );
        });
      }
      // A provider that is only unreachable should not break runs while the current token still works.
      const current = outcome.credentials;
      const usable =
        hasToken(current) &&
        current.access_token !== undefined &&
        (current.expires_at === undefined || Date.parse(current.expires_at) > this.now().getTime());
      if (outcome.error.retryable && !forceRefresh && usable) return { row: outcome.row, credentials: current };
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
    const { provider } = resolved;
    if (provider.auth_mode !== 'OAUTH2') throw modeMismatch(scope, provider.auth_mode, 'OAUTH2');
    if (credentials.refresh_token === undefined) {
      const expired =
        credentials.expires_at !== undefined && Date.parse(credentials.expires_at) <= this.now().getTime();
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
    if (!resolved.clientId) throw missingClient(scope.integrationId);
    let raw: Record<string, unknown>;
    try {
      raw = await requestToken({
        provider,
        clientId: resolved.clientId,
        clientSecret: resolved.clientSecret,
        connectionConfig: row.connection_config,
        grant: { grant_type: 'refresh_token', refresh_token: credentials.refresh_token },
        fetch: this.fetch,
      });
    } catch (error) {
      if (error instanceof TokenRequestError) return this.recordFailure(client, scope, row, error);
      throw error;
    }
    const next = credentialsFromTokenResponse(raw, this.now(), credentials.refresh_token);
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
      fetch: this.fetch,
      now: this.now(),
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
    const now = this.now();
    const { rows } = await client.query<ConnectionRow>(
      `UPDATE connections SET credentials_encrypted = $2, connection_config = $3, credentials_refreshed_at = $4,
         credentials_expires_at = $5,
         refresh_error_code = NULL, refresh_error_message = NULL, refresh_error_at = NULL, refresh_error_permanent = false,
         refresh_attempts = 0, refresh_retry_at = NULL, updated_at = now()
       WHERE id = $1 RETURNING *`,
      [
        row.id,
        this.encryptor.encryptJson(next, 'connection_credentials'),
        JSON.stringify(config),
        now,
        renewableAt(next, now),
      ],
    );
    this.log(`${verb} the access token of ${describe(scope)}; it expires at ${next.expires_at ?? 'no stated time'}`);
    return { row: rows[0]!, credentials: next };
  }

  /**
   * Claims, for one round of the background refresher (src/connections/tokenRefresher.ts), up to
   * `limit` connections whose tokens expire within `withinMs` (and minted connections without a token
   * yet), taking the environments in turn: every environment's most urgent token before any
   * environment's second, at most `perEnvironment` of one environment. A claim moves the connection's
   * `refresh_retry_at` past now by a delay that doubles with each attempt that did not renew the token
   * (`backoff`), so that a connection whose token URL times out is tried again later rather than every
   * round, and so that other worker processes skip it meanwhile. A renewed token clears the delay.
   */
  async claimExpiring(options: {
    withinMs: number;
    limit: number;
    perEnvironment: number;
    backoff: { initialMs: number; maxMs: number };
  }): Promise<RefreshClaim[]> {
    const now = this.now();
    const { rows } = await this.db.query<{
      id: number;
      environment_id: string;
      provider_config_key: string;
      connection_id: string;
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
       RETURNING c.id, c.environment_id, c.provider_config_key, c.connection_id`,
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
    }));
  }

  /**
   * Renews the token of one claimed connection, under the same lock as an on-demand refresh (a script
   * asking at the same moment causes no second token request): 'refreshed', or 'failed' (the failure
   * is stored on the connection, and its claim's delay stands).
   */
  async refreshClaimed(claim: RefreshClaim, withinMs: number): Promise<'refreshed' | 'failed'> {
    try {
      const row = await this.row(this.db, claim.scope);
      const inFlight = this.refreshing.get(row.id);
      const started =
        inFlight ?? this.refresh(claim.scope, row, false, withinMs).finally(() => this.refreshing.delete(row.id));
      if (!inFlight) this.refreshing.set(row.id, started);
      const outcome = await started;
      if (outcome.row.refresh_error_at !== null && outcome.row.refresh_error_code !== null) return 'failed';
      // Renewed meanwhile by someone else (an on-demand refresh): the claim's delay goes all the same.
      if (outcome.row.refresh_retry_at !== null) {
        await this.db.query('UPDATE connections SET refresh_attempts = 0, refresh_retry_at = NULL WHERE id = $1', [
          row.id,
        ]);
      }
      return 'refreshed';
    } catch (error) {
      this.log(
        `background refresh of ${describe(claim.scope)} failed: ${error instanceof Error ? error.message : String(error)}`,
        'warn',
      );
      return 'failed';
    }
  }

  /** Gives back claims a round did not get to: due again at once, the attempt not counted. */
  async releaseClaims(claims: RefreshClaim[]): Promise<void> {
    if (claims.length === 0) return;
    await this.db.query(
      `UPDATE connections SET refresh_retry_at = NULL, refresh_attempts = greatest(refresh_attempts - 1, 0)
       WHERE id = ANY($1::bigint[])`,
      [claims.map((claim) => claim.id)],
    );
  }

  private async recordFailure(
    client: PoolClient,
    scope: ConnectionScope,
    row: ConnectionRow,
    failure: TokenRequestError,
  ): Promise<FailedRefresh> {
    const { rows } = await client.query<ConnectionRow>(
      `UPDATE connections SET refresh_error_code = $2, refresh_error_message = $3, refresh_error_at = $4,
         refresh_error_permanent = $5, updated_at = now()
       WHERE id = $1 RETURNING *`,
      [row.id, failure.code, failure.message, this.now(), failure.permanent],
    );
    const updated = rows[0]!;
    tokenRefreshFailures.inc({
      integration: scope.integrationId,
      code: codeLabel(failure.code),
      permanent: String(failure.permanent),
    });
    this.log(`refresh of ${describe(scope)} failed: ${failure.message}`, 'warn');
    return {
      row: updated,
      credentials: this.decrypt(updated),
      error: this.refreshFailed(scope, updated),
      // Read under the refresh lock: of racing refreshes, only the one that set the mark says so.
      newlyPermanent: failure.permanent && !row.refresh_error_permanent,
    };
  }

  private refreshFailed(scope: ConnectionScope, row: ConnectionRow): ServiceError {
    const when = row.refresh_error_at?.toISOString() ?? 'an unknown time';
    const what = row.refresh_error_message ?? row.refresh_error_code ?? 'no detail';
    if (row.refresh_error_permanent) {
      return new ServiceError(
        'connection_refresh_failed',
        `the access token of ${describe(scope)} could not be refreshed (${what}, at ${when}); the provider no longer accepts this connection's grant, so the user must reconnect (run the connect flow again, or import new credentials)`,
        { details: { refresh_error: this.refreshError(row) } },
      );
    }
    return new ServiceError(
      'connection_refresh_unavailable',
      `the access token of ${describe(scope)} could not be refreshed (${what}, at ${when}); the provider may be down, try again later`,
      { retryable: true, details: { refresh_error: this.refreshError(row) } },
    );
  }

  // ---- Rows --------------------------------------------------------------------------------------

  private async row(db: Pool | PoolClient, scope: ConnectionScope): Promise<ConnectionRow> {
    const { rows } = await db.query<ConnectionRow>(
      'SELECT * FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3',
      [scope.environmentId, scope.integrationId, scope.connectionId],
    );
    if (!rows[0]) throw new ServiceError('unknown_connection', `${describe(scope)} does not exist`);
    return rows[0];
  }

  private decrypt(row: ConnectionRow): StoredCredentials {
    const parsed = credentialsSchema.safeParse(
      this.encryptor.decryptJson(row.credentials_encrypted, 'connection_credentials'),
    );
    if (!parsed.success) {
      throw new ServiceError(
        'corrupt_credentials',
        `the stored credentials of connection #${row.id} do not have a known shape`,
      );
    }
    return parsed.data;
  }

  private async writeMetadata(
    scope: ConnectionScope,
    metadata: Record<string, unknown>,
    mode: 'replace' | 'merge',
  ): Promise<void> {
    await this.writeMetadataOf(scope.environmentId, scope.integrationId, [scope.connectionId], metadata, mode);
  }

  private refreshError(row: ConnectionRow): RefreshError | null {
    if (row.refresh_error_code === null || row.refresh_error_at === null) return null;
    return {
      code: row.refresh_error_code,
      message: row.refresh_error_message ?? '',
      at: row.refresh_error_at.toISOString(),
      permanent: row.refresh_error_permanent,
    };
  }

  private toSummary(row: ConnectionRow, provider: string): ConnectionSummary {
    return {
      id: row.id,
      connection_id: row.connection_id,
      provider_config_key: row.provider_config_key,
      provider,
      auth_mode: this.decrypt(row).type,
      created_at: row.created_at.toISOString(),
      updated_at: row.updated_at.toISOString(),
      refresh_error: this.refreshError(row),
      metadata: row.metadata,
      tags: row.tags,
      last_fetched_at: row.credentials_refreshed_at?.toISOString() ?? null,
    };
  }

  private async toRecord(
    row: ConnectionRow,
    credentials: StoredCredentials,
    includeRefreshToken: boolean,
  ): Promise<ConnectionRecord> {
    const environment = await this.db.query<{ account_id: number }>(
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
  }
}

/** SPEC.md "Authentication" 5: the refresh token leaves the service only when asked for, in `raw` too. */
function publicCredentials(credentials: StoredCredentials, includeRefreshToken: boolean): Credentials {
  switch (credentials.type) {
    case 'OAUTH2': {
      const raw = { ...credentials.raw };
      if (!includeRefreshToken) delete raw['refresh_token'];
      return {
        type: 'OAUTH2',
        access_token: credentials.access_token,
        ...(includeRefreshToken && credentials.refresh_token !== undefined
          ? { refresh_token: credentials.refresh_token }
          : {}),
        ...(credentials.expires_at === undefined ? {} : { expires_at: credentials.expires_at }),
        raw,
      };
    }
    case 'OAUTH1':
    case 'API_KEY':
    case 'BASIC':
      return credentials;
    // The long-lived secret (client secret, private key) stays in the service; scripts get the token.
    case 'OAUTH2_CC':
      return { type: 'OAUTH2_CC', client_id: credentials.client_id, ...mintedPublic(credentials) };
    case 'JWT':
      return { type: 'JWT', client_email: credentials.client_email, ...mintedPublic(credentials) };
    case 'APP':
      return { type: 'APP', app_id: credentials.app_id, ...mintedPublic(credentials) };
  }
}

function mintedPublic(credentials: MintedCredentials): {
  access_token: string;
  expires_at?: string;
  raw: Record<string, unknown>;
} {
  return {
    access_token: credentials.access_token ?? '',
    ...(credentials.expires_at === undefined ? {} : { expires_at: credentials.expires_at }),
    raw: credentials.raw ?? {},
  };
}

function withToken<T extends MintedCredentials>(credentials: T, token: MintedToken): T {
  const { expires_at: _previous, ...rest } = credentials;
  return {
    ...rest,
    access_token: token.access_token,
    ...(token.expires_at === undefined ? {} : { expires_at: token.expires_at }),
    raw: token.raw,
  } as T;
}

function sameTime(a: Date | null, b: Date | null): boolean {
  return (a?.getTime() ?? null) === (b?.getTime() ?? null);
}

function modeMismatch(scope: ConnectionScope, providerMode: string, credentialsType: string): ServiceError {
  return new ServiceError(
    'credentials_type_mismatch',
    `${describe(scope)} holds ${credentialsType} credentials but its provider uses ${providerMode}; reconnect or re-import it`,
  );
}

/** Sets a header, replacing one of the same name in any letter case (an `authorization` the script set, say). */
function setHeader(headers: Record<string, string>, name: string, value: string): void {
  for (const existing of Object.keys(headers))
    if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing];
  headers[name] = value;
}

/** An http(s) URL, or `invalid_request_url` naming `what`. */
function httpUrl(text: string, what: string): URL {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new ServiceError('invalid_request_url', `${what} is not a URL`);
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') {
    throw new ServiceError('invalid_request_url', `requests go to http(s) URLs only, not ${url.protocol}`);
  }
  return url;
}

const DEFAULT_PORTS: Record<string, string> = { 'http:': '80', 'https:': '443' };

/**
 * Whether `url` is on a host of the provider: the origin of its base URL, or an `allowed_hosts` entry
 * (https, or the base URL's scheme; the entry's port, else the scheme's default).
 */
function isProviderHost(url: URL, hosts: { base: URL | undefined; allowed: readonly string[] }): boolean {
  if (hosts.base !== undefined && url.origin === hosts.base.origin) return true;
  if (url.protocol !== 'https:' && url.protocol !== hosts.base?.protocol) return false;
  const hostname = url.hostname.toLowerCase();
  const port = url.port || DEFAULT_PORTS[url.protocol];
  return hosts.allowed.some((entry) => {
    const [name = '', entryPort] = entry.toLowerCase().split(':');
    if ((entryPort ?? DEFAULT_PORTS[url.protocol]) !== port) return false;
    return name.startsWith('*.') ? hostname.endsWith(name.slice(1)) : hostname === name;
  });
}

function carriesSecret(value: string, secrets: readonly string[]): boolean {
  return secrets.some((secret) => value.includes(secret));
}

/** `https://api.x.com/v2` + `/users` → `https://api.x.com/v2/users`: the endpoint extends the base path. */
function joinUrl(base: string, endpoint: string): string {
  if (/^https?:\/\//i.test(endpoint)) return endpoint;
  if (endpoint === '') return base;
  return `${base.replace(/\/+$/, '')}/${endpoint.replace(/^\/+/, '')}`;
}
