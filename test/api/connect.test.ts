/**
 * Connect sessions and the environment's opt-ins through the REST API (issue 16, finding 2: a
 * public-key link replaced another user's access token). The attacker knows the public key and the
 * victim's connection id; what matters is that the victim's credentials are unchanged afterwards.
 */
import { describe, expect } from 'vitest';
import { ServiceApiError } from '../../src/client/index.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { test as kit, withApiHarness, type ApiHarness } from '../kit/index.js';

const OAUTH = 'oa';
const OAUTH_PROVIDER = {
  'fake-oauth': {
    display_name: 'Fake OAuth 2',
    auth_mode: 'OAUTH2',
    authorization_url: 'https://auth.example.test/authorize',
    token_url: 'https://auth.example.test/token',
    base_url: 'https://api.example.test',
  },
};

/**
 * The API with an OAuth integration and the fixture one in both environments and alice's OAuth
 * connection (`api`), and environment A's public key (`publicKey`).
 */
const it = kit.extend<{ api: ApiHarness; publicKey: string }>({
  api: [
    async ({ db, upstream }, use) => withApiHarness({ database: db, upstream, providers: OAUTH_PROVIDER }, use, setUp),
    { scope: 'file' },
  ],
  publicKey: [async ({ api }, use) => use((await api.api.environment.getSettings()).public_key), { scope: 'file' }],
});

async function setUp(h: ApiHarness): Promise<void> {
  for (const client of [h.api, h.apiB]) {
    await client.integrations.create({
      unique_key: OAUTH,
      provider: 'fake-oauth',
      credentials: { type: 'OAUTH2', client_id: 'client-1', client_secret: 'client-secret-1' },
    });
    await client.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  }
  await h.api.connections.import({
    provider_config_key: OAUTH,
    connection_id: 'alice-oa',
    credentials: { type: 'OAUTH2', access_token: 'alice-access-token' },
  });
}

/** Opens a connect link the way a browser does (without following the redirect to the provider). */
async function open(h: ApiHarness, path: string): Promise<{ status: number; location: string | null; body: string }> {
  const response = await fetch(`${h.baseUrl}${path}`, { redirect: 'manual' });
  return { status: response.status, location: response.headers.get('location'), body: await response.text() };
}

async function apiError(promise: Promise<unknown>): Promise<ServiceApiError> {
  const error = await promise.then(
    () => undefined,
    (failure: unknown) => failure,
  );
  if (!(error instanceof ServiceApiError)) throw new Error(`expected an API error, got ${String(error)}`);
  return error;
}

const aliceToken = async (h: ApiHarness) => {
  const record = await h.api.connections.get({ connectionId: 'alice-oa', providerConfigKey: OAUTH });
  return record.credentials.type === 'OAUTH2' ? record.credentials.access_token : undefined;
};

