/**
 * Access tokens the service obtains by itself from a connection's long-lived secrets, with no user
 * in the loop: OAuth 2 client credentials (RFC 6749 section 4.4), a service account's signed JWT
 * exchanged at the token URL (RFC 7523 section 2.1; Google's service accounts), and an app's
 * installation token (a GitHub App: an app JWT POSTed to /app/installations/{id}/access_tokens).
 * "Refreshing" such a token is obtaining a new one the same way.
 */
import { createPrivateKey, sign, type KeyObject } from 'node:crypto';
import { postTokenRequest, requestToken, TokenRequestError, type Fetch } from './oauth2.js';
import { fillTemplate, type MintedTokenProvider } from './providers/catalog.js';

/** Lifetime asked for in a service account's assertion: the most Google accepts. */
const JWT_ASSERTION_LIFETIME_S = 3600;
/**
 * GitHub refuses app JWTs that expire more than 10 minutes ahead; 9, with `iat` 60 s in the past,
 * leaves room for clocks that disagree (GitHub's own advice).
 */
const APP_JWT_LIFETIME_S = 9 * 60;
const APP_JWT_BACKDATE_S = 60;

export interface ClientCredentials {
  type: 'OAUTH2_CC';
  client_id: string;
  client_secret: string;
}
export interface ServiceAccountCredentials {
  type: 'JWT';
  /** The account: the JWT's issuer (Google's `client_email`). */
  client_email: string;
  /** PEM of an RSA private key (PKCS #8 or PKCS #1). */
  private_key: string;
  /** Sent as the JWT header's `kid` when present. */
  private_key_id?: string | undefined;
  /** A user to act as (Google Workspace domain-wide delegation): the JWT's `sub`. */
  subject?: string | undefined;
}
export interface AppCredentials {
  type: 'APP';
  /** The app's id: the app JWT's issuer. */
  app_id: string;
  private_key: string;
}
export type MintingCredentials = ClientCredentials | ServiceAccountCredentials | AppCredentials;

export interface MintedToken {
  access_token: string;
  /** ISO 8601; absent when the endpoint did not say. */
  expires_at?: string;
  raw: Record<string, unknown>;
}

export interface MintRequest {
  provider: MintedTokenProvider;
  credentials: MintingCredentials;
  connectionConfig: Record<string, string>;
  /** The integration's scopes (added to the provider's default scopes). */
  scopes: readonly string[];
  fetch: Fetch;
  now: Date;
}

