/**
 * The hosted connect page against a hostile integration name and an end user who guesses (real stack):
 * what it shows, what it logs, and how many guesses reach the provider. Tests marked FINDING failed
 * before the fix they name.
 */
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, withFakeUpstream, type ApiHarness, type FakeUpstream } from '../kit/index.js';
import { CONNECT_FORM_ATTEMPTS } from '../../src/api/connectPage.js';
import { metricsRegistry } from '../../src/metrics/index.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { fakeOAuthProvider } from '../kit/api.js';
import { json } from '../kit/upstream.js';

const OAUTH = 'oa';
const alice = { connectionId: 'alice-1', providerConfigKey: INTEGRATION };

/**
 * Where the OAuth provider of the hostile-named integration lives (`oauthOrigin`; the page never calls
 * it), a client-credentials token URL that refuses every secret (`guessed`), and the API with both
 * integrations and alice's connection (`api`).
 */
const it = kit.extend<{ oauthOrigin: FakeUpstream; guessed: FakeUpstream; api: ApiHarness }>({
  oauthOrigin: [
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from this pattern
    async ({}, use) => withFakeUpstream(undefined, use),
    { scope: 'file' },
  ],
  guessed: [
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from this pattern
    async ({}, use) =>
      withFakeUpstream(
        (_request, response) =>
          json(response, 401, { error: 'invalid_client', error_description: 'wrong client secret' }),
        use,
      ),
    { scope: 'file' },
  ],
  api: [
    async ({ db, upstream, oauthOrigin, guessed }, use) =>
      withApiHarness(
        {
          database: db,
          upstream,
          providers: {
            ...fakeOAuthProvider(oauthOrigin.url),
            'fake-cc': {
              display_name: 'Fake CC',
              auth_mode: 'OAUTH2_CC',
              token_url: `${guessed.url}/token`,
              base_url: `${guessed.url}/api`,
            },
          },
        },
        use,
        setUp,
      ),
    { scope: 'file' },
  ],
});

async function setUp(h: ApiHarness): Promise<void> {
  await h.api.integrations.create({
    unique_key: OAUTH,
    provider: 'fake-oauth',
    display_name: '<img src=x onerror=alert(1)>Evil "Corp"',
    credentials: { type: 'OAUTH2', client_id: 'client-1', client_secret: 'client-secret-1' },
  });
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: alice.connectionId,
    credentials: { type: 'API_KEY', apiKey: 'alice-api-key' },
  });
  // A connection-scoped request, so that the metrics hold a route that names a connection.
  await h.api.connections.authorizeRequest(alice, { method: 'GET', endpoint: '/issues' });
}

describe('the hosted connect page', () => {
  it('the connect page shows a hostile integration name as text, keeps its token out of logs and metrics', async ({
    api: h,
  }) => {
    const session = await h.api.connections.createConnectSession({
      provider_config_key: OAUTH,
      connection_id: 'bob-1',
      end_user: { id: 'bob-1' },
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
    expect(metrics).not.toContain('bob-1');
    expect(metrics).not.toContain(alice.connectionId);
    expect(metrics).toMatch(/route="\/connections\/:connection_id\/authorize"/);
  });

  it('a connect link is not an unlimited oracle for guessing a client secret at the provider', async ({
    api: h,
    guessed,
  }) => {
    // FINDING (fixed in src/api/connectPage.ts): this test failed before the fix.
    // The hosted page checks minted credentials (OAUTH2_CC, JWT, APP) at the provider's token endpoint
    // before spending the session, so that a typing mistake does not burn the link. Nothing bounds the
    // mistakes: whoever holds the link (an end user, or anyone it leaked to) makes the service send
    // token requests for as long as the session lives (its TTL, up to what POST /connect/sessions allows).
    await h.api.integrations.create({ unique_key: 'cc', provider: 'fake-cc' });
    const session = await h.api.connections.createConnectSession({
      provider_config_key: 'cc',
      connection_id: 'dave',
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
