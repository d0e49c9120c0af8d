/**
 * The end user's connect flow, framework-agnostic: `start` gives the provider's authorization URL,
 * `callback` finishes it. OAuth 2 is the authorization-code grant (RFC 6749 section 4.1) with PKCE
 * (RFC 7636) where the provider supports it. OAuth 1.0a is the three-legged flow (RFC 5849 section 2).
 *
 * Each attempt is a row of oauth_sessions keyed by a hash of its `state` (OAuth 2) or temporary token
 * (OAuth 1): the callback deletes the row as it reads it, so a state works once, and it expires.
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Pool } from '../db/pool.js';
import { isServiceError, ServiceError } from '../errors.js';
import { outboundRefusal, policyFetch } from '../runtime/outbound.js';
import { connectionExists } from './connectionErrors.js';
import { connectionIdSchema } from './credentials.js';
import type { ConnectionManager } from './types.js';
import type { Encryptor } from './encryption.js';
import type { IntegrationStore } from './integrationStore.js';
import { signOAuth1 } from './oauth1.js';
import {
  credentialsFromTokenResponse,
  missingClient,
  requestIntegrationToken,
  settingsFromTokenResponse,
  TokenRequestError,
  type Fetch,
} from './oauth2.js';
import { checkSettings, fillTemplate, validateConnectionConfig, type OAuth1Provider } from './providers/catalog.js';
import { redactSecrets } from '../runtime/redaction.js';
import { connectionTagsSchema, endUserSchema, tagsWithEndUser, type ConnectionTags } from './tags.js';
import type { ConnectionScope } from './types.js';

/** How long an end user has between opening the connect URL and coming back: long enough for a login with 2FA. */
export const DEFAULT_STATE_TTL_MS = 10 * 60 * 1000;

export interface OAuthFlowDeps {
  db: Pool;
  encryptor: Encryptor;
  integrations: IntegrationStore;
  connections: Pick<ConnectionManager, 'saveConnection'>;
  /** The absolute URL of the callback route, as registered with each provider's OAuth app. */
  callbackUrl: string;
  fetch?: Fetch;
  now?: () => Date;
  stateTtlMs?: number;
}

export const startInput = z
  .object({
    environmentId: z.string().min(1),
    integrationId: z.string().min(1),
    connectionId: connectionIdSchema,
    connectionConfig: z.record(z.string(), z.string().max(2048)).default({}),
    /** Whether the attempt may replace the credentials of an existing connection (a reconnect). */
    allowReconnect: z.boolean().default(false),
    /** Tags the connection gets (docs/api.md); none: an existing connection keeps its own. */
    tags: connectionTagsSchema.optional(),
  })
  .strict();
export type StartConnectInput = z.input<typeof startInput>;

/** Lifetime of a connect session unless the application asks for another (1 minute to 1 hour). */
export const DEFAULT_CONNECT_SESSION_TTL_MS = 30 * 60 * 1000;
export const MAX_CONNECT_SESSION_TTL_MS = 60 * 60 * 1000;

export const connectSessionInput = startInput.extend({
  ttlMs: z.number().int().min(60_000).max(MAX_CONNECT_SESSION_TTL_MS).default(DEFAULT_CONNECT_SESSION_TTL_MS),
  /** Who the end user is: kept as the connection's tags `end_user_id`, `end_user_email`, … (tags.ts). */
  endUser: endUserSchema.optional(),
});
export type ConnectSessionInput = z.input<typeof connectSessionInput>;

interface ConnectSessionRow {
  environment_id: string;
  integration_id: string;
  connection_id: string;
  connection_config: Record<string, string>;
  tags: ConnectionTags;
  allow_reconnect: boolean;
  expires_at: Date;
  used_at: Date | null;
}

interface SessionRow {
  environment_id: string;
  provider_config_key: string;
  connection_id: string;
  connection_config: Record<string, string>;
  secret_encrypted: string | null;
  redirect_uri: string;
  expires_at: Date;
  allow_reconnect: boolean;
  tags: ConnectionTags | null;
}

export type CallbackResult = { ok: true; scope: ConnectionScope } | { ok: false; error: ServiceError };

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function randomToken(): string {
  return randomBytes(32).toString('base64url');
}

export class OAuthFlow {
  private readonly fetch: Fetch;
  private readonly now: () => Date;
  private readonly ttlMs: number;

  constructor(private readonly deps: OAuthFlowDeps) {
    this.fetch = deps.fetch ?? policyFetch;
    this.now = deps.now ?? (() => new Date());
    this.ttlMs = deps.stateTtlMs ?? DEFAULT_STATE_TTL_MS;
  }