/** A new access token for the connection, or a TokenRequestError (`invalid_private_key` for a key that cannot sign). */
export async function mintToken(request: MintRequest): Promise<MintedToken> {
  const { provider, credentials, now } = request;
  if (provider.auth_mode !== credentials.type) {
    throw new TokenRequestError(
      'credentials_type_mismatch',
      `the connection holds ${credentials.type} credentials but its provider uses ${provider.auth_mode}`,
      true,
    );
  }
  if (provider.auth_mode === 'OAUTH2_CC' && credentials.type === 'OAUTH2_CC') {
    const scope = scopesOf(provider.default_scopes, request.scopes).join(provider.scope_separator);
    const raw = await requestToken({
      provider,
      clientId: credentials.client_id,
      clientSecret: credentials.client_secret,
      connectionConfig: request.connectionConfig,
      grant: { grant_type: 'client_credentials', ...(scope === '' ? {} : { scope }) },
      fetch: request.fetch,
    });
    return fromExpiresIn(raw, now);
  }
  if (provider.auth_mode === 'JWT' && credentials.type === 'JWT') {
    const tokenUrl = fillTemplate(provider.token_url, provider, request.connectionConfig, 'the token URL');
    const issuedAt = Math.floor(now.getTime() / 1000);
    const scope = scopesOf(provider.default_scopes, request.scopes).join(provider.scope_separator);
    const assertion = signJwt(
      credentials.private_key,
      credentials.private_key_id === undefined ? {} : { kid: credentials.private_key_id },
      {
        iss: credentials.client_email,
        aud: provider.audience ?? tokenUrl,
        iat: issuedAt,
        exp: issuedAt + JWT_ASSERTION_LIFETIME_S,
        ...(scope === '' ? {} : { scope }),
        ...(credentials.subject === undefined ? {} : { sub: credentials.subject }),
      },
    );
    const raw = await postTokenRequest({
      url: tokenUrl,
      headers: {},
      body: { grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion },
      secrets: [assertion],
      fetch: request.fetch,
    });
    return fromExpiresIn(raw, now);
  }
  if (provider.auth_mode === 'APP' && credentials.type === 'APP') {
    const tokenUrl = fillTemplate(provider.token_url, provider, request.connectionConfig, 'the token URL');
    const issuedAt = Math.floor(now.getTime() / 1000) - APP_JWT_BACKDATE_S;
    const appJwt = signJwt(
      credentials.private_key,
      {},
      { iss: credentials.app_id, iat: issuedAt, exp: issuedAt + APP_JWT_BACKDATE_S + APP_JWT_LIFETIME_S },
    );
    const raw = await postTokenRequest({
      url: tokenUrl,
      headers: { ...provider.token_request_headers, Authorization: `Bearer ${appJwt}` },
      secrets: [appJwt],
      tokenField: 'token',
      fetch: request.fetch,
    });
    const expiresAt = typeof raw['expires_at'] === 'string' ? Date.parse(raw['expires_at']) : Number.NaN;
    return {
      access_token: String(raw['token']),
      ...(Number.isFinite(expiresAt) ? { expires_at: new Date(expiresAt).toISOString() } : {}),
      raw,
    };
  }
  throw new TokenRequestError('unsupported_auth_mode', `no token grant for ${provider.auth_mode}`, true);
}

function scopesOf(defaults: readonly string[], extra: readonly string[]): string[] {
  return [...new Set([...defaults, ...extra])];
}

function fromExpiresIn(raw: Record<string, unknown>, now: Date): MintedToken {
  const expiresIn = Number(raw['expires_in']);
  return {
    access_token: String(raw['access_token']),
    ...(Number.isFinite(expiresIn) && expiresIn > 0
      ? { expires_at: new Date(now.getTime() + expiresIn * 1000).toISOString() }
      : {}),
    raw,
  };
}

/**
 * The RSA private key of a PEM text, or TokenRequestError `invalid_private_key` (permanent: the
 * connection must get another key) saying what is wrong without quoting the key.
 */
export function rsaPrivateKey(pem: string): KeyObject {
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem.replace(/\\n/g, '\n'), format: 'pem' });
  } catch (error) {
    const reason = error instanceof Error && 'code' in error ? String(error.code) : 'unreadable';
    throw new TokenRequestError(
      'invalid_private_key',
      `the connection's private key is not a PEM-encoded private key (${reason}); paste the whole key, from -----BEGIN PRIVATE KEY----- (or -----BEGIN RSA PRIVATE KEY-----) to the matching END line`,
      true,
    );
  }
  if (key.asymmetricKeyType !== 'rsa') {
    throw new TokenRequestError(
      'invalid_private_key',
      `the connection's private key is a${key.asymmetricKeyType === 'ec' || key.asymmetricKeyType === 'ed25519' ? 'n' : ''} ${key.asymmetricKeyType ?? 'unknown'} key; RS256 needs an RSA private key`,
      true,
    );
  }
  return key;
}

function base64url(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

/** A compact JWS with RS256 (RFC 7515, RFC 7518 section 3.3). */
export function signJwt(pem: string, header: Record<string, string>, claims: Record<string, unknown>): string {
  const key = rsaPrivateKey(pem);
  const input = `${base64url({ alg: 'RS256', typ: 'JWT', ...header })}.${base64url(claims)}`;
  return `${input}.${sign('sha256', Buffer.from(input), key).toString('base64url')}`;
}
