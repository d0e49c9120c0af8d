/**
 * Connecting from the dashboard and on the hosted connect page, in a real browser (Debian's Chromium,
 * headless, through Playwright) against the real service of the API harness, with a fake API and a
 * fake OAuth 2 provider on 127.0.0.1. The dashboard creates API-key and Basic connections (the fake API
 * then sees the credentials through the proxy) and starts an OAuth connect that ends with a stored
 * token; an application's connect session opens the hosted page, where an end user enters an API key
 * (a mistake does not spend the link), or continues to the OAuth provider; a used or expired link is
 * refused, and the token reaches neither the access log nor a referrer. Screenshots go to
 * test/dashboard/screenshots/.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { BrowserContext, Page } from 'playwright-core';
import { startFakeProvider, type FakeProvider } from '../kit/oauthProvider.js';
import { fakeOAuth2Provider } from '../kit/connections.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { openBrowser } from './browser.js';
import { json } from '../kit/upstream.js';

const screenshots = fileURLToPath(new URL('./screenshots/', import.meta.url));
const KEYED = 'keyed';
const BASIC = 'basic-api';
const OAUTH = 'oauth-app';

let h: ApiHarness;
let context: BrowserContext;
let page: Page;
let fake: FakeProvider;
let browserMissing: Error | undefined;
const pageErrors: string[] = [];

async function shoot(target: Page, name: string) {
  await target.screenshot({ path: `${screenshots}${name}.png`, fullPage: true });
}

/** What the fake API saw in Authorization, asked through the service's proxy as the application would. */
async function proxiedAuthorization(integration: string, connectionId: string): Promise<string | undefined> {
  const response = await fetch(`${h.baseUrl}/proxy/whoami`, {
    headers: {
      authorization: `Bearer ${h.envA.secretKey}`,
      'connection-id': connectionId,
      'provider-config-key': integration,
    },
  });
  expect(response.status).toBe(200);
  return ((await response.json()) as { authorization?: string }).authorization;
}

beforeAll(async () => {
  const browser = await openBrowser(screenshots);
  if (browser instanceof Error) {
    browserMissing = browser;
    return;
  }
  ({ context, page } = browser);
  fake = await startFakeProvider({ clientId: 'dash-client', clientSecret: 'dash-secret-7f1e', clientAuth: 'post' });
  h = await startApiHarness({
    providers: {
      'fake-basic': {
        display_name: 'Fake Basic API',
        docs: 'https://example.com/docs',
        auth_mode: 'BASIC',
        base_url: 'http://placeholder.invalid',
      },
      'fake-oauth': fakeOAuth2Provider(fake.url),
    },
  });
  h.fake.setHandler((request, response) =>
    json(response, 200, { authorization: request.headers.authorization, path: request.url }),
  );
  await h.api.integrations.create({ unique_key: KEYED, provider: 'fake-api' });
  await h.api.integrations.create({
    unique_key: BASIC,
    provider: 'fake-basic',
    provider_settings: { base_url: `${h.fake.url}/api` },
  });
  await h.api.integrations.create({
    unique_key: OAUTH,
    provider: 'fake-oauth',
    credentials: { type: 'OAUTH2', client_id: 'dash-client', client_secret: 'dash-secret-7f1e' },
  });
  page.setDefaultTimeout(15_000);
  context.on('page', (opened) => opened.on('pageerror', (error) => pageErrors.push(error.message)));
  page.on('pageerror', (error) => pageErrors.push(error.message));
}, 180_000);

beforeEach(() => {
  if (browserMissing) throw browserMissing;
});

afterEach(() => {
  expect(pageErrors.splice(0)).toEqual([]);
});

describe('connecting from the dashboard', () => {
  it('signs in', async () => {
    await page.goto(`${h.baseUrl}/dashboard/`);
    await page.getByLabel('Environment secret key').fill(h.envA.secretKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.getByRole('heading', { level: 1, name: 'Integrations' }).waitFor();
  });

  it('creates an API-key connection whose key the external API then receives', async () => {
    await page.goto(`${h.baseUrl}/dashboard/#/connections/${KEYED}`);
    await page.getByRole('heading', { name: 'New connection' }).waitFor();
    expect(await page.getByText(`No connections of ${KEYED} yet.`).isVisible()).toBe(true);
    // A mistake is answered with the API's message, in the form.
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: /connection_id|API key|Invalid/i })
      .waitFor();
    await shoot(page, 'connect-api-key-refused');

    await page.getByLabel('Connection id').fill('acme');
    await page.getByLabel('API key').fill('key-acme-123');
    expect(await page.getByLabel('API key').getAttribute('type')).toBe('password');
    await shoot(page, 'connect-api-key-form');
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Connection acme' }).waitFor();
    // The connection page never shows the key.
    expect(await page.content()).not.toContain('key-acme-123');
    expect(await proxiedAuthorization(KEYED, 'acme')).toBe('Bearer key-acme-123');
  });

  it('creates a Basic connection', async () => {
    await page.goto(`${h.baseUrl}/dashboard/#/connections/${BASIC}`);
    await page.getByLabel('Connection id').fill('ops');
    await page.getByLabel('Username', { exact: true }).fill('ops-user');
    await page.getByLabel('Password (optional)').fill('s3cret pass');
    await shoot(page, 'connect-basic-form');
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await page.getByRole('heading', { level: 1, name: 'Connection ops' }).waitFor();
    const expected = `Basic ${Buffer.from('ops-user:s3cret pass').toString('base64')}`;
    expect(await proxiedAuthorization(BASIC, 'ops')).toBe(expected);
  });

  it('starts an OAuth connect whose link ends with a stored token', async () => {
    await page.goto(`${h.baseUrl}/dashboard/#/connections/${OAUTH}`);
    await page.getByLabel('Connection id').fill('olga');
    expect(await page.getByRole('button', { name: 'Connect', exact: true }).count()).toBe(0);
    await page.getByRole('button', { name: 'Start OAuth connect' }).click();
    const link = page.getByRole('link', { name: 'Open the connect page' });
    await link.waitFor();
    await shoot(page, 'connect-oauth-link');
    const [opened] = await Promise.all([context.waitForEvent('page'), link.click()]);
    await opened.getByRole('heading', { name: 'Connection established' }).waitFor();
    await shoot(opened, 'connect-oauth-done');
    await opened.close();
    const record = await h.api.connections.get({ connectionId: 'olga', providerConfigKey: OAUTH });
    const token = (record.credentials as { access_token?: string }).access_token;
    expect(token !== undefined && fake.state.accessTokens.has(token)).toBe(true);
  });
});

