/**
 * Request authorization for every auth mode, base URL resolution, the provider catalog (built-in and
 * user-added), import of existing credentials, metadata, and the errors of each.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import type { ConnectionScope } from '../../src/connections/types.js';
import { useDatabase } from '../helpers/stack.js';
import { startHarness, type Harness } from './helpers/harness.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();
const noRequest = { method: 'GET', endpoint: '/v1/things', headers: {}, params: {} };

describe('the provider catalog', () => {
  it('ships at least twenty providers, the required ones among them, each valid', () => {
    const catalog = loadProviderCatalog({ extraFile: undefined });
    const required = [
      'github',
      'gitlab',
      'slack',
      'google',
      'microsoft',
      'hubspot',
      'salesforce',
      'notion',
      'linear',
      'jira',
      'asana',
      'airtable',
      'intercom',
      'zendesk',
      'shopify',
      'stripe',
      'dropbox',
      'box',
      'trello',
      'twitter',
    ];
    for (const name of required) expect(catalog.has(name), name).toBe(true);
    expect(catalog.names().length).toBeGreaterThanOrEqual(20);
    expect(catalog.get('stripe')).toMatchObject({ auth_mode: 'API_KEY', base_url: 'https://api.stripe.com' });
    expect(catalog.get('trello').auth_mode).toBe('OAUTH1');
    expect(catalog.get('airtable')).toMatchObject({ pkce: true, token_request_auth_method: 'client_secret_basic' });
    // Every placeholder of every built-in URL names a declared connection setting.
    for (const name of catalog.names()) {
      const provider = catalog.get(name);
      for (const value of Object.values(provider)) {
        if (typeof value !== 'string') continue;
        for (const match of value.matchAll(/\$\{connectionConfig\.(\w+)\}/g)) {
          expect(provider.connection_config[match[1]!], `${name}: ${match[1]}`).toBeDefined();
        }
      }
    }
  });

  it('loads user providers from a file and says what is wrong with a bad one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'providers-'));
    const good = join(dir, 'good.yaml');
    writeFileSync(
      good,
      'internal-crm:\n  display_name: Internal CRM\n  auth_mode: API_KEY\n  api_key: { in: header, name: X-Api-Key, format: "${apiKey}" }\n  base_url: https://crm.internal.example\n',
    );
    expect(loadProviderCatalog({ extraFile: good }).get('internal-crm').base_url).toBe('https://crm.internal.example');
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'broken:\n  display_name: Broken\n  auth_mode: OAUTH2\n  token_url: not a url\n');
    expect(() => loadProviderCatalog({ extraFile: bad })).toThrow(/bad\.yaml: broken\.(authorization_url|token_url)/);
    expect(() => loadProviderCatalog({ extraFile: join(dir, 'missing.yaml') })).toThrow(/cannot read providers file/);
  });
});

describe('authorizing requests', () => {
  let h: Harness;
  let environmentId: string;
  const scope = (integrationId: string, connectionId = 'c1'): ConnectionScope => ({
    environmentId,
    integrationId,
    connectionId,
  });

  beforeAll(async () => {
    const { pool } = await useDatabase();
    const dir = mkdtempSync(join(tmpdir(), 'providers-'));
    const file = join(dir, 'custom.yaml');
    writeFileSync(
      file,
      [
        'query-key-api:',
        '  display_name: Query key API',
        '  auth_mode: API_KEY',
        '  api_key: { in: query, name: api_key }',
        '  base_url: https://api.query.example/v2/',
        'no-base-api:',
        '  display_name: No base URL',
        '  auth_mode: BASIC',
      ].join('\n'),
    );
    h = await startHarness({ db: pool, providersFile: file });
    environmentId = (await h.environments.create({ name: 'dev' })).environment.id;
    for (const [id, provider] of [
      ['stripe', 'stripe'],
      ['query', 'query-key-api'],
      ['twilio', 'twilio'],
      ['zendesk', 'zendesk'],
      ['nobase', 'no-base-api'],
      ['github', 'github'],
    ] as const) {
      await h.integrations.upsert(environmentId, { id, provider });
    }
  });

  it('puts an API key in the provider header with its format', async () => {
    logScan.secret('sk_test_4eC39HqLyjWDarjtT1zdp7dc');
    await h.service.importConnection({
      environmentId,
      integrationId: 'stripe',
      connectionId: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc' },
    });
    const request = await h.service.authorizeRequest(scope('stripe'), {
      ...noRequest,
      headers: { AUTHORIZATION: 'mine' },
      params: { limit: 3 },
    });
    const { secrets, ...sent } = request;
    expect(sent).toEqual({
      method: 'GET',
      url: 'https://api.stripe.com/v1/things?limit=3',
      headers: { Authorization: 'Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc' },
    });
    // What the caller must redact from whatever it keeps or shows of the request and its answer.
    expect(secrets).toContain('sk_test_4eC39HqLyjWDarjtT1zdp7dc');
  });

  it('puts an API key in the query when the provider says so, joining base path and endpoint', async () => {
    logScan.secret('query-key-123456');
    await h.service.importConnection({
      environmentId,
      integrationId: 'query',
      connectionId: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'query-key-123456' },
    });
    const request = await h.service.authorizeRequest(scope('query'), {
      ...noRequest,
      endpoint: 'items?sort=asc',
      params: { q: 'x y' },
    });
    expect(request.url).toBe('https://api.query.example/v2/items?sort=asc&q=x+y&api_key=query-key-123456');
    expect(request.headers).toEqual({});
  });

  it('sends Basic credentials and fills the base URL from connection settings', async () => {
    logScan.secret('twilio-auth-token-abcdef');
    await h.service.importConnection({
      environmentId,
      integrationId: 'twilio',
      connectionId: 'c1',
      credentials: { type: 'BASIC', username: 'AC123', password: 'twilio-auth-token-abcdef' },
    });
    const request = await h.service.authorizeRequest(scope('twilio'), {
      ...noRequest,
      endpoint: '/2010-04-01/Accounts.json',
    });
    expect(request.url).toBe('https://api.twilio.com/2010-04-01/Accounts.json');
    expect(request.headers['Authorization']).toBe(
      `Basic ${Buffer.from('AC123:twilio-auth-token-abcdef').toString('base64')}`,
    );

    await h.service.importConnection({
      environmentId,
      integrationId: 'zendesk',
      connectionId: 'c1',
      credentials: { type: 'OAUTH2', access_token: 'zendesk-token-1234' },
      connection_config: { subdomain: 'acme' },
    });
    const zendesk = await h.service.authorizeRequest(scope('zendesk'), { ...noRequest, endpoint: '/api/v2/tickets' });
    expect(zendesk.url).toBe('https://acme.zendesk.com/api/v2/tickets');
    expect(zendesk.headers['Authorization']).toBe('Bearer zendesk-token-1234');
  });

  it('uses baseUrlOverride toward an allowed host, or an absolute endpoint, and refuses when there is no base URL at all', async () => {
    await h.service.importConnection({
      environmentId,
      integrationId: 'nobase',
      connectionId: 'c1',
      credentials: { type: 'BASIC', username: 'u', password: 'p' },
    });
    await expect(h.service.authorizeRequest(scope('nobase'), noRequest)).rejects.toMatchObject({
      code: 'missing_base_url',
      status: 400,
    });
    // Without a base URL or allowed hosts, an override has no host of the provider to point at.
    await expect(
      h.service.authorizeRequest(scope('nobase'), { ...noRequest, baseUrlOverride: 'https://other.example/base' }),
    ).rejects.toMatchObject({ code: 'base_url_not_allowed', status: 403 });
    await h.integrations.upsert(environmentId, {
      id: 'nobase',
      provider: 'no-base-api',
      provider_settings: { allowed_hosts: ['other.example'] },
    });
    const overridden = await h.service.authorizeRequest(scope('nobase'), {
      ...noRequest,
      baseUrlOverride: 'https://other.example/base',
    });
    expect(overridden.url).toBe('https://other.example/base/v1/things');
    expect(overridden.headers['Authorization']).toBe(`Basic ${Buffer.from('u:p').toString('base64')}`);
    const absolute = await h.service.authorizeRequest(scope('nobase'), {
      ...noRequest,
      endpoint: 'https://abs.example/x',
    });
    expect(absolute.url).toBe('https://abs.example/x');
    await expect(
      h.service.authorizeRequest(scope('nobase'), { ...noRequest, baseUrlOverride: 'file:///etc' }),
    ).rejects.toMatchObject({ code: 'invalid_request_url' });
  });

  it('sends credentials only to the API’s own origin: an absolute URL elsewhere goes without them', async () => {
    await h.service.importConnection({
      environmentId,
      integrationId: 'stripe',
      connectionId: 'c-origin',
      credentials: { type: 'API_KEY', apiKey: 'sk_test_origin' },
    });
    const ref = { environmentId, integrationId: 'stripe', connectionId: 'c-origin' };
    const sameOrigin = await h.service.authorizeRequest(ref, {
      ...noRequest,
      endpoint: 'https://api.stripe.com/v1/charges?starting_after=ch_1',
    });
    expect(sameOrigin.headers['Authorization']).toBe('Bearer sk_test_origin');
    const elsewhere = await h.service.authorizeRequest(ref, {
      ...noRequest,
      endpoint: 'https://files.example.net/export.csv',
      headers: { Accept: 'text/csv' },
    });
    expect(elsewhere.url).toBe('https://files.example.net/export.csv');
    expect(elsewhere.headers).toEqual({ Accept: 'text/csv' });
    expect(JSON.stringify({ url: elsewhere.url, headers: elsewhere.headers })).not.toContain('sk_test_origin');
  });

  it('never sends credentials to another host: not on an override, not through a copied header or query value', async () => {
    logScan.secret('query-key-elsewhere-77');
    await h.service.importConnection({
      environmentId,
      integrationId: 'query',
      connectionId: 'c-elsewhere',
      credentials: { type: 'API_KEY', apiKey: 'query-key-elsewhere-77' },
    });
    const ref = { environmentId, integrationId: 'query', connectionId: 'c-elsewhere' };
    for (const baseUrlOverride of [
      'https://evil.example',
      'http://api.query.example/v2', // the provider's host, but in clear: not its origin
      'https://api.query.example.evil.example',
      'https://api.query.example:8443',
    ]) {
      await expect(h.service.authorizeRequest(ref, { ...noRequest, baseUrlOverride })).rejects.toMatchObject({
        code: 'base_url_not_allowed',
        status: 403,
      });
    }
    // A redirect Location or a next-page link that repeats the key: the key is dropped, wherever it sits.
    const echoed = await h.service.authorizeRequest(ref, {
      ...noRequest,
      endpoint: 'https://evil.example/next?api_key=query-key-elsewhere-77&page=2&copy=xquery-key-elsewhere-77',
      headers: { 'X-Copied': 'query-key-elsewhere-77', Accept: 'application/json' },
    });
    expect(echoed.url).toBe('https://evil.example/next?page=2');
    expect(echoed.headers).toEqual({ Accept: 'application/json' });
    const home = await h.service.authorizeRequest(ref, { ...noRequest, endpoint: 'https://api.query.example/v2/x' });
    expect(home.url).toBe('https://api.query.example/v2/x?api_key=query-key-elsewhere-77');
  });

  it('takes base URL overrides per integration (a self-hosted instance)', async () => {
    await h.integrations.upsert(environmentId, {
      id: 'ghe',
      provider: 'github',
      provider_settings: { base_url: 'https://github.example.com/api/v3' },
    });
    await h.service.importConnection({
      environmentId,
      integrationId: 'ghe',
      connectionId: 'c1',
      credentials: { type: 'OAUTH2', access_token: 'ghe-token-12345' },
    });
    const request = await h.service.authorizeRequest(scope('ghe'), { ...noRequest, endpoint: '/user' });
    expect(request.url).toBe('https://github.example.com/api/v3/user');
    expect(request.headers['X-GitHub-Api-Version']).toBe('2022-11-28');
    await expect(
      h.integrations.upsert(environmentId, { id: 'ghe', provider: 'github', provider_settings: { base_url: 42 } }),
    ).rejects.toMatchObject({ code: 'invalid_provider_settings' });
  });

  it('refuses imports that do not fit, naming the problem, and keeps what was stored', async () => {
    const bad = [
      [
        { credentials: { type: 'BASIC', username: 'u', password: 'p' }, integrationId: 'stripe' },
        'credentials_type_mismatch',
      ],
      [
        { credentials: { type: 'OAUTH2', access_token: 't', expires_at: 'tomorrow' }, integrationId: 'zendesk' },
        'invalid_connection',
      ],
      [
        { credentials: { type: 'OAUTH2', access_token: 'tok-123456' }, integrationId: 'zendesk' },
        'missing_connection_config',
      ],
      [
        {
          credentials: { type: 'OAUTH2', access_token: 'tok-123456' },
          integrationId: 'zendesk',
          connection_config: { subdomain: 'evil.com/x?' },
        },
        'invalid_connection_config',
      ],
      [{ credentials: { type: 'API_KEY', apiKey: 'k' }, integrationId: 'unknown' }, 'unknown_integration'],
      [{ credentials: { type: 'NOPE' }, integrationId: 'stripe' }, 'invalid_connection'],
    ] as const;
    for (const [input, code] of bad) {
      await expect(
        h.service.importConnection({ environmentId, connectionId: 'c1', ...input } as never),
        code,
      ).rejects.toMatchObject({ code });
    }
    // The stripe connection imported above is untouched.
    const record = await h.service.getConnection(scope('stripe'));
    expect(record.credentials).toEqual({ type: 'API_KEY', apiKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc' });
    await expect(h.service.getConnection(scope('stripe', 'nobody'))).rejects.toMatchObject({
      code: 'unknown_connection',
      status: 404,
    });
  });

  it('imports OAuth 2 credentials with an expiry and refreshes nothing while valid', async () => {
    const expiresAt = new Date(Date.now() + 3600_000).toISOString();
    const record = await h.service.importConnection({
      environmentId,
      integrationId: 'github',
      connectionId: 'imported',
      credentials: {
        type: 'OAUTH2',
        access_token: 'gho_imported_1234',
        refresh_token: 'ghr_imported_5678',
        expires_at: expiresAt,
        raw: { scope: 'repo' },
      },
      metadata: { team: 'core' },
    });
    logScan.secret('gho_imported_1234', 'ghr_imported_5678');
    expect(record.credentials).toEqual({
      type: 'OAUTH2',
      access_token: 'gho_imported_1234',
      expires_at: expiresAt,
      raw: { scope: 'repo' },
    });
    const withRefresh = await h.service.getConnection(scope('github', 'imported'), { refreshToken: true });
    expect(withRefresh.credentials).toMatchObject({ refresh_token: 'ghr_imported_5678' });
    expect(withRefresh.metadata).toEqual({ team: 'core' });
  });

  it('reads, replaces and merges metadata; lists and deletes connections', async () => {
    const s = scope('github', 'imported');
    await h.service.setMetadata(s, { a: 1, nested: { b: [1, 2] } });
    await h.service.updateMetadata(s, { c: 'three' });
    await Promise.all([h.service.updateMetadata(s, { d: 4 }), h.service.updateMetadata(s, { e: 5 })]);
    expect(await h.service.getMetadata(s)).toEqual({ a: 1, nested: { b: [1, 2] }, c: 'three', d: 4, e: 5 });
    await h.service.setMetadata(s, { only: true });
    expect(await h.service.getMetadata(s)).toEqual({ only: true });
    await expect(h.service.setMetadata(s, [1, 2] as never)).rejects.toMatchObject({ code: 'invalid_metadata' });

    const listed = await h.service.listConnections(environmentId);
    expect(listed.map((c) => `${c.provider_config_key}/${c.connection_id}:${c.auth_mode}`)).toContain(
      'github/imported:OAUTH2',
    );
    expect(JSON.stringify(listed)).not.toContain('gho_imported_1234');
    expect(await h.service.deleteConnection(s)).toBe(true);
    expect(await h.service.deleteConnection(s)).toBe(false);
    await expect(h.integrations.delete(environmentId, 'stripe')).rejects.toMatchObject({
      code: 'integration_has_connections',
    });
    await h.integrations.delete(environmentId, 'stripe', { deleteConnections: true });
    await expect(h.service.getConnection(scope('stripe'))).rejects.toMatchObject({ code: 'unknown_connection' });
    await expect(h.integrations.get(environmentId, 'stripe')).rejects.toMatchObject({ code: 'unknown_integration' });
  });
});
