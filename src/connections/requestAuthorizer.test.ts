/**
 * Request authorization without a database: every auth mode, base URL resolution (catalog, connection
 * settings, override, absolute endpoint), the host policy (credentials go to the provider's hosts
 * only), and the errors of each. test/connections/authorize.test.ts checks the same path through
 * stored connections and integrations.
 */
import { describe, expect, it } from 'vitest';
import { ServiceError } from '../errors.js';
import type { ConnectionScope, RequestToAuthorize } from '../runtime/connectionAccess.js';
import type { StoredCredentials } from './credentials.js';
import type { Integration, ResolvedIntegration } from './integrationStore.js';
import { loadProviderCatalog, withOverrides } from './providers/catalog.js';
import { authorizeRequest, type AuthorizeInput } from './requestAuthorizer.js';

const catalog = loadProviderCatalog({
  extraFile: undefined,
  extra: {
    'query-key-api': {
      display_name: 'Query key API',
      auth_mode: 'API_KEY',
      api_key: { in: 'query', name: 'api_key' },
      base_url: 'https://api.query.example/v2/',
    },
    'no-base-api': { display_name: 'No base URL', auth_mode: 'BASIC' },
  },
});

const noRequest: RequestToAuthorize = { method: 'GET', endpoint: '/v1/things', headers: {}, params: {} };

/** An integration `id` of `provider` with its `provider_settings`, as the integration store resolves it. */
function integration(
  provider: string,
  settings: Record<string, unknown> = {},
  client: { clientId?: string; clientSecret?: string } = {},
): ResolvedIntegration {
  const entry = withOverrides(catalog.get(provider), settings, provider);
  const described: Integration = {
    environmentId: 'env',
    id: provider,
    provider,
    displayName: entry.display_name,
    displayNameOverride: null,
    authMode: entry.auth_mode,
    oauthClientId: client.clientId ?? null,
    hasOAuthClientSecret: client.clientSecret !== undefined,
    oauthScopes: [],
    providerSettings: settings,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
  };
  return { integration: described, provider: entry, clientId: client.clientId, clientSecret: client.clientSecret };
}

const scopeOf = (integrationId: string): ConnectionScope => ({
  environmentId: 'env',
  integrationId,
  connectionId: 'c1',
});

function authorize(
  resolved: ResolvedIntegration,
  credentials: StoredCredentials,
  request: Partial<RequestToAuthorize> = {},
  more: Partial<AuthorizeInput> = {},
) {
  return authorizeRequest({
    scope: scopeOf(resolved.integration.id),
    request: { ...noRequest, ...request },
    credentials,
    connectionConfig: {},
    integration: resolved,
    noToken: () => new ServiceError('connection_refresh_unavailable', 'no token yet'),
    ...more,
  });
}

const apiKey = (key: string): StoredCredentials => ({ type: 'API_KEY', apiKey: key });