  /** Starts a connect attempt and returns the URL to send the end user's browser to. */
  async start(input: StartConnectInput): Promise<{ authorizationUrl: string }> {
    const parsed = parseConnectRequest(startInput, input);
    const { environmentId, integrationId, connectionConfig } = parsed;
    const resolved = await this.deps.integrations.resolve(environmentId, integrationId);
    const { provider } = resolved;
    if (!resolved.clientId) throw missingClient(integrationId);
    validateConnectionConfig(provider, connectionConfig);
    if (!parsed.allowReconnect) await this.refuseExisting(parsed);
    // Old attempts nobody finished: cheap to drop here, and nothing else has to sweep them.
    await this.deps.db.query('DELETE FROM oauth_sessions WHERE expires_at < $1', [this.now()]);

    if (provider.auth_mode === 'OAUTH1') {
      return this.startOAuth1(resolved.clientId, resolved.clientSecret, provider, parsed);
    }
    if (provider.auth_mode !== 'OAUTH2') {
      throw new ServiceError(
        'unsupported_auth_mode',
        `integration '${integrationId}' uses ${provider.auth_mode}, which has no connect flow; import the credentials instead`,
      );
    }
    const state = randomToken();
    const verifier = provider.pkce ? randomToken() : undefined;
    await this.saveSession(state, parsed, verifier);

    const url = new URL(fillTemplate(provider.authorization_url, provider, connectionConfig, 'the authorization URL'));
    const scopes = [...new Set([...provider.default_scopes, ...resolved.integration.oauthScopes])];
    const params: Record<string, string> = {
      ...provider.authorization_params,
      client_id: resolved.clientId,
      response_type: 'code',
      redirect_uri: this.deps.callbackUrl,
      state,
      ...(scopes.length > 0 ? { scope: scopes.join(provider.scope_separator) } : {}),
      ...(verifier === undefined
        ? {}
        : { code_challenge: createHash('sha256').update(verifier).digest('base64url'), code_challenge_method: 'S256' }),
    };
    for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
    return { authorizationUrl: url.toString() };
  }

