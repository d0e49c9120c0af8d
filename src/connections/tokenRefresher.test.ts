import { describe, expect, it } from 'vitest';
import type { RefreshClaim } from './refreshClaims.js';
import { fairQueue, refreshRound, startTokenRefresher } from './tokenRefresher.js';

const claim = (id: number, environmentId: string): RefreshClaim => ({
  id,
  scope: { environmentId, integrationId: 'i', connectionId: `c${id}` },
  refreshedAt: null,
});

/** A service whose refreshes of environment `hanging` wait until released; the others answer at once. */
function fakeService(claims: RefreshClaim[], hanging: string) {
  const started: RefreshClaim[] = [];
  const released: RefreshClaim[] = [];
  let open = 0;
  let most = 0;
  let release = (): void => undefined;
  const hang = new Promise<void>((resolve) => (release = resolve));
  return {
    started,
    released,
    most: () => most,
    release: () => release(),
    service: {
      claimExpiring: async () => claims,
      refreshClaimed: async (next: RefreshClaim): Promise<'refreshed' | 'failed'> => {
        started.push(next);
        open++;
        most = Math.max(most, open);
        try {
          if (next.scope.environmentId !== hanging) return 'refreshed';
          await hang;
          return 'failed';
        } finally {
          open--;
        }
      },
      releaseClaims: async (left: RefreshClaim[]) => {
        released.push(...left);
      },
    },
  };
}

describe('fairQueue', () => {
  it('takes the environments in turn, never more than perEnvironment of one at a time', async () => {
    const queue = fairQueue([claim(1, 'a'), claim(2, 'a'), claim(3, 'a'), claim(4, 'b'), claim(5, 'c')], 1);
    const first = await queue.next();
    const second = await queue.next();
    const third = await queue.next();
    expect([first, second, third].map((c) => c?.scope.environmentId)).toEqual(['a', 'b', 'c']);
    // a has one in flight: the next of a waits until it is done.
    let fourth: RefreshClaim | undefined;
    const waiting = queue.next().then((next) => (fourth = next));
    await Promise.resolve();
    expect(fourth).toBeUndefined();
    queue.done(first!);
    await waiting;
    expect(fourth?.id).toBe(2);
    expect(queue.drain().map((c) => c.id)).toEqual([3]);
    expect(await queue.next()).toBeUndefined();
  });
});

describe('refreshRound', () => {
  it('an environment whose token requests hang holds perEnvironment slots; the others are served at once', async () => {
    const claims = [
      ...Array.from({ length: 50 }, (_, n) => claim(n, 'hanging')),
      claim(100, 'b'),
      claim(101, 'c'),
      claim(102, 'b'),
    ];
    const fake = fakeService(claims, 'hanging');
    const round = refreshRound(fake.service, { windowMs: 1, concurrency: 4, perEnvironment: 2, roundMs: 200 });
    // While the hanging environment's two requests wait, the others are renewed.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(fake.started.filter((c) => c.scope.environmentId !== 'hanging').map((c) => c.id)).toEqual([100, 101, 102]);
    expect(fake.started.filter((c) => c.scope.environmentId === 'hanging')).toHaveLength(2);
    await new Promise((resolve) => setTimeout(resolve, 250));
    fake.release();
    const outcome = await round;
    expect(outcome).toEqual({ refreshed: 3, failed: 2, deferred: 48 });
    expect(fake.released).toHaveLength(48);
    expect(fake.most()).toBeLessThanOrEqual(4);
  });

  it('rounds never overlap: a round asked for while one runs is that one', async () => {
    const fake = fakeService([claim(1, 'hanging')], 'hanging');
    const refresher = startTokenRefresher(fake.service, { intervalMs: 60_000, roundMs: 1000, log: () => undefined });
    const first = refresher.runOnce();
    const second = refresher.runOnce();
    expect(second).toBe(first);
    fake.release();
    await first;
    expect(fake.started).toHaveLength(1);
    await refresher.stop();
  });
});