describe('authorizing a request', () => {
  it('puts an API key in the provider header with its format, replacing a header of any letter case', () => {
    const { secrets, ...sent } = authorize(integration('stripe'), apiKey('sk_test_4eC39HqLyjWDarjtT1zdp7dc'), {
      headers: { AUTHORIZATION: 'mine' },
      params: { limit: 3 },
    });
    expect(sent).toEqual({
      method: 'GET',
      url: 'https://api.stripe.com/v1/things?limit=3',
      headers: { Authorization: 'Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc' },
    });
    // What the caller must redact from whatever it keeps or shows of the request and its answer.
    expect(secrets).toContain('sk_test_4eC39HqLyjWDarjtT1zdp7dc');
  });

  it('puts an API key in the query when the provider says so, joining base path and endpoint', () => {
    const request = authorize(integration('query-key-api'), apiKey('query-key-123456'), {
      endpoint: 'items?sort=asc',
      params: { q: 'x y' },
    });
    expect(request.url).toBe('https://api.query.example/v2/items?sort=asc&q=x+y&api_key=query-key-123456');
    expect(request.headers).toEqual({});
  });

  it('sends Basic credentials, and an OAuth 2 token to a base URL filled from connection settings', () => {
    const basic = authorize(
      integration('twilio'),
      { type: 'BASIC', username: 'AC123', password: 'twilio-auth-token-abcdef' },
      { endpoint: '/2010-04-01/Accounts.json' },
    );
    expect(basic.url).toBe('https://api.twilio.com/2010-04-01/Accounts.json');
    expect(basic.headers['Authorization']).toBe(
      `Basic ${Buffer.from('AC123:twilio-auth-token-abcdef').toString('base64')}`,
    );
    expect(basic.secrets).toContain('AC123:twilio-auth-token-abcdef');

    const zendesk = authorize(
      integration('zendesk'),
      { type: 'OAUTH2', access_token: 'zendesk-token-1234', raw: {} },
      { endpoint: '/api/v2/tickets' },
      { connectionConfig: { subdomain: 'acme' } },
    );
    expect(zendesk.url).toBe('https://acme.zendesk.com/api/v2/tickets');
    expect(zendesk.headers['Authorization']).toBe('Bearer zendesk-token-1234');
  });

  it("adds the provider's headers, and takes a per-integration base URL (a self-hosted instance)", () => {
    const request = authorize(
      integration('github', { base_url: 'https://github.example.com/api/v3' }),
      { type: 'OAUTH2', access_token: 'ghe-token-12345', raw: {} },
      { endpoint: '/user' },
    );
    expect(request.url).toBe('https://github.example.com/api/v3/user');
    expect(request.headers).toMatchObject({
      'X-GitHub-Api-Version': '2022-11-28',
      Authorization: 'Bearer ghe-token-12345',
    });
  });

  it('uses baseUrlOverride toward an allowed host, or an absolute endpoint, and refuses when there is no base URL at all', () => {
    const basic: StoredCredentials = { type: 'BASIC', username: 'u', password: 'p' };
    const nobase = integration('no-base-api');
    expect(() => authorize(nobase, basic)).toThrow(expect.objectContaining({ code: 'missing_base_url', status: 400 }));
    // Without a base URL or allowed hosts, an override has no host of the provider to point at.
    expect(() => authorize(nobase, basic, { baseUrlOverride: 'https://other.example/base' })).toThrow(
      expect.objectContaining({ code: 'base_url_not_allowed', status: 403 }),
    );
    const allowed = integration('no-base-api', { allowed_hosts: ['other.example'] });
    const overridden = authorize(allowed, basic, { baseUrlOverride: 'https://other.example/base' });
    expect(overridden.url).toBe('https://other.example/base/v1/things');
    expect(overridden.headers['Authorization']).toBe(`Basic ${Buffer.from('u:p').toString('base64')}`);
    const absolute = authorize(allowed, basic, { endpoint: 'https://abs.example/x' });
    expect(absolute.url).toBe('https://abs.example/x');
    expect(absolute.headers).toEqual({});
    expect(() => authorize(allowed, basic, { baseUrlOverride: 'file:///etc' })).toThrow(
      expect.objectContaining({ code: 'invalid_request_url' }),
    );
    expect(() => authorize(allowed, basic, { endpoint: 'https://' })).toThrow(
      expect.objectContaining({ code: 'invalid_request_url' }),
    );
  });

  it('matches allowed hosts by name, wildcard and port, over https (or the base URL scheme) only', () => {
    const resolved = integration('stripe', { allowed_hosts: ['*.files.stripe.com', 'uploads.stripe.com:8443'] });
    const key = apiKey('sk_allowed');
    const sentTo = (endpoint: string) => authorize(resolved, key, { endpoint }).headers['Authorization'];
    expect(sentTo('https://a.files.stripe.com/x')).toBe('Bearer sk_allowed');
    expect(sentTo('https://uploads.stripe.com:8443/x')).toBe('Bearer sk_allowed');
    for (const elsewhere of [
      'https://files.stripe.com.evil.example/x',
      'https://uploads.stripe.com/x', // the entry names port 8443
      'http://a.files.stripe.com/x', // in clear, while the base URL is https
      'https://api.stripe.com:444/x', // the base URL's host on another port: another origin
    ]) {
      expect(sentTo(elsewhere), elsewhere).toBeUndefined();
    }
  });

  it('sends credentials only to the API’s own origin: an absolute URL elsewhere goes without them', () => {
    const resolved = integration('stripe');
    const sameOrigin = authorize(resolved, apiKey('sk_test_origin'), {
      endpoint: 'https://api.stripe.com/v1/charges?starting_after=ch_1',
    });
    expect(sameOrigin.headers['Authorization']).toBe('Bearer sk_test_origin');
    const elsewhere = authorize(resolved, apiKey('sk_test_origin'), {
      endpoint: 'https://files.example.net/export.csv',
      headers: { Accept: 'text/csv' },
    });
    expect(elsewhere.url).toBe('https://files.example.net/export.csv');
    expect(elsewhere.headers).toEqual({ Accept: 'text/csv' });
    expect(JSON.stringify({ url: elsewhere.url, headers: elsewhere.headers })).not.toContain('sk_test_origin');
  });

  it('never sends credentials to another host: not on an override, not through a copied header or query value', () => {
    const resolved = integration('query-key-api');
    const key = apiKey('query-key-elsewhere-77');
    for (const baseUrlOverride of [
      'https://evil.example',
      'http://api.query.example/v2', // the provider's host, but in clear: not its origin
      'https://api.query.example.evil.example',
      'https://api.query.example:8443',
    ]) {
      expect(() => authorize(resolved, key, { baseUrlOverride }), baseUrlOverride).toThrow(
        expect.objectContaining({ code: 'base_url_not_allowed', status: 403 }),
      );
    }
    // A redirect Location or a next-page link that repeats the key: the key is dropped, wherever it sits.
    const echoed = authorize(resolved, key, {
      endpoint: 'https://evil.example/next?api_key=query-key-elsewhere-77&page=2&copy=xquery-key-elsewhere-77',
      headers: { 'X-Copied': 'query-key-elsewhere-77', Accept: 'application/json' },
    });
    expect(echoed.url).toBe('https://evil.example/next?page=2');
    expect(echoed.headers).toEqual({ Accept: 'application/json' });
    const home = authorize(resolved, key, { endpoint: 'https://api.query.example/v2/x' });
    expect(home.url).toBe('https://api.query.example/v2/x?api_key=query-key-elsewhere-77');
  });

  it('refuses credentials of another kind than the provider uses, naming both', () => {
    expect(() => authorize(integration('stripe'), { type: 'OAUTH2', access_token: 'oauth-token-1', raw: {} })).toThrow(
      expect.objectContaining({ code: 'credentials_type_mismatch', message: expect.stringContaining('API_KEY') }),
    );
    expect(() => authorize(integration('github'), apiKey('gh-key-1'))).toThrow(
      expect.objectContaining({ code: 'credentials_type_mismatch' }),
    );
  });

  it('sends a minted token in the token header, and the caller’s error when there is none yet', () => {
    const paypal = integration('paypal');
    const minted: StoredCredentials = {
      type: 'OAUTH2_CC',
      client_id: 'client-1',
      client_secret: 'client-secret-1',
      access_token: 'minted-token-1',
    };
    const request = authorize(paypal, minted, { endpoint: '/v2/invoicing/invoices' });
    expect(request.headers['Authorization']).toBe('Bearer minted-token-1');
    // The client secret is redacted, though it never travels with the request.
    expect(request.secrets).toEqual(expect.arrayContaining(['minted-token-1', 'client-secret-1']));
    expect(JSON.stringify(request.headers)).not.toContain('client-secret-1');

    const { access_token: _token, ...withoutToken } = minted;
    expect(() =>
      authorize(
        paypal,
        withoutToken,
        {},
        { noToken: () => new ServiceError('connection_refresh_failed', 'reconnect') },
      ),
    ).toThrow(expect.objectContaining({ code: 'connection_refresh_failed' }));
  });

  it('signs OAuth 1 requests with the integration’s client, and says when the client is missing', () => {
    const credentials: StoredCredentials = {
      type: 'OAUTH1',
      oauth_token: 'oauth1-token',
      oauth_token_secret: 'oauth1-token-secret',
      raw: {},
    };
    const signed = authorize(
      integration('trello', {}, { clientId: 'consumer-key', clientSecret: 'consumer-secret' }),
      credentials,
      { method: 'post', endpoint: '/1/cards', formParams: { name: 'x' } },
    );
    expect(signed.method).toBe('POST');
    expect(signed.headers['Authorization']).toMatch(/^OAuth /);
    expect(signed.headers['Authorization']).toContain('oauth_consumer_key="consumer-key"');
    expect(signed.headers['Authorization']).toContain('oauth_token="oauth1-token"');
    expect(signed.secrets).toEqual(expect.arrayContaining(['oauth1-token-secret', 'consumer-secret']));
    expect(() => authorize(integration('trello'), credentials)).toThrow(
      expect.objectContaining({ code: 'missing_oauth_client' }),
    );
  });
});
