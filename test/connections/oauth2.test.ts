/**
 * The OAuth 2 life of a connection, end to end against a fake provider on 127.0.0.1: connect through
 * the routes, callback, token exchange with PKCE, use, expiry and refresh, concurrent refresh from two
 * "processes" (two pools, two service instances), and a revoked grant. Every log line is scanned for
 * secrets at the end.
 */
import { describe, expect, it, beforeAll } from 'vitest';
import { isServiceError, type ServiceError } from '../../src/errors.js';
import type { ConnectionScope } from '../../src/connections/types.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { tokenRefreshFailures } from '../../src/metrics/index.js';
import { useDatabase } from '../kit/db.js';
import { startFakeProvider, type FakeProvider } from '../kit/oauthProvider.js';
import { fakeOAuth2Provider, startHarness, type Harness } from '../kit/connections.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();
const MINUTE = 60_000;

/** A clock the test moves forward, shared by every service instance of the file. */
let clockOffsetMs = 0;
const now = (): Date => new Date(Date.now() + clockOffsetMs);

async function caught(promise: Promise<unknown>): Promise<ServiceError> {
  try {
    await promise;
  } catch (error) {
    if (isServiceError(error)) return error;
    throw error;
  }
  throw new Error('expected a ServiceError, got success');
}

