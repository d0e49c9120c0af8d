/**
 * Tokens the service obtains by itself, against a fake authorization server on 127.0.0.1 that checks
 * what real ones check: OAuth 2 client credentials (client authentication, scope), a service account's
 * RS256 JWT (signature against the account's public key, issuer, audience, scope, lifetime), and a
 * GitHub-style app installation token (app JWT signature, issuer, lifetime at most 10 minutes). For
 * each kind: a connection imported through the API gets a token, the token is injected into a request
 * through the API's /proxy, the background refresher renews it before it expires without any request
 * asking, and the refresher and an on-demand refresh on another pool at once make one token request.
 * A bad private key is refused with a clear error and nothing is stored. No secret reaches the logs.
 */
import { generateKeyPairSync, randomBytes, verify, type KeyObject } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { createConnections } from '../../src/connections/index.js';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import { startTokenRefresher, TOKEN_REFRESH_WINDOW_MS } from '../../src/connections/tokenRefresher.js';
import { createPool } from '../../src/db/pool.js';
import { isServiceError } from '../../src/errors.js';
import { eventually } from '../helpers/eventually.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { useLogScan } from './helpers/logScan.js';
import { deferCleanup } from '../kit/cleanup.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const logScan = useLogScan();

/** Token lifetime of the fake server: inside the refresher's window (17 minutes), so every round renews. */
const SHORT_LIFETIME_S = 600;

interface Issued {
  token: string;
  kind: 'cc' | 'jwt' | 'app';
  issuedAt: number;
  expiresAt: number;
}

function rsaPair(): { privatePem: string; publicKey: KeyObject } {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return { privatePem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), publicKey };
}

/** Verifies a compact RS256 JWT; returns its header and claims, or a reason. */
function verifyJwt(
  jwt: string,
  key: KeyObject,
): { header: Record<string, unknown>; claims: Record<string, unknown> } | string {
  const [header, claims, signature] = jwt.split('.');
  if (!header || !claims || !signature) return 'not a compact JWS';
  const ok = verify('sha256', Buffer.from(`${header}.${claims}`), key, Buffer.from(signature, 'base64url'));
  if (!ok) return 'bad signature';
  return {
    header: JSON.parse(Buffer.from(header, 'base64url').toString()) as Record<string, unknown>,
    claims: JSON.parse(Buffer.from(claims, 'base64url').toString()) as Record<string, unknown>,
  };
}

