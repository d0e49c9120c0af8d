/**
 * HOSTILE s25 on the API (real stack): what an environment's secret key, an end user with a connect
 * link, or a provider's name can reach. Tests marked FINDING failed before the fix they name.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { CONNECT_FORM_ATTEMPTS } from '../../src/api/connectPage.js';
import { metricsRegistry, tokenRefreshFailures } from '../../src/metrics/index.js';
import { fakeOAuthProvider, json, startApiHarness, startFakeServer, type ApiHarness } from './helpers/harness.js';

const OAUTH = 'oa';
const CLIENT_SECRET = 'integration-client-secret-s25';
const REFRESH_TOKEN = 'alice-refresh-token-s25';
let h: ApiHarness;
let tokens: Awaited<ReturnType<typeof startFakeServer>>;
let attacker: Awaited<ReturnType<typeof startFakeServer>>;
let guessed: Awaited<ReturnType<typeof startFakeServer>>;
const alice = { connectionId: 'alice-s25', providerConfigKey: OAUTH };

beforeAll(async () => {
  tokens = await startFakeServer((_request, response) =>
    json(response, 200, { access_token: 'alice-access-2', refresh_token: REFRESH_TOKEN, expires_in: 3600 }),
  );
  attacker = await startFakeServer((_request, response) =>
    json(response, 200, { access_token: 'stolen', expires_in: 3600 }),
  );
  guessed = await startFakeServer((_request, response) =>
    json(response, 401, { error: 'invalid_client', error_description: 'wrong client secret' }),
  );
  h = await startApiHarness({
    providers: {
      ...fakeOAuthProvider(tokens.url),
      'fake-cc': {
        display_name: 'Fake CC',
        auth_mode: 'OAUTH2_CC',
        token_url: `${guessed.url}/token`,
        base_url: `${guessed.url}/api`,
      },
    },
  });
  await h.api.integrations.create({
    unique_key: OAUTH,
    provider: 'fake-oauth',
    display_name: '<img src=x onerror=alert(1)>Evil "Corp"',
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
}, 120_000);

describe('HOSTILE s25: the API', () => {
  it('FINDING (fixed in src/connections/integrationStore.ts): an environment key cannot re-point the token URL to read the integration’s client secret', async () => {
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

  it('the connect page shows a hostile integration name as text, keeps its token out of logs and metrics', async () => {
    const session = await h.api.connections.createConnectSession({
      provider_config_key: OAUTH,
      connection_id: 'bob-s25',
      end_user: { id: 'bob' },
      ttl_seconds: 600,
    });
    const page = await fetch(`${h.baseUrl}/connect?session=${session.token}`);
    const html = await page.text();
    expect(page.status).toBe(200);
    expect(html).not.toContain('<img src=x');
    expect(html).toContain('&#60;img src=x onerror=alert(1)&#62;Evil &#34;Corp&#34;');
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('content-security-policy')).toContain("default-src 'none'");
    // An unknown token's page does not echo it.
    const forged = await fetch(`${h.baseUrl}/connect?session=cs_${'A'.repeat(43)}<script>`);
    expect(await forged.text()).not.toContain('<script>');
    const metrics = await metricsRegistry.metrics();
    expect(h.logs.join('\n')).not.toContain(session.token);
    // The access log names connections by path (not secrets); metrics never do.
    expect(metrics).not.toContain(session.token);
    expect(metrics).not.toContain('bob-s25');
    expect(metrics).not.toContain(alice.connectionId);
    expect(metrics).toMatch(/route="\/connections\/:connection_id\/authorize"/);
  });

  it('FINDING (fixed in src/metrics/index.ts codeLabel): a token endpoint cannot grow the metric series with a new error code each time', async () => {
    let answered = 0;
    const rotating = await startFakeServer((_request, response) =>
      json(response, 500, { error: `code_${++answered}_x` }),
    );
    await h.api.integrations.create({
      unique_key: 'oa-codes',
      provider: 'fake-oauth',
      provider_settings: { token_url: `${rotating.url}/token` },
      credentials: { type: 'OAUTH2', client_id: 'client-2', client_secret: 'client-secret-2' },
    });
    const carol = { connectionId: 'carol-s25', providerConfigKey: 'oa-codes' };
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

  it('FINDING (fixed in src/api/connectPage.ts): a connect link is not an unlimited oracle for guessing a client secret at the provider', async () => {
    // The hosted page checks minted credentials (OAUTH2_CC, JWT, APP) at the provider's token endpoint
    // before spending the session, so that a typing mistake does not burn the link. Nothing bounds the
    // mistakes: whoever holds the link (an end user, or anyone it leaked to) makes the service send
    // token requests for as long as the session lives (its TTL, up to what POST /connect/sessions allows).
    await h.api.integrations.create({ unique_key: 'cc', provider: 'fake-cc' });
    const session = await h.api.connections.createConnectSession({
      provider_config_key: 'cc',
      connection_id: 'dave-s25',
      end_user: { id: 'dave' },
      ttl_seconds: 600,
    });
    const statuses: number[] = [];
    for (let attempt = 0; attempt < 25; attempt++) {
      const response = await fetch(`${h.baseUrl}/connect`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({
          session: session.token,
          'credentials.client_id': 'dave-client',
          'credentials.client_secret': `guess-${attempt}`,
        }).toString(),
        redirect: 'manual',
      });
      statuses.push(response.status);
      await response.text();
    }
    expect(statuses.slice(0, 3).every((status) => status >= 400)).toBe(true);
    // At most CONNECT_FORM_ATTEMPTS guesses reach the provider; then the link is spent, right
    // credentials or not.
    expect(guessed.requests.length).toBe(CONNECT_FORM_ATTEMPTS);
    const after = await fetch(`${h.baseUrl}/connect?session=${session.token}`);
    expect(after.status).toBe(401);
    expect(await after.text()).toContain('already used');
  });
});
