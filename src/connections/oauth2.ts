/**
 * The token endpoint of OAuth 2 (RFC 6749 sections 4.1.3 and 6): one function for both grants, so the
 * code exchange and the refresh authenticate the client, encode the body and read the answer alike.
 */
import { ServiceError } from '../errors.js';
import { outboundRefusal } from '../runtime/outbound.js';
import { fillTemplate, type ClientCredentialsProvider, type OAuth2Provider } from './providers/catalog.js';
import { redactSecrets } from '../runtime/redaction.js';

export type Fetch = typeof globalThis.fetch;

/** Token endpoint answers that mean the grant or the client is gone: trying again cannot help. */
const PERMANENT_ERRORS = new Set([
  'invalid_grant',
  'invalid_client',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'invalid_request',
  'access_denied',
  // GitHub answers 200 with these instead of invalid_grant.
  'bad_refresh_token',
  'bad_verification_code',
  'incorrect_client_credentials',
]);

const TOKEN_REQUEST_TIMEOUT_MS = 15_000;

/** A token request the provider refused or that did not reach it. The message never holds a secret. */
export class TokenRequestError extends Error {
  override readonly name = 'TokenRequestError';
  constructor(
    /** The provider's `error` (invalid_grant…), or http_<status>, or token_endpoint_unreachable. */
    readonly code: string,
    message: string,
    /** True when retrying cannot help: the user must reconnect (or the client settings are wrong). */
    readonly permanent: boolean,
  ) {
    super(message);
  }
}

export interface TokenRequest {
  provider: OAuth2Provider | ClientCredentialsProvider;
  clientId: string;
  clientSecret: string | undefined;
  connectionConfig: Record<string, string>;
  grant:
    | { grant_type: 'authorization_code'; code: string; redirect_uri: string; code_verifier?: string }
    | {
        grant_type: 'refresh_token';
        refresh_token: string;
      }
    | { grant_type: 'client_credentials'; scope?: string };
  fetch: Fetch;
}

function parseBody(text: string, contentType: string): Record<string, unknown> | undefined {
  if (text.trim() === '') return undefined;
  try {
    const parsed: unknown = JSON.parse(text);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
    return undefined;
  } catch {
    // Some endpoints (GitHub's, without Accept: application/json) answer form-encoded.
    if (contentType.includes('json')) return undefined;
    const form = Object.fromEntries(new URLSearchParams(text));
    return Object.keys(form).length > 0 ? form : undefined;
  }
}

/** POSTs to the token endpoint and returns the raw token response, or throws TokenRequestError. */
export async function requestToken(request: TokenRequest): Promise<Record<string, unknown>> {
  const { provider, clientId, clientSecret, grant } = request;
  const url = fillTemplate(provider.token_url, provider, request.connectionConfig, 'the token URL');
  const body: Record<string, string> = {
    ...provider.token_params,
    ...(grant.grant_type === 'refresh_token' && 'refresh_params' in provider ? provider.refresh_params : {}),
  };
  for (const [name, value] of Object.entries(grant)) if (value !== undefined) body[name] = value;
  const headers: Record<string, string> = {};
  if (provider.token_request_auth_method === 'client_secret_basic') {
    // RFC 6749 section 2.3.1: both parts are form-encoded before base64.
    const pair = `${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret ?? '')}`;
    headers['Authorization'] = `Basic ${Buffer.from(pair).toString('base64')}`;
  } else {
    body['client_id'] = clientId;
    if (clientSecret !== undefined) body['client_secret'] = clientSecret;
  }
  return postTokenRequest({
    url,
    headers,
    body,
    format: provider.token_request_format,
    secrets: [
      clientSecret,
      'code' in grant ? grant.code : undefined,
      'refresh_token' in grant ? grant.refresh_token : undefined,
    ],
    fetch: request.fetch,
  });
}

export interface RawTokenRequest {
  url: string;
  headers: Record<string, string>;
  /** Sent form-encoded or as JSON (`format`); none: an empty POST. */
  body?: Record<string, string> | undefined;
  format?: 'form' | 'json';
  /** Values that must not appear in an error message (the client secret, an assertion). */
  secrets: (string | undefined)[];
  /** The field of the answer that holds the token. @default 'access_token' */
  tokenField?: string;
  fetch: Fetch;
}

/**
 * One POST to a token endpoint (any grant, or GitHub's installation token route): the answer parsed,
 * errors classified as permanent (the grant or the client is refused) or transient (5xx, 429,
 * unreachable), never with a secret in the message.
 */
