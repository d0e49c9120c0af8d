/**
 * The token refresh against an environment key that edits its integration and a token endpoint that
 * answers what it likes (real stack): where the integration's client secret may be sent, and what the
 * endpoint's answers can grow. Tests marked FINDING failed before the fix they name.
 */
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, withFakeUpstream, type ApiHarness, type FakeUpstream } from '../kit/index.js';
import { tokenRefreshFailures } from '../../src/metrics/index.js';
import { fakeOAuthProvider } from '../kit/api.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const OAUTH = 'oa';
const CLIENT_SECRET = 'integration-client-secret-7d41';
const REFRESH_TOKEN = 'alice-refresh-token-7d41';
const alice = { connectionId: 'alice', providerConfigKey: OAUTH };

/**
 * The integration's token endpoint (`tokens`), one an attacker runs (`attacker`), and the API with the
 * OAuth integration and alice's expired connection (`api`).
 */
const it = kit.extend<{ tokens: FakeUpstream; attacker: FakeUpstream; api: ApiHarness }>({
  tokens: [
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from this pattern
    async ({}, use) =>
      withFakeUpstream(
        (_request, response) =>
          json(response, 200, { access_token: 'alice-access-2', refresh_token: REFRESH_TOKEN, expires_in: 3600 }),
        use,
      ),
    { scope: 'file' },
  ],
  attacker: [
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from this pattern
    async ({}, use) =>
      withFakeUpstream((_request, response) => json(response, 200, { access_token: 'stolen', expires_in: 3600 }), use),
    { scope: 'file' },
  ],
  api: [
    async ({ db, upstream, tokens }, use) =>
      withApiHarness({ database: db, upstream, providers: fakeOAuthProvider(tokens.url) }, use, setUp),
    { scope: 'file' },
  ],
});

async function setUp(h: ApiHarness): Promise<void> {
  await h.api.integrations.create({
    unique_key: OAUTH,
    provider: 'fake-oauth',
    credentials: { type: 'OAUTH2', client_id: 'client-1', client_secret: CLIENT_SECRET },
  });
  await h.api.connections.import({
    provider_config_key: OAUTH,
    connection_id: alice.connectionId,
    credentials: {
      type: 'OAUTH2',
      access_token: 'alice-access-1',
      refresh_token: REFRESH_TOKEN,
      expires_at: new Date(Date.now() - 60_000).toISOString(),
    },
  });
}

describe('the token refresh sends the client secret only where its owner said, and bounds what a token endpoint grows', () => {
  it('an environment key cannot re-point the token URL to read the integration’s client secret', async ({
    api: h,
    tokens,
    attacker,
  }) => {
    // FINDING (fixed in src/connections/integrationStore.ts): this test failed before the fix.
    // The API never returns the client secret (`has_client_secret` only)...
    const shown = await h.api.integrations.get(OAUTH, ['credentials']);
    expect(JSON.stringify(shown)).not.toContain(CLIENT_SECRET);
    // ...but PATCH kept the stored secret while moving token_url to another host: the next refresh
    // (here the one POST /connections/:id/authorize makes) sent client_id and client_secret there. A
    // leaked environment key so became the OAuth app's secret, which rotating the key does not revoke.
    const moved = await h.api.integrations
      .update(OAUTH, { provider_settings: { token_url: `${attacker.url}/token` } })
      .then(
        () => ({ status: 200, code: 'moved' }),
        (error: { status: number; code: string }) => ({ status: error.status, code: error.code }),
      );
    await h.api.connections
      .authorizeRequest(alice, { method: 'GET', endpoint: '/issues' })
      .catch((error: unknown) => error);
    expect(attacker.requests.map((request) => request.body).join('\n')).not.toContain(CLIENT_SECRET);
    expect(attacker.requests).toEqual([]);
    expect(moved).toEqual({ status: 400, code: 'client_secret_required' });
    // Settings that do not move the secret's destination still change without it.
    await h.api.integrations.update(OAUTH, { provider_settings: { base_url: `${tokens.url}/v2` } });
    // With the secret given again the move is the owner's decision, and allowed.
    await h.api.integrations.update(OAUTH, {
      provider_settings: { token_url: `${tokens.url}/token2` },
      credentials: { type: 'OAUTH2', client_id: 'client-1', client_secret: CLIENT_SECRET },
    });
    await h.api.integrations.update(OAUTH, {
      provider_settings: {},
      credentials: { type: 'OAUTH2', client_id: 'client-1', client_secret: CLIENT_SECRET },
    });
  });

  it('a token endpoint cannot grow the metric series with a new error code each time', async ({ api: h }) => {
    // FINDING (fixed in src/metrics/index.ts codeLabel): this test failed before the fix.
    let answered = 0;
    const rotating = await startFakeUpstream((_request, response) =>
      json(response, 500, { error: `code_${++answered}_x` }),
    );
    await h.api.integrations.create({
      unique_key: 'oa-codes',
      provider: 'fake-oauth',
      provider_settings: { token_url: `${rotating.url}/token` },
      credentials: { type: 'OAUTH2', client_id: 'client-2', client_secret: 'client-secret-2' },
    });
    const carol = { connectionId: 'carol', providerConfigKey: 'oa-codes' };
    await h.api.connections.import({
      provider_config_key: 'oa-codes',
      connection_id: carol.connectionId,
      credentials: {
        type: 'OAUTH2',
        access_token: 'carol-access-1',
        refresh_token: 'carol-refresh-1',
        expires_at: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    for (let attempt = 0; attempt < 5; attempt++) {
      await h.api.connections
        .authorizeRequest(carol, { method: 'GET', endpoint: '/issues' })
        .catch((error: unknown) => error);
    }
    expect(answered).toBeGreaterThanOrEqual(2);
    const { values } = await tokenRefreshFailures.get();
    const codes = values.filter((value) => value.labels.integration === 'oa-codes').map((value) => value.labels.code);
    expect(codes).toEqual(['other']);
  });
});
