/**
 * Request authorization: where a script's (or a proxied) request goes and what credentials ride on it.
 * Pure: it takes the connection's credentials and settings and the resolved integration, and answers
 * the request to send, or the error that says why not. The host policy is here: a connection's
 * credentials go only to its provider's hosts (the base URL's origin, `allowed_hosts`).
 * Unit tests: requestAuthorizer.test.ts, beside it.
 */
import { ServiceError } from '../errors.js';
import { modeMismatch } from './connectionErrors.js';
import { credentialSecretForms, type StoredCredentials } from './credentials.js';
import type { ResolvedIntegration } from './integrationStore.js';
import { signOAuth1 } from './oauth1.js';
import { missingClient } from './oauth2.js';
import { fillTemplate } from './providers/catalog.js';
import type { AuthorizedRequest, ConnectionScope, RequestToAuthorize } from '../runtime/connectionAccess.js';

/** Where a provider's token goes: the header's name and its format around `${accessToken}`. */
interface TokenHeader {
  name: string;
  format: string;
}

export interface AuthorizeInput {
  scope: ConnectionScope;
  request: RequestToAuthorize;
  /** The connection's credentials, already refreshed when they needed it. */
  credentials: StoredCredentials;
  /** The connection's settings (`connection_config`): they fill the provider's base URL template. */
  connectionConfig: Record<string, string>;
  integration: ResolvedIntegration;
  /** The error for a minted kind that still has no token (its last attempt to obtain one failed). */
  noToken: () => ServiceError;
}

/**
 * Resolves the base URL (`baseUrlOverride`, else the provider catalog's, with connection settings
 * substituted) and injects the credentials; `secrets` are every credential value, for the caller to
 * redact. A URL on another host than the provider's is sent without the credentials.
 */
export function authorizeRequest(input: AuthorizeInput): AuthorizedRequest {
  const { scope, request, credentials, integration: resolved } = input;
  const { provider } = resolved;
  const catalogBase =
    provider.base_url === undefined
      ? undefined
      : fillTemplate(
          provider.base_url,
          provider,
          input.connectionConfig,
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
  const secrets = credentialSecretForms(credentials, resolved.clientSecret);

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
      setToken(headers, provider.token_header, credentials.access_token);
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
      // The token refresh obtained one, or failed: a minted kind never gets here without a token.
      if (credentials.access_token === undefined) throw input.noToken();
      setToken(headers, provider.token_header, credentials.access_token);
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

/** Sets a header, replacing one of the same name in any letter case (an `authorization` the script set, say). */
function setHeader(headers: Record<string, string>, name: string, value: string): void {
  for (const existing of Object.keys(headers))
    if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing];
  headers[name] = value;
}

/** Sets the provider's token header (`Authorization: Bearer <token>` unless the catalog says otherwise). */
function setToken(headers: Record<string, string>, tokenHeader: TokenHeader, token: string): void {
  setHeader(headers, tokenHeader.name, tokenHeader.format.replace('${accessToken}', token));
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