describe('client credentials, service accounts and app installations', () => {
  let h: ApiHarness;
  let authServer: Awaited<ReturnType<typeof startFakeUpstream>>;
  const account = rsaPair();
  const app = rsaPair();
  const clientSecret = `cs-${randomBytes(12).toString('hex')}`;
  const issued: Issued[] = [];
  const tokenRequests: { kind: Issued['kind']; at: number }[] = [];
  const seen: { kind: string; claims?: Record<string, unknown>; header?: Record<string, unknown>; body?: string }[] =
    [];
  let delayMs = 0;

  const issue = (kind: Issued['kind']): Issued => {
    const token = `${kind}_${randomBytes(16).toString('hex')}`;
    const now = Date.now();
    const entry = { token, kind, issuedAt: now, expiresAt: now + SHORT_LIFETIME_S * 1000 };
    issued.push(entry);
    logScan.secret(token);
    return entry;
  };

  async function handle(req: IncomingMessage, res: ServerResponse, body: string): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x');
    const form = new URLSearchParams(body);
    if (req.method === 'POST' && url.pathname === '/cc/token') {
      tokenRequests.push({ kind: 'cc', at: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      const basic = Buffer.from((req.headers.authorization ?? '').replace(/^Basic /, ''), 'base64').toString();
      seen.push({ kind: 'cc', body });
      if (form.get('grant_type') !== 'client_credentials') return json(res, 400, { error: 'unsupported_grant_type' });
      if (basic !== `machine-client:${clientSecret}`) return json(res, 401, { error: 'invalid_client' });
      return json(res, 200, { access_token: issue('cc').token, token_type: 'Bearer', expires_in: SHORT_LIFETIME_S });
    }
    if (req.method === 'POST' && url.pathname === '/jwt/token') {
      tokenRequests.push({ kind: 'jwt', at: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') {
        return json(res, 400, { error: 'unsupported_grant_type' });
      }
      const checked = verifyJwt(form.get('assertion') ?? '', account.publicKey);
      if (typeof checked === 'string') return json(res, 400, { error: 'invalid_grant', error_description: checked });
      seen.push({ kind: 'jwt', ...checked });
      const { claims } = checked;
      const lifetime = Number(claims['exp']) - Number(claims['iat']);
      if (claims['iss'] !== 'robot@project.iam.example' || claims['aud'] !== `${authServer.url}/jwt/token`) {
        return json(res, 400, { error: 'invalid_grant', error_description: 'wrong issuer or audience' });
      }
      if (!(lifetime > 0 && lifetime <= 3600)) return json(res, 400, { error: 'invalid_grant' });
      return json(res, 200, { access_token: issue('jwt').token, token_type: 'Bearer', expires_in: SHORT_LIFETIME_S });
    }
    const installation = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(url.pathname);
    if (req.method === 'POST' && installation) {
      tokenRequests.push({ kind: 'app', at: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      const checked = verifyJwt((req.headers.authorization ?? '').replace(/^Bearer /, ''), app.publicKey);
      if (typeof checked === 'string') return json(res, 401, { message: `A JSON web token could not be decoded` });
      seen.push({ kind: 'app', ...checked });
      const { claims } = checked;
      if (claims['iss'] !== '424242' || Number(claims['exp']) - Number(claims['iat']) > 600) {
        return json(res, 401, { message: 'bad app JWT' });
      }
      if (installation[1] !== '1001') return json(res, 404, { message: 'Not Found' });
      const entry = issue('app');
      return json(res, 201, { token: entry.token, expires_at: new Date(entry.expiresAt).toISOString() });
    }
    if (url.pathname.startsWith('/api/')) {
      const presented = (req.headers.authorization ?? '').replace(/^(Bearer|token) /, '');
      const token = issued.find((entry) => entry.token === presented && entry.expiresAt > Date.now());
      if (!token) return json(res, 401, { message: 'bad token' });
      return json(res, 200, { kind: token.kind, path: url.pathname });
    }
    json(res, 404, { error: 'not_found' });
  }

  const providers = (base: string) => ({
    'fake-cc': {
      display_name: 'Fake client credentials',
      auth_mode: 'OAUTH2_CC',
      token_url: `${base}/cc/token`,
      token_request_auth_method: 'client_secret_basic',
      default_scopes: ['read'],
      base_url: `${base}/api/cc`,
    },
    'fake-jwt': {
      display_name: 'Fake service account',
      auth_mode: 'JWT',
      token_url: `${base}/jwt/token`,
      default_scopes: ['https://www.example.com/auth/read'],
      base_url: `${base}/api/jwt`,
    },
    'fake-app': {
      display_name: 'Fake app',
      auth_mode: 'APP',
      token_url: `${base}/app/installations/\${connectionConfig.installation_id}/access_tokens`,
      token_request_headers: { Accept: 'application/vnd.github+json' },
      connection_config: { installation_id: { pattern: '^[0-9]+$' } },
      base_url: `${base}/api/app`,
      token_header: { name: 'Authorization', format: 'token ${accessToken}' },
    },
  });

  const credentials = {
    cc: { type: 'OAUTH2_CC', client_id: 'machine-client', client_secret: clientSecret },
    jwt: {
      type: 'JWT',
      client_email: 'robot@project.iam.example',
      private_key: account.privatePem,
      private_key_id: 'key-1',
    },
    app: { type: 'APP', app_id: '424242', private_key: app.privatePem },
  } as const;
  const integrationOf = { cc: 'machine-cc', jwt: 'machine-jwt', app: 'machine-app' } as const;
  const kinds = ['cc', 'jwt', 'app'] as const;

  beforeAll(async () => {
    authServer = await startFakeUpstream();
    h = await startApiHarness({ providers: providers(authServer.url) });
    authServer.setHandler(handle);
    logScan.secret(clientSecret, h.envA.secretKey, ...account.privatePem.split('\n').slice(2, 4));
    logScan.secret(...app.privatePem.split('\n').slice(2, 4));
    for (const kind of kinds) {
      await h.api.integrations.create({ unique_key: integrationOf[kind], provider: `fake-${kind}` });
    }
  });

  const importBody = (kind: (typeof kinds)[number], connectionId: string) => ({
    provider_config_key: integrationOf[kind],
    connection_id: connectionId,
    credentials: credentials[kind],
    ...(kind === 'app' ? { connection_config: { installation_id: '1001' } } : {}),
  });

  async function proxyAs(kind: (typeof kinds)[number], connectionId: string) {
    const response = await fetch(`${h.baseUrl}/proxy/whoami`, {
      headers: {
        authorization: `Bearer ${h.envA.secretKey}`,
        'connection-id': connectionId,
        'provider-config-key': integrationOf[kind],
      },
    });
    return { status: response.status, body: (await response.json()) as Record<string, unknown> };
  }

  for (const kind of kinds) {
    it(`${kind}: import obtains a token; the proxy injects it; the record shows the token, not the secret`, async () => {
      const before = tokenRequests.length;
      const record = await h.api.connections.import(importBody(kind, `${kind}-1`));
      expect(tokenRequests.length).toBe(before + 1);
      const shown = record.credentials;
      expect(shown['type']).toBe(credentials[kind].type);
      expect(issued.at(-1)?.token).toBe(shown['access_token']);
      expect(Date.parse(String(shown['expires_at']))).toBeGreaterThan(Date.now());
      expect(JSON.stringify(record)).not.toContain('PRIVATE KEY');
      expect(JSON.stringify(record)).not.toContain(clientSecret);

      const answer = await proxyAs(kind, `${kind}-1`);
      expect(answer).toEqual({ status: 200, body: { kind, path: `/api/${kind}/whoami` } });

      // Stored encrypted: neither the token nor the long-lived secret is in the table in clear.
      const stored = await h.pool.query<{ row: string }>('SELECT row_to_json(c)::text AS row FROM connections c');
      const text = stored.rows.map((row) => row.row).join();
      expect(text).not.toContain(String(shown['access_token']));
      expect(text).not.toContain('PRIVATE KEY');
      expect(text).not.toContain(clientSecret);
    });
  }

  it('sends what each grant needs: client auth and scope, a signed assertion, an app JWT of at most 10 minutes', () => {
    const cc = seen.find((entry) => entry.kind === 'cc')!;
    expect(new URLSearchParams(cc.body).get('scope')).toBe('read');
    const jwt = seen.find((entry) => entry.kind === 'jwt')!;
    expect(jwt.header).toEqual({ alg: 'RS256', typ: 'JWT', kid: 'key-1' });
    expect(jwt.claims?.['scope']).toBe('https://www.example.com/auth/read');
    const appJwt = seen.find((entry) => entry.kind === 'app')!;
    expect(appJwt.header).toEqual({ alg: 'RS256', typ: 'JWT' });
    const { iat, exp } = appJwt.claims as { iat: number; exp: number };
    expect(iat).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) - 30);
    expect(exp - iat).toBeLessThanOrEqual(600);
  });

  it('the background refresher renews every kind before expiry, with no request asking', async () => {
    const counts = () => Object.fromEntries(kinds.map((kind) => [kind, issued.filter((i) => i.kind === kind).length]));
    const start = counts();
    const firstTokens = Object.fromEntries(kinds.map((kind) => [kind, issued.findLast((i) => i.kind === kind)!]));
    const refresher = startTokenRefresher(h.service.parts.connections.service, {
      intervalMs: 250,
      log: () => undefined,
    });
    try {
      await eventually(
        async () => {
          const now = counts();
          return kinds.every((kind) => (now[kind] ?? 0) > (start[kind] ?? 0)) ? true : undefined;
        },
        60_000,
        'a new token of every kind from the background refresher',
      );
    } finally {
      await refresher.stop();
    }
    for (const kind of kinds) {
      const renewed = issued.filter((entry) => entry.kind === kind).at(-1)!;
      // Renewed while the previous token was still valid.
      expect(renewed.issuedAt).toBeLessThan(firstTokens[kind]!.expiresAt);
      const record = await h.api.connections.get({ connectionId: `${kind}-1`, providerConfigKey: integrationOf[kind] });
      const current = record.credentials['access_token'];
      const newest = issued.filter((entry) => entry.kind === kind).at(-1)!.token;
      expect(current).toBe(newest);
      expect(await proxyAs(kind, `${kind}-1`)).toMatchObject({ status: 200, body: { kind } });
    }
  });

  /** The connections service of another API process: its own pool on the same database. */
  function anotherProcess() {
    const other = createPool({ url: h.dbUrl });
    deferCleanup(() => other.end());
    return createConnections({
      db: other,
      encryptor: h.deps.encryptor,
      callbackUrl: 'http://127.0.0.1:1/oauth/callback',
      catalog: loadProviderCatalog({ extra: providers(authServer.url) }),
      log: () => undefined,
    });
  }

  it('a connection another process renewed after the refresher claimed it and before it read it gets no second token', async () => {
    // The order CI once met by chance in the test below: the claim, then another process's on-demand
    // refresh, then the refresher reading the renewed row. The new token (600 s) is inside the refresher's
    // window (17 min), so only the claim's mark tells that it is new.
    const second = anotherProcess();
    const service = h.service.parts.connections.service;
    const claimAll = () =>
      service.claimExpiring({
        withinMs: TOKEN_REFRESH_WINDOW_MS,
        limit: 100,
        perEnvironment: 100,
        backoff: { initialMs: 60_000, maxMs: 60_000 },
      });
    const claims = await claimAll();
    const claimed = claims.map((claim) => claim.scope.connectionId).sort();
    expect(claimed).toEqual(kinds.map((kind) => `${kind}-1`).sort());
    const renewedBy = tokenRequests.length;
    for (const kind of kinds) {
      await second.service.getConnection({
        environmentId: h.envA.id,
        integrationId: integrationOf[kind],
        connectionId: `${kind}-1`,
      });
    }
    expect(
      tokenRequests
        .slice(renewedBy)
        .map((request) => request.kind)
        .sort(),
    ).toEqual(['app', 'cc', 'jwt']);
    const before = tokenRequests.length;
    for (const claim of claims) expect(await service.refreshClaimed(claim, TOKEN_REFRESH_WINDOW_MS)).toBe('refreshed');
    expect(tokenRequests.slice(before)).toEqual([]);
    // The claims' delays went with the renewal: the next round claims them again (their tokens are due).
    const again = await claimAll();
    expect(again.map((claim) => claim.scope.connectionId).sort()).toEqual(claimed);
    await service.releaseClaims(again);
  });

  it('the refresher and an on-demand refresh on another pool at once make one token request per connection', async () => {
    const second = anotherProcess();
    delayMs = 400;
    const refresher = startTokenRefresher(h.service.parts.connections.service, { log: () => undefined });
    try {
      const before = tokenRequests.length;
      await Promise.all([
        refresher.runOnce(),
        ...kinds.map((kind) =>
          second.service.getConnection({
            environmentId: h.envA.id,
            integrationId: integrationOf[kind],
            connectionId: `${kind}-1`,
          }),
        ),
      ]);
      const made = tokenRequests.slice(before);
      expect(made.map((request) => request.kind).sort()).toEqual(['app', 'cc', 'jwt']);
    } finally {
      delayMs = 0;
      await refresher.stop();
    }
  });

  it('refuses a bad private key with a clear error and stores nothing', async () => {
    const before = tokenRequests.length;
    for (const [kind, key] of [
      ['jwt', '-----BEGIN PRIVATE KEY-----\nnot-a-key\n-----END PRIVATE KEY-----\n'],
      ['app', generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' })],
    ] as const) {
      const response = await fetch(`${h.baseUrl}/connections`, {
        method: 'POST',
        headers: { authorization: `Bearer ${h.envA.secretKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          ...importBody(kind, `${kind}-bad`),
          credentials: { ...credentials[kind], private_key: key },
        }),
      });
      const body = (await response.json()) as { error: { code: string; message: string } };
      expect(response.status).toBe(400);
      expect(body.error.code).toBe('invalid_private_key');
      expect(body.error.message).toMatch(
        kind === 'jwt' ? /not a PEM-encoded private key/ : /ec key; RS256 needs an RSA/,
      );
      expect(body.error.message).toContain(`connection '${kind}-bad'`);
      expect(body.error.message).not.toContain('not-a-key');
    }
    // A key that is not even PEM is refused by the schema, naming the field.
    const notPem = await fetch(`${h.baseUrl}/connections`, {
      method: 'POST',
      headers: { authorization: `Bearer ${h.envA.secretKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...importBody('jwt', 'jwt-bad'), credentials: { ...credentials.jwt, private_key: 'x' } }),
    });
    const notPemBody = (await notPem.json()) as { error: { message: string } };
    expect(notPem.status).toBe(400);
    expect(notPemBody.error.message).toContain('private_key');
    expect(tokenRequests.length).toBe(before);
    const { rows } = await h.pool.query("SELECT 1 FROM connections WHERE connection_id LIKE '%-bad'");
    expect(rows).toEqual([]);
  });

  it('a key the provider refuses: import answers the provider reason; later, a rejected key marks the connection', async () => {
    const other = rsaPair();
    const refused = await h.api.connections
      .import({ ...importBody('jwt', 'jwt-wrong'), credentials: { ...credentials.jwt, private_key: other.privatePem } })
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(refused).toMatchObject({ status: 400, code: 'connection_credentials_rejected' });
    expect(String((refused as Error).message)).toContain('invalid_grant');

    // A connection whose key the provider stops accepting: the refresh failure is recorded as permanent.
    await h.api.connections.import(importBody('cc', 'cc-revoked'));
    const scope = { environmentId: h.envA.id, integrationId: integrationOf.cc, connectionId: 'cc-revoked' };
    const { rows } = await h.pool.query<{ credentials_encrypted: string }>(
      "SELECT credentials_encrypted FROM connections WHERE connection_id = 'cc-revoked'",
    );
    const stored = h.deps.encryptor.decryptJson(rows[0]!.credentials_encrypted, 'connection_credentials') as Record<
      string,
      unknown
    >;
    await h.pool.query("UPDATE connections SET credentials_encrypted = $1 WHERE connection_id = 'cc-revoked'", [
      h.deps.encryptor.encryptJson({ ...stored, client_secret: 'revoked-secret' }, 'connection_credentials'),
    ]);
    const failure = await h.deps.connections.getConnection(scope, { forceRefresh: true }).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(isServiceError(failure) && failure.code).toBe('connection_refresh_failed');
    const status = await h.deps.connections.getConnectionStatus(scope);
    expect(status.refresh_error).toMatchObject({ code: 'invalid_client', permanent: true });
  });
});