  /**
   * A connect session: what the application's backend (holding the secret key) makes for one end
   * user, and hands to their browser as `/oauth/connect/<integration>?connect_session_token=…`. It
   * binds the flow to one environment, integration and connection id, works once, and expires
   * (30 minutes unless `ttlMs` says otherwise, at most an hour). Re-authorising a connection that
   * exists needs `allowReconnect`. Only a hash of the token is stored.
   */
  async createConnectSession(input: ConnectSessionInput): Promise<{ token: string; expiresAt: string }> {
    const parsed = parseConnectRequest(connectSessionInput, input);
    const resolved = await this.deps.integrations.resolve(parsed.environmentId, parsed.integrationId);
    checkSettings(resolved.provider, parsed.connectionConfig);
    if (!parsed.allowReconnect) await this.refuseExisting(parsed);
    const now = this.now();
    await this.deps.db.query('DELETE FROM connect_sessions WHERE expires_at < $1', [now]);
    const token = `cs_${randomToken()}`;
    const expiresAt = new Date(now.getTime() + parsed.ttlMs);
    await this.deps.db.query(
      `INSERT INTO connect_sessions (token_hash, environment_id, integration_id, connection_id, connection_config, tags, allow_reconnect, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        sha256(token),
        parsed.environmentId,
        parsed.integrationId,
        parsed.connectionId,
        JSON.stringify(parsed.connectionConfig),
        JSON.stringify(tagsWithEndUser(parsed.endUser, parsed.tags)),
        parsed.allowReconnect,
        expiresAt,
      ],
    );
    return { token, expiresAt: expiresAt.toISOString() };
  }

  /**
   * The link an end user opens to use a connect session, on the same server as the callback: for OAuth
   * the redirect to the provider; for the modes where the user types credentials in, the hosted page.
   */
  connectUrl(integrationId: string, token: string, authMode: string = 'OAUTH2'): string {
    const base = this.deps.callbackUrl.replace(/\/oauth\/callback\/?$/, '');
    if (authMode !== 'OAUTH2' && authMode !== 'OAUTH1') return this.hostedConnectUrl(token);
    return `${base}/oauth/connect/${encodeURIComponent(integrationId)}?connect_session_token=${token}`;
  }

  /** The hosted connect page for a session (GET /connect?session=…): any auth mode. */
  hostedConnectUrl(token: string): string {
    const base = this.deps.callbackUrl.replace(/\/oauth\/callback\/?$/, '');
    return `${base}/connect?session=${token}`;
  }

  /**
   * What a connect session binds, without spending it (the hosted page shows its form with it); the
   * same 401 errors as useConnectSession when it cannot be used.
   */
  async peekConnectSession(token: string): Promise<z.infer<typeof startInput>> {
    if (!CONNECT_SESSION_TOKEN.test(token)) throw invalidSession();
    const { rows } = await this.deps.db.query<ConnectSessionRow>(
      'SELECT * FROM connect_sessions WHERE token_hash = $1 AND used_at IS NULL AND expires_at > $2',
      [sha256(token), this.now()],
    );
    if (!rows[0]) throw await this.sessionRefusal(token, undefined);
    return boundBy(rows[0]);
  }

  /**
   * `unsupported_auth_mode` (400) when the session's integration has no redirect flow (an API-key
   * session opened at /oauth/connect): checked before the session is spent, so that it still works on
   * the hosted connect page.
   */
  async requireRedirectFlow(token: string): Promise<void> {
    const bound = await this.peekConnectSession(token);
    const { provider } = await this.deps.integrations.resolve(bound.environmentId, bound.integrationId);
    if (provider.auth_mode !== 'OAUTH2' && provider.auth_mode !== 'OAUTH1') {
      throw new ServiceError(
        'unsupported_auth_mode',
        `integration '${bound.integrationId}' uses ${provider.auth_mode}, which has no redirect flow; open ${this.hostedConnectUrl('<token>')} with this session instead`,
      );
    }
  }

  /**
   * Spends a connect session (for `integrationId` when given) and returns what it binds; a
   * ServiceError (401) when it is unknown, made for another integration, already used or expired. Of
   * two uses at once, one wins.
   */
  async useConnectSession(token: string, integrationId?: string): Promise<z.infer<typeof startInput>> {
    if (!CONNECT_SESSION_TOKEN.test(token)) throw invalidSession();
    const { rows } = await this.deps.db.query<ConnectSessionRow>(
      `UPDATE connect_sessions SET used_at = $3
       WHERE token_hash = $1 AND ($2::text IS NULL OR integration_id = $2) AND used_at IS NULL AND expires_at > $3 RETURNING *`,
      [sha256(token), integrationId ?? null, this.now()],
    );
    const session = rows[0];
    if (!session) throw await this.sessionRefusal(token, integrationId);
    return boundBy(session);
  }

  /** Why a session cannot be used: used, expired, or not valid (unknown, or for another integration). */
  private async sessionRefusal(token: string, integrationId: string | undefined): Promise<ServiceError> {
    const { rows } = await this.deps.db.query<ConnectSessionRow>(
      'SELECT * FROM connect_sessions WHERE token_hash = $1 AND ($2::text IS NULL OR integration_id = $2)',
      [sha256(token), integrationId ?? null],
    );
    if (rows[0]?.used_at) {
      return new ServiceError(
        'connect_session_used',
        'this connect link was already used; ask the application for a new one',
      );
    }
    if (rows[0]) {
      return new ServiceError(
        'connect_session_expired',
        'this connect link expired; ask the application for a new one',
      );
    }
    return invalidSession();
  }

  /** `connection_exists` (409) when the connection exists: only a session that allows it re-authorises one. */
  private async refuseExisting(scope: ConnectionScope): Promise<void> {
    const { rows } = await this.deps.db.query(
      'SELECT 1 FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3',
      [scope.environmentId, scope.integrationId, scope.connectionId],
    );
    if (rows.length > 0) throw connectionExists(scope);
  }

  /**
   * Finishes a connect attempt from the callback's query. Never throws for what the provider or the
   * browser sent: the result says what went wrong, for the failure page.
   */
  async callback(query: Record<string, string | undefined>): Promise<CallbackResult> {
    try {
      if (query['oauth_token'] !== undefined && query['state'] === undefined) return await this.callbackOAuth1(query);
      return await this.callbackOAuth2(query);
    } catch (error) {
      if (isServiceError(error)) return { ok: false, error };
      throw error;
    }
  }

  private async callbackOAuth2(query: Record<string, string | undefined>): Promise<CallbackResult> {
    const state = query['state'];
    if (!state) {
      throw new ServiceError('invalid_oauth_callback', 'the callback came without a state parameter');
    }
    const session = await this.consumeSession(state);
    const scope = this.scopeOf(session);
    if (query['error'] !== undefined) {
      const description = query['error_description'] ? `: ${query['error_description'].slice(0, 300)}` : '';
      throw new ServiceError(
        'oauth_authorization_denied',
        `the provider did not authorize the connection (${query['error']}${description})`,
      );
    }
    const code = query['code'];
    if (!code) throw new ServiceError('invalid_oauth_callback', 'the callback came without a code parameter');

    const resolved = await this.deps.integrations.resolve(scope.environmentId, scope.integrationId);
    const { provider } = resolved;
    if (provider.auth_mode !== 'OAUTH2') {
      throw new ServiceError(
        'invalid_oauth_callback',
        `integration '${scope.integrationId}' is no longer an OAuth 2 integration`,
      );
    }
    if (!resolved.clientId) throw missingClient(scope.integrationId);
    const verifier =
      session.secret_encrypted === null
        ? undefined
        : this.deps.encryptor.decrypt(session.secret_encrypted, 'oauth_session_secret');
    let raw: Record<string, unknown>;
    try {
      raw = await requestIntegrationToken(scope.integrationId, resolved, {
        provider,
        connectionConfig: session.connection_config,
        grant: {
          grant_type: 'authorization_code',
          code,
          redirect_uri: session.redirect_uri,
          ...(verifier === undefined ? {} : { code_verifier: verifier }),
        },
        fetch: this.fetch,
      });
    } catch (error) {
      if (!(error instanceof TokenRequestError)) throw error;
      throw new ServiceError(
        'oauth_token_exchange_failed',
        `the code could not be exchanged for a token: ${error.message}`,
      );
    }
    const credentials = credentialsFromTokenResponse(raw, this.now());
    const config = { ...session.connection_config, ...settingsFromTokenResponse(provider, raw) };
    await this.deps.connections.saveConnection(scope, credentials, config, undefined, ...saveOptions(session));
    return { ok: true, scope };
  }

  // ---- OAuth 1.0a ----------------------------------------------------------------------------------

  private async startOAuth1(
    consumerKey: string,
    consumerSecret: string | undefined,
    provider: OAuth1Provider,
    input: z.infer<typeof startInput>,
  ): Promise<{ authorizationUrl: string }> {
    if (consumerSecret === undefined) throw missingClient(input.integrationId);
    const requestUrl = fillTemplate(
      provider.request_token_url,
      provider,
      input.connectionConfig,
      'the request token URL',
    );
    const temporary = await this.oauth1TokenRequest(requestUrl, {
      consumerKey,
      consumerSecret,
      extraOAuthParams: { oauth_callback: this.deps.callbackUrl },
    });
    await this.saveSession(temporary.oauth_token, input, temporary.oauth_token_secret);
    const url = new URL(
      fillTemplate(provider.authorization_url, provider, input.connectionConfig, 'the authorization URL'),
    );
    for (const [name, value] of Object.entries(provider.authorization_params)) url.searchParams.set(name, value);
    url.searchParams.set('oauth_token', temporary.oauth_token);
    return { authorizationUrl: url.toString() };
  }

  private async callbackOAuth1(query: Record<string, string | undefined>): Promise<CallbackResult> {
    const token = query['oauth_token'];
    const verifier = query['oauth_verifier'];
    if (!token) throw new ServiceError('invalid_oauth_callback', 'the callback came without oauth_token');
    const session = await this.consumeSession(token);
    const scope = this.scopeOf(session);
    if (!verifier) {
      throw new ServiceError(
        'oauth_authorization_denied',
        'the provider did not authorize the connection (no oauth_verifier)',
      );
    }
    const resolved = await this.deps.integrations.resolve(scope.environmentId, scope.integrationId);
    const { provider } = resolved;
    if (provider.auth_mode !== 'OAUTH1' || !resolved.clientId || resolved.clientSecret === undefined) {
      throw missingClient(scope.integrationId);
    }
    const accessUrl = fillTemplate(
      provider.access_token_url,
      provider,
      session.connection_config,
      'the access token URL',
    );
    const tokenSecret =
      session.secret_encrypted === null
        ? ''
        : this.deps.encryptor.decrypt(session.secret_encrypted, 'oauth_session_secret');
    const access = await this.oauth1TokenRequest(accessUrl, {
      consumerKey: resolved.clientId,
      consumerSecret: resolved.clientSecret,
      token,
      tokenSecret,
      extraOAuthParams: { oauth_verifier: verifier },
    });
    await this.deps.connections.saveConnection(
      scope,
      {
        type: 'OAUTH1',
        oauth_token: access.oauth_token,
        oauth_token_secret: access.oauth_token_secret,
        raw: access.raw,
      },
      session.connection_config,
      undefined,
      ...saveOptions(session),
    );
    return { ok: true, scope };
  }

  /** A signed POST to an OAuth 1 token endpoint; the answer is form-encoded (RFC 5849 section 2.1). */
  private async oauth1TokenRequest(
    url: string,
    sign: {
      consumerKey: string;
      consumerSecret: string;
      token?: string;
      tokenSecret?: string;
      extraOAuthParams: Record<string, string>;
    },
  ): Promise<{ oauth_token: string; oauth_token_secret: string; raw: Record<string, unknown> }> {
    const { authorization } = signOAuth1({ method: 'POST', url, ...sign });
    const secrets = [sign.consumerSecret, sign.tokenSecret];
    let response: Response;
    try {
      response = await this.fetch(url, {
        method: 'POST',
        headers: { Authorization: authorization },
        redirect: 'error',
        signal: AbortSignal.timeout(15_000),
      });
    } catch (error) {
      throw new ServiceError(
        'oauth_token_exchange_failed',
        `the OAuth 1 token endpoint ${new URL(url).origin} did not answer: ${redactSecrets(outboundRefusal(error)?.message ?? (error as Error).message, secrets)}`,
      );
    }
    const text = await response.text().catch(() => '');
    const form = Object.fromEntries(new URLSearchParams(text));
    const oauthToken = form['oauth_token'];
    const oauthTokenSecret = form['oauth_token_secret'];
    if (!response.ok || !oauthToken || !oauthTokenSecret) {
      throw new ServiceError(
        'oauth_token_exchange_failed',
        `the OAuth 1 token endpoint ${new URL(url).origin} answered ${response.status} without oauth_token and oauth_token_secret`,
      );
    }
    const { oauth_token_secret: _secret, ...raw } = form;
    return { oauth_token: oauthToken, oauth_token_secret: oauthTokenSecret, raw };
  }

  // ---- Sessions ------------------------------------------------------------------------------------

  private async saveSession(key: string, input: z.infer<typeof startInput>, secret: string | undefined): Promise<void> {
    await this.deps.db.query(
      `INSERT INTO oauth_sessions (state_hash, environment_id, provider_config_key, connection_id, connection_config, secret_encrypted, redirect_uri, expires_at, allow_reconnect, tags)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        sha256(key),
        input.environmentId,
        input.integrationId,
        input.connectionId,
        JSON.stringify(input.connectionConfig),
        secret === undefined ? null : this.deps.encryptor.encrypt(secret, 'oauth_session_secret'),
        this.deps.callbackUrl,
        new Date(this.now().getTime() + this.ttlMs),
        input.allowReconnect,
        input.tags === undefined ? null : JSON.stringify(input.tags),
      ],
    );
  }

  /** Reads and deletes the session in one statement: of two callbacks with the same state, one wins. */
  private async consumeSession(key: string): Promise<SessionRow> {
    const { rows } = await this.deps.db.query<SessionRow>(
      'DELETE FROM oauth_sessions WHERE state_hash = $1 RETURNING *',
      [sha256(key)],
    );
    const session = rows[0];
    if (!session) {
      throw new ServiceError(
        'invalid_oauth_state',
        'this connect attempt is unknown or was already completed; start the connection again',
      );
    }
    if (session.expires_at.getTime() < this.now().getTime()) {
      throw new ServiceError('oauth_state_expired', 'this connect attempt expired; start the connection again');
    }
    return session;
  }

  private scopeOf(session: SessionRow): ConnectionScope {
    return {
      environmentId: session.environment_id,
      integrationId: session.provider_config_key,
      connectionId: session.connection_id,
    };
  }
}

const CONNECT_SESSION_TOKEN = /^cs_[A-Za-z0-9_-]{43}$/;

function invalidSession(): ServiceError {
  return new ServiceError(
    'invalid_connect_session',
    'the connect session is not valid for this integration; ask the application for a new link',
  );
}

function boundBy(session: ConnectSessionRow): z.infer<typeof startInput> {
  return {
    environmentId: session.environment_id,
    integrationId: session.integration_id,
    connectionId: session.connection_id,
    connectionConfig: session.connection_config,
    allowReconnect: session.allow_reconnect,
    ...(Object.keys(session.tags).length === 0 ? {} : { tags: session.tags }),
  };
}

function parseConnectRequest<S extends z.ZodType>(schema: S, input: unknown): z.output<S> {
  const parsed = schema.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
    throw new ServiceError('invalid_connect_request', `invalid connect request: ${problems.join('; ')}`, {
      details: problems,
    });
  }
  return parsed.data;
}

/** The session's tags (none: an existing connection keeps its own); it replaces a connection only when allowed. */
function saveOptions(session: SessionRow): [ConnectionTags | undefined, { replace: boolean }] {
  return [session.tags ?? undefined, { replace: session.allow_reconnect }];
}