describe('connect sessions', () => {
  it('POST /connect/sessions makes a single-use link bound to one connection', async ({ api: h }) => {
    const session = await h.api.connections.createConnectSession({
      provider_config_key: OAUTH,
      connection_id: 'bob-oa',
      end_user: { id: 'user-bob', display_name: 'Bob' },
      ttl_seconds: 600,
    });
    expect(session.token).toMatch(/^cs_/);
    expect(session.allow_reconnect).toBe(false);
    const expires = Date.parse(session.expires_at) - Date.now();
    expect(expires).toBeGreaterThan(590_000);
    expect(expires).toBeLessThanOrEqual(600_000);
    const link = new URL(session.connect_url);
    expect(link.pathname).toBe(`/oauth/connect/${OAUTH}`);
    expect(link.searchParams.get('connect_session_token')).toBe(session.token);

    const first = await open(h, `${link.pathname}${link.search}&connection_id=alice-oa`);
    expect(first.status).toBe(302);
    const authorize = new URL(first.location!);
    expect(authorize.origin).toBe('https://auth.example.test');
    expect(authorize.searchParams.get('state')).toBeTruthy();
    const second = await open(h, `${link.pathname}${link.search}`);
    expect(second.status).toBe(401);
    expect(second.body).toContain('already used');
    // The session is bound: the id in the link was ignored, alice's connection untouched.
    expect(await aliceToken(h)).toBe('alice-access-token');
  });

  it('refuses what it cannot honour, with a code', async ({ api: h }) => {
    // Thunks: each request starts when its turn comes, so no refusal waits unobserved.
    const cases: [() => Promise<unknown>, number, string][] = [
      [
        () => h.api.connections.createConnectSession({ provider_config_key: OAUTH, connection_id: 'alice-oa' }),
        409,
        'connection_exists',
      ],
      [
        () => h.api.connections.createConnectSession({ provider_config_key: 'nope', connection_id: 'x' }),
        404,
        'unknown_integration',
      ],
      [
        () =>
          h.api.connections.createConnectSession({ provider_config_key: OAUTH, connection_id: 'x', ttl_seconds: 5 }),
        400,
        'invalid_request',
      ],
      [
        () => h.api.connections.createConnectSession({ provider_config_key: OAUTH, connection_id: 'bad id' }),
        400,
        'invalid_connect_request',
      ],
      [
        () => h.anonymous.connections.createConnectSession({ provider_config_key: OAUTH, connection_id: 'x' }),
        401,
        'missing_authorization',
      ],
    ];
    for (const [call, status, code] of cases) {
      const error = await apiError(call());
      expect([error.status, error.code], error.message).toEqual([status, code]);
    }
    // An API-key integration has a session too: its link is the hosted connect page, where the end user types the key.
    const hosted = new URL(
      (await h.api.connections.createConnectSession({ provider_config_key: INTEGRATION, connection_id: 'x' }))
        .connect_url,
    );
    expect([hosted.origin, hosted.pathname]).toEqual([h.baseUrl, '/connect']);
    expect(hosted.searchParams.get('session')).toMatch(/^cs_/);
    // Opened at the OAuth route by mistake, it is refused there without being spent.
    const wrongRoute = await open(
      h,
      `/oauth/connect/${INTEGRATION}?${new URLSearchParams({ connect_session_token: hosted.searchParams.get('session')! }).toString()}`,
    );
    expect([wrongRoute.status, wrongRoute.body.includes('has no redirect flow')]).toEqual([400, true]);
    expect((await open(h, `${hosted.pathname}${hosted.search}`)).status).toBe(200);
    // With allow_reconnect the existing connection may be re-authorised.
    const reconnect = await h.api.connections.createConnectSession({
      provider_config_key: OAUTH,
      connection_id: 'alice-oa',
      allow_reconnect: true,
    });
    expect(reconnect.allow_reconnect).toBe(true);
  });

  it('a session of one environment is no use in another', async ({ api: h }) => {
    const inB = await h.apiB.connections.createConnectSession({
      provider_config_key: OAUTH,
      connection_id: 'alice-oa',
    });
    // Environment B has no alice-oa: its session starts B's flow, and A's connection is untouched.
    const opened = await open(h, new URL(inB.connect_url).pathname + new URL(inB.connect_url).search);
    expect(opened.status).toBe(302);
    expect(await aliceToken(h)).toBe('alice-access-token');
  });
});

describe('public-key connect links and the environment settings', () => {
  it('the hijack of a connection by its public key fails, with and without the opt-in', async ({
    api: h,
    publicKey,
  }) => {
    const attack = `/oauth/connect/${OAUTH}?public_key=${publicKey}&connection_id=alice-oa`;
    const refused = await open(h, attack);
    expect(refused.status).toBe(401);
    expect(refused.location).toBeNull();

    const settings = await h.api.environment.updateSettings({ allow_public_key_connect: true });
    expect(settings).toMatchObject({ allow_public_key_connect: true, allow_unsigned_webhooks: false });
    expect((await h.apiB.environment.getSettings()).allow_public_key_connect).toBe(false);
    try {
      const stillRefused = await open(h, attack);
      expect(stillRefused.status).toBe(409);
      expect(stillRefused.location).toBeNull();
      expect(stillRefused.body).toContain('already exists');
      const fresh = await open(h, `/oauth/connect/${OAUTH}?public_key=${publicKey}&connection_id=carol-oa`);
      expect(fresh.status).toBe(302);
    } finally {
      await h.api.environment.updateSettings({ allow_public_key_connect: false });
    }
    expect(await aliceToken(h)).toBe('alice-access-token');
    expect((await open(h, `/oauth/connect/${OAUTH}?public_key=${publicKey}&connection_id=dan-oa`)).status).toBe(401);
  });

  it('GET and PATCH /environment-settings, and the routes in the OpenAPI document', async ({ api: h }) => {
    const initial = await h.apiB.environment.getSettings();
    expect(initial).toEqual({
      name: h.envB.name,
      public_key: expect.stringMatching(/^pk_/),
      allow_public_key_connect: false,
      allow_unsigned_webhooks: false,
    });
    const bad = await apiError(
      h.apiB.call('PATCH', '/environment-settings', { body: { allow_public_key_connect: 'yes' } }),
    );
    expect([bad.status, bad.code]).toEqual([400, 'invalid_request']);
    const spec = (await h.api.openapi()) as { paths: Record<string, Record<string, unknown>> };
    expect(Object.keys(spec.paths['/connect/sessions'] ?? {})).toEqual(['post']);
    expect(Object.keys(spec.paths['/environment-settings'] ?? {}).sort()).toEqual(['get', 'patch']);
  });
});