describe('OAuth 2 connections end to end', () => {
  let fake: FakeProvider;
  let h: Harness;
  let environmentId: string;
  let publicKey: string;
  let dbUrl: string;
  let db: Pool;
  const saved: string[] = [];
  const clientSecret = 'client-secret-0f9a8b7c6d5e';

  const scope = (connectionId: string): ConnectionScope => ({ environmentId, integrationId: 'fake-app', connectionId });
  /** A connect link through a connect session, as the application's backend makes one. */
  const connectUrl = (connectionId: string, extra = '', allowReconnect = false): Promise<string> =>
    h.connectLink({ environmentId, integrationId: 'fake-app', connectionId, allowReconnect }, extra);
  const publicKeyUrl = (connectionId: string, extra = ''): string =>
    `${h.appUrl}/oauth/connect/fake-app?public_key=${publicKey}&connection_id=${connectionId}${extra}`;

  /** Moves the clock to `minutesLeft` before the connection's token expires. */
  async function travelToExpiry(connectionId: string, minutesLeft: number): Promise<void> {
    const record = await h.service.getConnection(scope(connectionId));
    if (record.credentials.type !== 'OAUTH2') throw new Error('expected OAUTH2');
    clockOffsetMs = Date.parse(record.credentials.expires_at!) - Date.now() - minutesLeft * MINUTE;
  }

  beforeAll(async () => {
    const { pool, url } = await useDatabase();
    dbUrl = url;
    db = pool;
    fake = await startFakeProvider({ clientId: 'client-1', clientSecret, clientAuth: 'basic' });
    h = await startHarness({
      db: pool,
      now,
      onConnectionSaved: async (event) => {
        saved.push(`${event.scope.connectionId}:${event.created ? 'created' : 'updated'}`);
        // A failing hook must not undo or fail the connect.
        if (event.scope.connectionId === 'bob' && !event.created) throw new Error('sync scheduler down');
        await Promise.resolve();
      },
      extraProviders: {
        'fake-oauth2': fakeOAuth2Provider(fake.url, {
          token_request_auth_method: 'client_secret_basic',
          default_scopes: ['read'],
          connection_config: { team: { pattern: '^[a-z]+$', optional: true } },
        }),
      },
    });
    const created = await h.environments.create({ name: 'dev' });
    environmentId = created.environment.id;
    publicKey = created.environment.publicKey;
    logScan.secret(created.secretKey, clientSecret);
    await h.integrations.upsert(environmentId, {
      id: 'fake-app',
      provider: 'fake-oauth2',
      oauth_client_id: 'client-1',
      oauth_client_secret: clientSecret,
      oauth_scopes: ['write'],
    });
  });

  it('connects through the routes: PKCE, state, token exchange, stored token response and expires_at', async () => {
    const page = await h.browse(await connectUrl('alice', '&connection_config[team]=blue'));
    expect(page.status, page.body).toBe(200);
    expect(page.body).toContain('Connection established');
    expect(page.hops[0]).toMatch(new RegExp(`^${fake.url}/oauth2/authorize\\?`));

    const authorize = fake.state.lastAuthorize!;
    expect(authorize.get('response_type')).toBe('code');
    expect(authorize.get('redirect_uri')).toBe(`${h.appUrl}/oauth/callback`);
    expect(authorize.get('scope')).toBe('read write');
    expect(authorize.get('code_challenge_method')).toBe('S256');
    expect(authorize.get('state')!.length).toBeGreaterThanOrEqual(43);

    const exchange = fake.state.tokenRequests.at(-1)!;
    expect(exchange.grantType).toBe('authorization_code');
    expect(exchange.clientAuth).toBe('basic');
    expect(exchange.body['code_verifier']).toMatch(/^[A-Za-z0-9_-]{43}$/);

    const record = await h.service.getConnection(scope('alice'), { refreshToken: true });
    expect(record.provider_config_key).toBe('fake-app');
    expect(record.connection_id).toBe('alice');
    expect(record.connection_config).toEqual({ team: 'blue' });
    expect(typeof record.id).toBe('number');
    expect(record.account_id).toBe(0);
    expect(record.metadata).toEqual({});
    const credentials = record.credentials;
    if (credentials.type !== 'OAUTH2') throw new Error(`expected OAUTH2, got ${credentials.type}`);
    expect(fake.state.accessTokens.has(credentials.access_token)).toBe(true);
    expect(fake.state.refreshTokens.has(credentials.refresh_token!)).toBe(true);
    expect(credentials.raw['token_type']).toBe('Bearer');
    expect(Date.parse(credentials.expires_at!) - now().getTime()).toBeGreaterThan(59 * MINUTE);

    // Stored encrypted: the token appears nowhere in the table in clear.
    const stored = await db.query<{ row: string }>('SELECT row_to_json(c)::text AS row FROM connections c');
    expect(stored.rows.map((r) => r.row).join()).not.toContain(credentials.access_token);
  });

  it('omits the refresh token unless asked, in raw too', async () => {
    const record = await h.service.getConnection(scope('alice'));
    if (record.credentials.type !== 'OAUTH2') throw new Error('expected OAUTH2');
    expect(record.credentials.refresh_token).toBeUndefined();
    expect(record.credentials.raw['refresh_token']).toBeUndefined();
    expect(record.credentials.raw['access_token']).toBe(record.credentials.access_token);
  });

  it('authorizes requests: the fake API sees the Bearer token and the provider headers', async () => {
    const request = await h.service.authorizeRequest(scope('alice'), {
      method: 'get',
      endpoint: '/me',
      headers: { authorization: 'spoofed', 'X-Trace': 't1' },
      params: { page: 2 },
    });
    expect(request.url).toBe(`${fake.url}/api/me?page=2`);
    expect(request.headers['X-Fake-Version']).toBe('1');
    expect(request.headers['X-Trace']).toBe('t1');
    expect(request.headers['authorization']).toBeUndefined();
    const response = await fetch(request.url, { method: request.method, headers: request.headers });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ id: 'user-1', query: { page: '2' } });
  });

  it('refreshes when the token expires within 15 minutes, not before', async () => {
    const before = await h.service.getConnection(scope('alice'));
    if (before.credentials.type !== 'OAUTH2') throw new Error('expected OAUTH2');
    const refreshesBefore = fake.refreshRequests().length;

    await travelToExpiry('alice', 16);
    const still = await h.service.getConnection(scope('alice'));
    expect(fake.refreshRequests().length).toBe(refreshesBefore);
    expect(still.credentials).toEqual(before.credentials);

    await travelToExpiry('alice', 14);
    const after = await h.service.getConnection(scope('alice'));
    if (after.credentials.type !== 'OAUTH2') throw new Error('expected OAUTH2');
    expect(fake.refreshRequests().length).toBe(refreshesBefore + 1);
    expect(after.credentials.access_token).not.toBe(before.credentials.access_token);
    expect(Date.parse(after.credentials.expires_at!) - now().getTime()).toBeGreaterThan(59 * MINUTE);
    expect(fake.refreshRequests().at(-1)!.clientAuth).toBe('basic');

    // The request made after the refresh carries the new token, which the API accepts.
    const request = await h.service.authorizeRequest(scope('alice'), {
      method: 'GET',
      endpoint: 'me',
      headers: {},
      params: {},
    });
    expect(request.headers['Authorization']).toBe(`Bearer ${after.credentials.access_token}`);
    expect((await fetch(request.url, { headers: request.headers })).status).toBe(200);
    clockOffsetMs = 0;
  });

  it('forceRefresh refreshes on every call', async () => {
    const before = fake.refreshRequests().length;
    const first = await h.service.getConnection(scope('alice'), { forceRefresh: true });
    const second = await h.service.getConnection(scope('alice'), { forceRefresh: true });
    expect(fake.refreshRequests().length).toBe(before + 2);
    if (first.credentials.type !== 'OAUTH2' || second.credentials.type !== 'OAUTH2') throw new Error('expected OAUTH2');
    expect(second.credentials.access_token).not.toBe(first.credentials.access_token);
  });

  it('two processes needing a refresh at once cause exactly one token request', async () => {
    // A second "process": its own pool (its own Postgres sessions) and its own service instance.
    const otherPool = createPool({ url: dbUrl, max: 5 });
    try {
      const other = await startHarness({
        db: otherPool,
        encryptor: h.encryptor,
        now,
        extraProviders: {
          'fake-oauth2': fakeOAuth2Provider(fake.url, { token_request_auth_method: 'client_secret_basic' }),
        },
      });
      await travelToExpiry('alice', 5);
      fake.state.refreshDelayMs = 300;
      const before = fake.refreshRequests().length;
      const results = await Promise.all([
        h.service.getConnection(scope('alice')),
        other.service.getConnection(scope('alice')),
        h.service.getConnection(scope('alice')),
        other.service.getConnection(scope('alice')),
      ]);
      expect(fake.refreshRequests().length).toBe(before + 1);
      const tokens = new Set(results.map((r) => (r.credentials.type === 'OAUTH2' ? r.credentials.access_token : '')));
      expect(tokens.size).toBe(1);
      expect(fake.state.accessTokens.has([...tokens][0]!)).toBe(true);
      const status = await h.service.getConnectionStatus(scope('alice'));
      expect(status.refresh_error).toBeNull();
    } finally {
      fake.state.refreshDelayMs = 0;
      clockOffsetMs = 0;
      await otherPool.end();
    }
  });

  it('a revoked grant marks the connection, fails getConnection with a clear error, and a reconnect clears it', async () => {
    await h.browse(await connectUrl('bob'));
    await h.service.getConnection(scope('bob'));
    fake.revokeAllRefreshTokens();
    await travelToExpiry('bob', 10);
    try {
      const failuresBefore = await refreshFailures();
      const failure = await caught(h.service.getConnection(scope('bob')));
      expect(failure.code).toBe('connection_refresh_failed');
      // The metrics count it once (docs/operations.md "Metrics"), by integration and code, never by connection.
      expect((await refreshFailures()) - failuresBefore).toBe(1);
      expect(failure.message).toContain('invalid_grant');
      expect(failure.message).toContain('reconnect');
      expect(failure.retryable).toBe(false);

      const status = await h.service.getConnectionStatus(scope('bob'));
      expect(status.refresh_error).toMatchObject({ code: 'invalid_grant', permanent: true });
      expect(status.refresh_error!.message).toContain('Token has been expired or revoked');
      expect(Date.parse(status.refresh_error!.at)).toBeGreaterThan(Date.now() - MINUTE);
      const listed = await h.service.listConnections(environmentId, { integrationId: 'fake-app' });
      expect(listed.find((c) => c.connection_id === 'bob')?.refresh_error?.code).toBe('invalid_grant');

      // Known to be revoked: the next call fails at once, without asking the provider again.
      const requests = fake.refreshRequests().length;
      const again = await caught(h.service.getConnection(scope('bob')));
      expect(again.code).toBe('connection_refresh_failed');
      expect(fake.refreshRequests().length).toBe(requests);
      const authorize = await caught(
        h.service.authorizeRequest(scope('bob'), { method: 'GET', endpoint: '/me', headers: {}, params: {} }),
      );
      expect(authorize.code).toBe('connection_refresh_failed');

      // Other connections are unaffected.
      expect((await h.service.getConnectionStatus(scope('alice'))).refresh_error).toBeNull();
    } finally {
      clockOffsetMs = 0;
    }
    // The user reconnects (a session that allows it): the error is gone and the connection works, metadata kept.
    await h.service.updateMetadata(scope('bob'), { plan: 'pro' });
    const page = await h.browse(await connectUrl('bob', '', true));
    expect(page.body).toContain('Connection established');
    expect((await h.service.getConnectionStatus(scope('bob'))).refresh_error).toBeNull();
    const record = await h.service.getConnection(scope('bob'));
    expect(record.metadata).toEqual({ plan: 'pro' });
    expect(saved.filter((event) => event.startsWith('bob:'))).toEqual(['bob:created', 'bob:updated']);
    expect(logScan.lines().some((line) => line.includes('onConnectionSaved failed: sync scheduler down'))).toBe(true);
  });

  it('refuses a replayed, an unknown, an expired or a denied callback with a failure page', async () => {
    // Replay: intercept the provider's redirect to the callback and use it twice.
    const start = await fetch(await connectUrl('carol'), { redirect: 'manual' });
    const toProvider = start.headers.get('location')!;
    const approve = await fetch(toProvider, { redirect: 'manual' });
    const callback = approve.headers.get('location')!;
    const first = await fetch(callback);
    expect(first.status).toBe(200);
    const replay = await fetch(callback);
    expect(replay.status).toBe(400);
    expect(await replay.text()).toContain('unknown or was already completed');
    expect(replay.headers.get('content-security-policy')).toContain("default-src 'none'");

    const unknown = await fetch(`${h.appUrl}/oauth/callback?state=made-up&code=x`);
    expect(unknown.status).toBe(400);

    const late = await fetch(await connectUrl('dave'), { redirect: 'manual' });
    const lateCallback = (await fetch(late.headers.get('location')!, { redirect: 'manual' })).headers.get('location')!;
    clockOffsetMs = 11 * MINUTE;
    try {
      const expired = await fetch(lateCallback);
      expect(expired.status).toBe(400);
      expect(await expired.text()).toContain('expired');
    } finally {
      clockOffsetMs = 0;
    }
    await expect(h.service.getConnection(scope('dave'))).rejects.toMatchObject({ code: 'unknown_connection' });

    // The user says no at the provider.
    await h.integrations.upsert(environmentId, {
      id: 'fake-app',
      provider: 'fake-oauth2',
      oauth_client_id: 'client-1',
      oauth_scopes: ['deny'],
    });
    const denied = await h.browse(await connectUrl('erin'));
    expect(denied.status).toBe(400);
    expect(denied.body).toContain('access_denied');
    expect(denied.body).toContain('The user said no');
    await h.integrations.upsert(environmentId, {
      id: 'fake-app',
      provider: 'fake-oauth2',
      oauth_client_id: 'client-1',
      oauth_scopes: ['write'],
    });
    // The secret was not given again, so the stored one was kept: connecting still works.
    expect((await h.browse(await connectUrl('erin'))).status).toBe(200);
  });

  it('refuses a connect link without a session, for a bad connection id or a bad connection setting', async () => {
    const noSession = await h.browse(`${h.appUrl}/oauth/connect/fake-app?connection_id=x`);
    expect(noSession.status).toBe(401);
    await expect(
      h.oauthFlow.createConnectSession({ environmentId, integrationId: 'fake-app', connectionId: 'has space' }),
    ).rejects.toMatchObject({ code: 'invalid_connect_request', status: 400 });
    await expect(
      h.oauthFlow.createConnectSession({
        environmentId,
        integrationId: 'fake-app',
        connectionId: 'frank',
        connectionConfig: { team: 'evil.example.com/' },
      }),
    ).rejects.toMatchObject({ status: 400 });
    const badSetting = await h.browse(await connectUrl('frank', '&connection_config[team]=evil.example.com%2F'));
    expect(badSetting.status).toBe(400);
    expect(badSetting.body).toContain('team');
    await expect(
      h.oauthFlow.createConnectSession({ environmentId, integrationId: 'nope', connectionId: 'x' }),
    ).rejects.toMatchObject({ code: 'unknown_integration', status: 404 });
  });

  it('connect sessions: bound to one connection, used once, expiring, never misdirected', async () => {
    const link = await h.connectLink({
      environmentId,
      integrationId: 'fake-app',
      connectionId: 'gina',
      connectionConfig: { team: 'red' },
      endUser: { id: 'u-gina', email: 'gina@example.com' },
    });
    const token = new URL(link).searchParams.get('connect_session_token')!;
    expect(token).toMatch(/^cs_[A-Za-z0-9_-]{43}$/);
    // Only a hash is stored.
    const stored = await db.query<{ row: string }>('SELECT row_to_json(s)::text AS row FROM connect_sessions s');
    expect(stored.rows.map((r) => r.row).join()).not.toContain(token.slice(3));
    // Made for another integration: refused, and not spent.
    const misdirected = await h.browse(`${h.appUrl}/oauth/connect/other-app?connect_session_token=${token}`);
    expect(misdirected.status).toBe(401);
    expect(misdirected.body).toContain('not valid for this integration');
    // The end user cannot change the connection id or what the session fixes.
    const page = await h.browse(`${link}&connection_id=mallory&connection_config[team]=blue`);
    expect(page.status, page.body).toBe(200);
    expect(page.body).toContain('gina');
    expect((await h.service.getConnection(scope('gina'))).connection_config).toEqual({ team: 'red' });
    await expect(h.service.getConnection(scope('mallory'))).rejects.toMatchObject({ code: 'unknown_connection' });
    const listed = await h.service.listConnections(environmentId, { integrationId: 'fake-app' });
    // The end user is kept as the connection's tags.
    expect(listed.find((c) => c.connection_id === 'gina')?.tags).toEqual({
      end_user_id: 'u-gina',
      end_user_email: 'gina@example.com',
    });
    // Used once.
    const again = await h.browse(link);
    expect(again.status).toBe(401);
    expect(again.body).toContain('already used');
    // Forged or unknown tokens.
    for (const forged of [`cs_${'A'.repeat(43)}`, token.replace(/.$/, (c) => (c === 'A' ? 'B' : 'A')), 'cs_short']) {
      expect((await h.browse(`${h.appUrl}/oauth/connect/fake-app?connect_session_token=${forged}`)).status).toBe(401);
    }
    // Expired.
    const later = await connectUrl('hank');
    clockOffsetMs = 31 * MINUTE;
    try {
      const expired = await h.browse(later);
      expect(expired.status).toBe(401);
      expect(expired.body).toContain('expired');
    } finally {
      clockOffsetMs = 0;
    }
    await expect(h.service.getConnection(scope('hank'))).rejects.toMatchObject({ code: 'unknown_connection' });
  });

  it('an existing connection is re-authorised only by a session that says so', async () => {
    const before = await h.service.getConnection(scope('alice'));
    await expect(
      h.oauthFlow.createConnectSession({ environmentId, integrationId: 'fake-app', connectionId: 'alice' }),
    ).rejects.toMatchObject({ code: 'connection_exists', status: 409 });
    // A session made before the connection existed cannot replace it once it does.
    const early = await connectUrl('ivan');
    const early2 = await connectUrl('ivan');
    expect((await h.browse(early)).status).toBe(200);
    const ivan = await h.service.getConnection(scope('ivan'));
    const second = await h.browse(early2);
    expect(second.status).toBe(409);
    expect(second.body).toContain('allow_reconnect');
    expect((await h.service.getConnection(scope('ivan'))).credentials).toEqual(ivan.credentials);
    // The race: both sessions past the start before either finished; the second callback refuses.
    const raceA = await fetch(await connectUrl('judy'), { redirect: 'manual' });
    const raceB = await fetch(await connectUrl('judy'), { redirect: 'manual' });
    const callbackA = (await fetch(raceA.headers.get('location')!, { redirect: 'manual' })).headers.get('location')!;
    const callbackB = (await fetch(raceB.headers.get('location')!, { redirect: 'manual' })).headers.get('location')!;
    expect((await fetch(callbackA)).status).toBe(200);
    const judy = await h.service.getConnection(scope('judy'));
    const lost = await fetch(callbackB);
    expect(lost.status).toBe(409);
    expect((await h.service.getConnection(scope('judy'))).credentials).toEqual(judy.credentials);
    // With allow_reconnect the user re-authorises alice: new token.
    expect((await h.browse(await connectUrl('alice', '', true))).status).toBe(200);
    const after = await h.service.getConnection(scope('alice'));
    expect(after.credentials).not.toEqual(before.credentials);
  });

  it('public-key links: refused unless the environment opts in, and then they never replace a connection', async () => {
    const alice = await h.service.getConnection(scope('alice'));
    // The hijack of issue 16 (finding 2): an attacker follows a public-key link for alice's id.
    const refused = await h.browse(publicKeyUrl('alice'));
    expect(refused.status).toBe(401);
    expect(refused.body).toContain('connect_session_token');
    await h.environments.updateSettings(environmentId, { allowPublicKeyConnect: true });
    try {
      const hijack = await h.browse(publicKeyUrl('alice'));
      expect(hijack.status).toBe(409);
      expect(hijack.body).toContain('already exists');
      expect((await h.service.getConnection(scope('alice'))).credentials).toEqual(alice.credentials);
      // A new connection id is what such a link may make.
      const fresh = await h.browse(publicKeyUrl('kim', '&connection_config[team]=green'));
      expect(fresh.status, fresh.body).toBe(200);
      expect((await h.service.getConnection(scope('kim'))).connection_config).toEqual({ team: 'green' });
      const badId = await h.browse(publicKeyUrl('has%20space'));
      expect(badId.status).toBe(400);
      const unknown = await h.browse(`${h.appUrl}/oauth/connect/nope?public_key=${publicKey}&connection_id=x`);
      expect(unknown.status).toBe(404);
    } finally {
      await h.environments.updateSettings(environmentId, { allowPublicKeyConnect: false });
    }
    expect((await h.browse(publicKeyUrl('lena'))).status).toBe(401);
  });

  it('never wrote a token or secret to a log line (and the scan does see the service lines)', () => {
    logScan.secret(...fake.state.issued);
    expect(logScan.secretCount()).toBeGreaterThan(10);
    const lines = logScan.lines();
    expect(lines.some((line) => line.includes('refreshed the access token'))).toBe(true);
    expect(lines.some((line) => line.includes('refresh of connection') && line.includes('invalid_grant'))).toBe(true);
  });
});

/** service_token_refresh_failures_total of a revoked grant of the fake provider's integration. */
async function refreshFailures(): Promise<number> {
  const { values } = await tokenRefreshFailures.get();
  const labels = { integration: 'fake-app', code: 'invalid_grant', permanent: 'true' };
  const matches = (v: { labels: Partial<Record<keyof typeof labels, string | number>> }) =>
    v.labels.integration === labels.integration &&
    v.labels.code === labels.code &&
    v.labels.permanent === labels.permanent;
  return values.find(matches)?.value ?? 0;
}
