/**
 * The background token refresher between environments (issue 29, finding 6), with real timeouts: one
 * environment's 200 connections whose token URL accepts the connection and never answers used to take
 * every round (one request at a time, 15 s each, the same 200 first every round, ordered by expiry),
 * and another environment's token due in 5 minutes was never reached. Now a round takes the
 * environments in turn, one environment holds at most 2 of its 4 request slots, a connection that
 * timed out waits (doubling) before it is tried again, and rounds never overlap.
 */
import type { ServerResponse } from 'node:http';
import { describe, expect } from 'vitest';
import { startTokenRefresher, type TokenRefresher } from '../../src/connections/tokenRefresher.js';
import { eventually } from '../helpers/eventually.js';
import {
  test as kit,
  withConnections,
  withFakeUpstream,
  type ConnectionsHarness,
  type FakeUpstream,
} from '../kit/index.js';
import { startFakeProvider, type FakeProvider } from '../kit/oauthProvider.js';
import { fakeOAuth2Provider } from '../kit/connections.js';

const MINUTE = 60_000;
const HANGING = 200;

/**
 * A token endpoint (the kit's fake upstream) that reads each request and never answers; it counts the
 * requests it holds open (until the client gives up: the response's close, not the request's, which
 * Node emits as soon as the body is read) and the refresh tokens it was sent.
 */
function hangingTokenUrl(upstream: FakeUpstream) {
  const held = new Set<ServerResponse>();
  const seen: string[] = [];
  let most = 0;
  upstream.setHandler((_request, response, body) => {
    held.add(response);
    most = Math.max(most, held.size);
    seen.push(new URLSearchParams(body).get('refresh_token') ?? '');
    response.on('close', () => held.delete(response));
  });
  return { url: upstream.url, seen, most: () => most, holding: () => held.size };
}

interface Refresh {
  h: ConnectionsHarness;
  good: FakeProvider;
  hanging: ReturnType<typeof hangingTokenUrl>;
  refresher: TokenRefresher;
  victim: string;
}

/**
 * Two environments: `noisy` with 200 connections whose token URL hangs, `victim` with one token due in
 * 5 minutes at a provider that answers; and the background refresher over them (5 s rounds).
 */
const it = kit.extend<{ refresh: Refresh }>({
  refresh: [
    async ({ db }, use) => {
      const good = await startFakeProvider({ clientId: 'client-b', clientSecret: 'secret-b', clientAuth: 'basic' });
      await withFakeUpstream(undefined, async (upstream) => {
        const hanging = hangingTokenUrl(upstream);
        const extraProviders = {
          'good-oauth2': fakeOAuth2Provider(good.url, { token_request_auth_method: 'client_secret_basic' }),
          'hanging-oauth2': fakeOAuth2Provider(hanging.url),
        };
        await withConnections({ db: db.pool, extraProviders }, async (h) => {
          const noisy = (await h.environments.create({ name: 'noisy' })).environment.id;
          const victim = (await h.environments.create({ name: 'victim' })).environment.id;
          await h.integrations.upsert(noisy, {
            id: 'hangs',
            provider: 'hanging-oauth2',
            oauth_client_id: 'client-a',
            oauth_client_secret: 'secret-a',
          });
          await h.integrations.upsert(victim, {
            id: 'works',
            provider: 'good-oauth2',
            oauth_client_id: 'client-b',
            oauth_client_secret: 'secret-b',
          });
          // The noisy environment's tokens expire first: ordered by expiry alone, they would all go first.
          const soon = new Date(Date.now() + MINUTE).toISOString();
          for (let n = 0; n < HANGING; n++) {
            await h.service.importConnection({
              environmentId: noisy,
              integrationId: 'hangs',
              connectionId: `hang-${n}`,
              credentials: { type: 'OAUTH2', access_token: `at-${n}`, refresh_token: `rt-hang-${n}`, expires_at: soon },
            });
          }
          good.state.refreshTokens.add('rt-victim');
          await h.service.importConnection({
            environmentId: victim,
            integrationId: 'works',
            connectionId: 'due-soon',
            credentials: {
              type: 'OAUTH2',
              access_token: 'at-victim',
              refresh_token: 'rt-victim',
              expires_at: new Date(Date.now() + 5 * MINUTE).toISOString(),
            },
          });
          const refresher = startTokenRefresher(h.service, { log: () => undefined, roundMs: 5_000 });
          try {
            await use({ h, good, hanging, refresher, victim });
          } finally {
            await refresher.stop();
          }
        });
      });
    },
    { scope: 'file' },
  ],
});

describe('the background token refresher between environments', () => {
  it('renews a token due in 5 minutes within seconds while 200 of another environment hang', async ({ refresh }) => {
    const { h, good, hanging, refresher, victim } = refresh;
    const started = Date.now();
    const round = refresher.runOnce();
    await eventually(
      async () => (good.refreshRequests().length > 0 ? true : undefined),
      20_000,
      'the victim environment’s token to be renewed',
    );
    const renewedAfter = Date.now() - started;
    console.log(`[token refresh] the victim's token renewed ${renewedAfter} ms into the round`);
    expect(renewedAfter).toBeLessThan(10_000);
    const record = await h.service.getConnection({
      environmentId: victim,
      integrationId: 'works',
      connectionId: 'due-soon',
    });
    if (record.credentials.type !== 'OAUTH2') throw new Error('expected OAUTH2');
    expect(record.credentials.access_token).not.toBe('at-victim');
    // Asked for again while it runs, the refresher answers the same round.
    expect(refresher.runOnce()).toBe(round);
    const outcome = await round;
    console.log(`[token refresh] round 1: ${JSON.stringify(outcome)} in ${Date.now() - started} ms`);
    // One environment holds at most 2 request slots.
    expect(hanging.most()).toBeLessThanOrEqual(2);
    expect(outcome.refreshed).toBe(1);
    expect(outcome.failed).toBe(hanging.seen.length);
    expect(outcome.deferred).toBe(100 - outcome.failed);
  }, 120_000);

  it('a connection that timed out waits: the next round tries other connections, not the same', async ({
    refresh,
    db,
  }) => {
    const { hanging, refresher } = refresh;
    const first = new Set(hanging.seen);
    expect(first.size).toBeGreaterThan(0);
    const outcome = await refresher.runOnce();
    const second = hanging.seen.slice(first.size);
    console.log(`[token refresh] round 2: ${JSON.stringify(outcome)}, tried ${second.join(', ')}`);
    expect(second.length).toBeGreaterThan(0);
    expect(second.filter((token) => first.has(token))).toEqual([]);
    const { rows } = await db.pool.query<{ waiting: string }>(
      `SELECT count(*) AS waiting FROM connections WHERE refresh_retry_at > now() AND refresh_attempts > 0`,
    );
    expect(Number(rows[0]?.waiting)).toBe(first.size + second.length);
  }, 120_000);
});