describe('the hosted connect page', () => {
  const sessionFor = (integration: string, connectionId: string) =>
    h.api.connections.createConnectSession({
      provider_config_key: integration,
      connection_id: connectionId,
      end_user: { id: `user-${connectionId}` },
    });

  it('lets an end user enter an API key; a mistake keeps the link usable; then it is spent', async () => {
    const session = await sessionFor(KEYED, 'end-user-1');
    const response = await page.goto(session.connect_url);
    expect(response?.status()).toBe(200);
    const headers = response!.headers();
    expect(headers['referrer-policy']).toBe('no-referrer');
    expect(headers['cache-control']).toBe('no-store');
    expect(headers['content-security-policy']).toContain("default-src 'none'");
    await page.getByRole('heading', { name: 'Connect Fake API' }).waitFor();
    // Nothing on the page leads elsewhere: no link, no resource, the token only in the form's body.
    expect(await page.locator('a, script, img, link, iframe').count()).toBe(0);
    await shoot(page, 'hosted-connect-form');

    await page.getByRole('button', { name: 'Connect' }).click({ noWaitAfter: true });
    // `required` stops an empty submit in the browser; the server says the same to a plain POST.
    const empty = await fetch(`${h.baseUrl}/connect`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ session: session.token }).toString(),
    });
    expect(empty.status).toBe(400);
    expect(await empty.text()).toContain('Fill in: API key.');

    await page.getByLabel('API key').fill('end-user-key-9');
    await page.getByRole('button', { name: 'Connect' }).click();
    await page.getByRole('heading', { name: 'Connection established' }).waitFor();
    await shoot(page, 'hosted-connect-done');
    expect(await proxiedAuthorization(KEYED, 'end-user-1')).toBe('Bearer end-user-key-9');
    const listed = await h.api.connections.list({ connectionId: 'end-user-1' });
    expect(listed.connections[0]?.tags).toMatchObject({ end_user_id: 'user-end-user-1' });

    await page.goto(session.connect_url);
    await page.getByText('this connect link was already used').waitFor();
    await shoot(page, 'hosted-connect-used');
    // Nor does a replayed form connect anything.
    const replay = await fetch(`${h.baseUrl}/connect`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ session: session.token, 'credentials.apiKey': 'attacker-key' }).toString(),
    });
    expect(replay.status).toBe(401);
    expect(await proxiedAuthorization(KEYED, 'end-user-1')).toBe('Bearer end-user-key-9');

    // The access log has the path only.
    expect(h.logs.join('\n')).not.toContain(session.token);
    expect(h.logs.some((line) => line.includes('"path":"/connect"'))).toBe(true);
  });

  it('refuses an expired link, and one that never existed', async () => {
    const session = await sessionFor(KEYED, 'end-user-2');
    const hash = createHash('sha256').update(session.token).digest('hex');
    await h.pool.query("UPDATE connect_sessions SET expires_at = now() - interval '1 minute' WHERE token_hash = $1", [
      hash,
    ]);
    const expired = await page.goto(session.connect_url);
    expect(expired?.status()).toBe(401);
    await page.getByText('this connect link expired').waitFor();
    const forged = await page.goto(`${h.baseUrl}/connect?session=cs_${'A'.repeat(43)}`);
    expect(forged?.status()).toBe(401);
    await page.getByText('not valid').waitFor();
    const { rows } = await h.pool.query("SELECT 1 FROM connections WHERE connection_id = 'end-user-2'");
    expect(rows).toEqual([]);
  });

  it('continues an OAuth session at the provider and back', async () => {
    const session = await sessionFor(OAUTH, 'end-user-3');
    const hosted = `${h.baseUrl}/connect?session=${session.token}`;
    await page.goto(hosted);
    await page.getByRole('button', { name: `Continue to ${'Fake OAuth 2'}` }).click();
    await page.getByRole('heading', { name: 'Connection established' }).waitFor();
    const record = await h.api.connections.get({ connectionId: 'end-user-3', providerConfigKey: OAUTH });
    expect((record.credentials as { type: string }).type).toBe('OAUTH2');
    await page.goto(hosted);
    await page.getByText('already used').waitFor();
  });
});