export async function postTokenRequest(request: RawTokenRequest): Promise<Record<string, unknown>> {
  const { url, secrets } = request;
  const headers: Record<string, string> = { Accept: 'application/json', ...request.headers };
  let encoded: string | undefined;
  if (request.body !== undefined) {
    if (request.format === 'json') {
      headers['Content-Type'] = 'application/json';
      encoded = JSON.stringify(request.body);
    } else {
      headers['Content-Type'] = 'application/x-www-form-urlencoded';
      encoded = new URLSearchParams(request.body).toString();
    }
  }

  let response: Response;
  try {
    response = await request.fetch(url, {
      method: 'POST',
      headers,
      ...(encoded === undefined ? {} : { body: encoded }),
      redirect: 'error',
      signal: AbortSignal.timeout(TOKEN_REQUEST_TIMEOUT_MS),
    });
  } catch (error) {
    const reason = outboundRefusal(error)?.message ?? (error instanceof Error ? error.message : String(error));
    throw new TokenRequestError(
      'token_endpoint_unreachable',
      `the token endpoint ${new URL(url).origin} did not answer: ${redactSecrets(reason, secrets)}`,
      false,
    );
  }
  const text = await response.text().catch(() => '');
  const parsed = parseBody(text, response.headers.get('content-type') ?? '');
  const errorCode = typeof parsed?.['error'] === 'string' ? parsed['error'] : undefined;
  if (!response.ok || errorCode !== undefined) {
    const description =
      typeof parsed?.['error_description'] === 'string'
        ? parsed['error_description']
        : typeof parsed?.['message'] === 'string'
          ? parsed['message']
          : '';
    const code = errorCode ?? `http_${response.status}`;
    const permanent =
      errorCode !== undefined
        ? PERMANENT_ERRORS.has(errorCode) ||
          (response.status >= 400 && response.status < 500 && response.status !== 429)
        : response.status >= 400 && response.status < 500 && response.status !== 408 && response.status !== 429;
    const detail = description ? `: ${redactSecrets(description, secrets).slice(0, 300)}` : '';
    throw new TokenRequestError(code, `the token endpoint answered ${response.status} ${code}${detail}`, permanent);
  }
  const field = request.tokenField ?? 'access_token';
  if (!parsed || typeof parsed[field] !== 'string' || parsed[field] === '') {
    throw new TokenRequestError('invalid_token_response', `the token endpoint answered without ${field}`, false);
  }
  return parsed;
}

/** The stored OAuth 2 credentials made from a token response; a refresh keeps the old refresh token unless a new one came. */
export function credentialsFromTokenResponse(
  raw: Record<string, unknown>,
  now: Date,
  previousRefreshToken?: string,
): { type: 'OAUTH2'; access_token: string; refresh_token?: string; expires_at?: string; raw: Record<string, unknown> } {
  const expiresIn = Number(raw['expires_in']);
  const refreshToken =
    typeof raw['refresh_token'] === 'string' && raw['refresh_token'] !== ''
      ? raw['refresh_token']
      : previousRefreshToken;
  return {
    type: 'OAUTH2',
    access_token: String(raw['access_token']),
    ...(refreshToken === undefined ? {} : { refresh_token: refreshToken }),
    ...(Number.isFinite(expiresIn) && expiresIn > 0
      ? { expires_at: new Date(now.getTime() + expiresIn * 1000).toISOString() }
      : {}),
    raw,
  };
}

/** Fields of the token response to copy into the connection settings (Salesforce's instance_url, say). */
export function settingsFromTokenResponse(
  provider: OAuth2Provider,
  raw: Record<string, unknown>,
): Record<string, string> {
  const settings: Record<string, string> = {};
  for (const field of provider.token_response_metadata) {
    const value = raw[field];
    if (typeof value === 'string' && value !== '') settings[field] = value;
  }
  return settings;
}

/**
 * requestToken with an integration's OAuth client (`resolved`'s id and secret); the integration
 * without a client id fails with missing_oauth_client, before any request.
 */
export function requestIntegrationToken(
  integrationId: string,
  resolved: { clientId: string | undefined; clientSecret: string | undefined },
  request: Omit<TokenRequest, 'clientId' | 'clientSecret'>,
): Promise<Record<string, unknown>> {
  if (!resolved.clientId) throw missingClient(integrationId);
  return requestToken({ ...request, clientId: resolved.clientId, clientSecret: resolved.clientSecret });
}

export function missingClient(integrationId: string): ServiceError {
  return new ServiceError(
    'missing_oauth_client',
    `integration '${integrationId}' has no OAuth client id; set oauth_client_id and oauth_client_secret on the integration`,
  );
}
