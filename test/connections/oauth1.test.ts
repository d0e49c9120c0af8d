/**
 * OAuth 1.0a: the signature against published reference vectors, then the three-legged connect flow
 * and signed requests against a fake OAuth 1 server on 127.0.0.1.
 */
import { describe, expect } from 'vitest';
import { percentEncode, signOAuth1 } from '../../src/connections/oauth1.js';
import { test as kit, withConnections, type ConnectionsHarness } from '../kit/index.js';
import { startFakeProvider, type FakeProvider } from '../kit/oauthProvider.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();
const consumerSecret = 'consumer-secret-5a4b3c2d1e';

/**
 * A fake OAuth 1 server (`fake`), the connections area with its provider (`connections`), and the
 * environment `dev` with the integration `trello-like` of it (`environmentId`).
 */
const it = kit.extend<{ fake: FakeProvider; connections: ConnectionsHarness; environmentId: string }>({
  fake: [
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from this pattern
    async ({}, use) =>
      use(await startFakeProvider({ clientId: 'consumer-1', clientSecret: consumerSecret, clientAuth: 'post' })),
    { scope: 'file' },
  ],
  connections: [
    async ({ db, fake }, use) =>
      withConnections(
        {
          db: db.pool,
          extraProviders: {
            'fake-oauth1': {
              display_name: 'Fake OAuth 1',
              auth_mode: 'OAUTH1',
              request_token_url: `${fake.url}/oauth1/request_token`,
              authorization_url: `${fake.url}/oauth1/authorize`,
              access_token_url: `${fake.url}/oauth1/access_token`,
              base_url: `${fake.url}/oauth1`,
            },
          },
        },
        use,
      ),
    { scope: 'file' },
  ],
  environmentId: [
    async ({ connections }, use) => {
      const created = await connections.environments.create({ name: 'dev' });
      logScan.secret(created.secretKey, consumerSecret);
      await connections.integrations.upsert(created.environment.id, {
        id: 'trello-like',
        provider: 'fake-oauth1',
        oauth_client_id: 'consumer-1',
        oauth_client_secret: consumerSecret,
      });
      await use(created.environment.id);
    },
    { scope: 'file' },
  ],
});

describe('OAuth 1.0a signing against reference vectors', () => {
  it('RFC 5849 section 1.2: the photos.example.net request', () => {
    const signed = signOAuth1({
      method: 'GET',
      url: 'http://photos.example.net/photos?file=vacation.jpg&size=original',
      consumerKey: 'dpf43f3p2l4k3l03',
      consumerSecret: 'kd94hf93k423kf44',
      token: 'nnch734d00sl2jdk',
      tokenSecret: 'pfkkdhi9sl3r4s00',
      nonce: 'chapoH',
      timestamp: '137131202',
      realm: 'Photos',
      // The RFC's example sends no oauth_version (it is optional).
      includeVersion: false,
    });
    expect(signed.signature).toBe('MdpQcU8iPSUjWoN/UDMsK2sui9I=');
    expect(signed.authorization).toContain('oauth_signature="MdpQcU8iPSUjWoN%2FUDMsK2sui9I%3D"');
    expect(signed.authorization.startsWith('OAuth realm="Photos", ')).toBe(true);
  });

  it("Twitter's documented example: POST with a form body and a query parameter", () => {
    const signed = signOAuth1({
      method: 'POST',
      url: 'https://api.twitter.com/1.1/statuses/update.json?include_entities=true',
      consumerKey: 'xvz1evFS4wEEPTGEFPHBog',
      consumerSecret: 'kAcSOqF21Fu85e7zjz7ZN2U4ZRhfV3WpwPAoE3Z7kBw',
      token: '370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb',
      tokenSecret: 'LswwdoUaIvS8ltyTt5jkRh4J50vUPVVHtR2YPi5kE',
      nonce: 'kYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg',
      timestamp: '1318622958',
      formParams: { status: 'Hello Ladies + Gentlemen, a signed OAuth request!' },
    });
    expect(signed.baseString).toBe(
      'POST&https%3A%2F%2Fapi.twitter.com%2F1.1%2Fstatuses%2Fupdate.json&include_entities%3Dtrue%26oauth_consumer_key%3Dxvz1evFS4wEEPTGEFPHBog%26oauth_nonce%3DkYjzVBB8Y0ZFabxSWbWovY3uYSQ2pTgmZeNu2VS4cg%26oauth_signature_method%3DHMAC-SHA1%26oauth_timestamp%3D1318622958%26oauth_token%3D370773112-GmHxMAgYyLbNEtIKZeRNFsMKPR9EyMZeS9weJAEb%26oauth_version%3D1.0%26status%3DHello%2520Ladies%2520%252B%2520Gentlemen%252C%2520a%2520signed%2520OAuth%2520request%2521',
    );
    expect(signed.signature).toBe('hCtSmYh+iHYCEqBWrE7C7hYmtUk=');
  });

  it('percent-encodes as RFC 5849 section 3.6 says', () => {
    expect(percentEncode("a b+c/d!*'()~._-")).toBe('a%20b%2Bc%2Fd%21%2A%27%28%29~._-');
    expect(percentEncode('ü')).toBe('%C3%BC');
  });
});

describe('OAuth 1.0a connections end to end', () => {
  it('connects (request token, authorize, access token) and signs requests the server verifies', async ({
    connections: h,
    fake,
    environmentId,
  }) => {
    const page = await h.browse(
      await h.connectLink({ environmentId, integrationId: 'trello-like', connectionId: 'board-owner' }),
    );
    expect(page.status, page.body).toBe(200);
    expect(page.body).toContain('Connection established');

    const scope = { environmentId, integrationId: 'trello-like', connectionId: 'board-owner' };
    const record = await h.service.getConnection(scope);
    if (record.credentials.type !== 'OAUTH1') throw new Error(`expected OAUTH1, got ${record.credentials.type}`);
    expect(fake.state.oauth1.accessTokens.get(record.credentials.oauth_token)).toBe(
      record.credentials.oauth_token_secret,
    );
    expect(record.credentials.raw).toEqual({ oauth_token: record.credentials.oauth_token, user_id: '42' });

    for (const method of ['GET', 'DELETE']) {
      const request = await h.service.authorizeRequest(scope, {
        method,
        endpoint: '/api',
        headers: {},
        params: { fields: 'name,url', q: 'a b' },
      });
      expect(request.headers['Authorization']).toMatch(/^OAuth oauth_consumer_key="consumer-1", /);
      const response = await fetch(request.url, { method: request.method, headers: request.headers });
      expect(response.status, await response.clone().text()).toBe(200);
    }

    // A tampered query breaks the signature: the server's check is real.
    const request = await h.service.authorizeRequest(scope, {
      method: 'GET',
      endpoint: '/api',
      headers: {},
      params: { q: '1' },
    });
    const tampered = await fetch(request.url.replace('q=1', 'q=2'), { headers: request.headers });
    expect(tampered.status).toBe(401);
  });

  it('never wrote a token or secret to a log line', ({ fake }) => {
    logScan.secret(...fake.state.issued);
    expect(logScan.secretCount()).toBeGreaterThan(3);
  });
});
