/**
 * Connections in Postgres as request authorization reads them (the stored credentials, connection
 * settings and integration settings reaching the request), import of existing credentials, metadata,
 * listing and deleting, and the errors of each. The authorizer's own logic is unit-tested beside it
 * (src/connections/requestAuthorizer.test.ts), the provider catalog's in src/connections/providers/.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import type { ConnectionScope } from '../../src/connections/types.js';
import { test as kit, withConnections, type ConnectionsHarness } from '../kit/index.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();
const noRequest = { method: 'GET', endpoint: '/v1/things', headers: {}, params: {} };

/** A catalog file of two custom providers, beside the built-in ones. */
function customProviders(): string {
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
  return file;
}

/**
 * The connections area with the custom providers (`connections`), its environment `dev` with one
 * integration per provider (`environmentId`), and `scope`: a connection of that environment.
 */
const it = kit.extend<{
  connections: ConnectionsHarness;
  environmentId: string;
  scope: (integrationId: string, connectionId?: string) => ConnectionScope;
}>({
  connections: [
    async ({ db }, use) => withConnections({ db: db.pool, providersFile: customProviders() }, use),
    { scope: 'file' },
  ],
  environmentId: [
    async ({ connections }, use) => {
      const environmentId = (await connections.environments.create({ name: 'dev' })).environment.id;
      for (const [id, provider] of [
        ['stripe', 'stripe'],
        ['query', 'query-key-api'],
        ['twilio', 'twilio'],
        ['zendesk', 'zendesk'],
        ['nobase', 'no-base-api'],
        ['github', 'github'],
      ] as const) {
        await connections.integrations.upsert(environmentId, { id, provider });
      }
      await use(environmentId);
    },
    { scope: 'file' },
  ],
  scope: [
    async ({ environmentId }, use) =>
      use((integrationId, connectionId = 'c1') => ({ environmentId, integrationId, connectionId })),
    { scope: 'file' },
  ],
});

describe('authorizing requests', () => {
  // The authorizer's logic, every mode and the host policy, is unit-tested beside it
  // (src/connections/requestAuthorizer.test.ts); these check that what is stored reaches it.
  it('authorizes with the stored credentials, the connection settings and the integration settings', async ({
    connections: h,
    environmentId,
    scope,
  }) => {
    logScan.secret('sk_test_4eC39HqLyjWDarjtT1zdp7dc');
    await h.service.importConnection({
      environmentId,
      integrationId: 'stripe',
      connectionId: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'sk_test_4eC39HqLyjWDarjtT1zdp7dc' },
    });
    const request = await h.service.authorizeRequest(scope('stripe'), { ...noRequest, params: { limit: 3 } });
    const { secrets, ...sent } = request;
    expect(sent).toEqual({
      method: 'GET',
      url: 'https://api.stripe.com/v1/things?limit=3',
      headers: { Authorization: 'Bearer sk_test_4eC39HqLyjWDarjtT1zdp7dc' },
    });
    expect(secrets).toContain('sk_test_4eC39HqLyjWDarjtT1zdp7dc');

    logScan.secret('query-key-123456');
    await h.service.importConnection({
      environmentId,
      integrationId: 'query',
      connectionId: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'query-key-123456' },
    });
    const query = await h.service.authorizeRequest(scope('query'), { ...noRequest, endpoint: 'items' });
    expect(query.url).toBe('https://api.query.example/v2/items?api_key=query-key-123456');

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

    await expect(h.service.authorizeRequest(scope('twilio'), noRequest)).rejects.toMatchObject({
      code: 'unknown_connection',
      status: 404,
    });
  });

  it("takes an integration's stored provider settings: allowed hosts, a self-hosted base URL", async ({
    connections: h,
    environmentId,
    scope,
  }) => {
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

  it('refuses imports that do not fit, naming the problem, and keeps what was stored', async ({
    connections: h,
    environmentId,
    scope,
  }) => {
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

  it('imports OAuth 2 credentials with an expiry and refreshes nothing while valid', async ({
    connections: h,
    environmentId,
    scope,
  }) => {
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

  it('reads, replaces and merges metadata; lists and deletes connections', async ({
    connections: h,
    environmentId,
    scope,
  }) => {
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
