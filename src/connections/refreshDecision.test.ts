/**
 * The token refresh's decisions without a database: when a caller asks the provider at all, what a
 * caller that waited on the lock does with what another left, and when a failed refresh still leaves a
 * token to use. test/connections/oauth2.test.ts and machineAuth.test.ts run them against a provider.
 */
import { describe, expect, it } from 'vitest';
import type { StoredCredentials } from './credentials.js';
import { beforeRefresh, keepsCurrentToken, underLock, type RefreshMarks } from './refreshDecision.js';

const now = new Date('2026-06-01T12:00:00.000Z');
const inMinutes = (minutes: number): string => new Date(now.getTime() + minutes * 60_000).toISOString();
const oauth2 = (expiresInMinutes: number | undefined): StoredCredentials => ({
  type: 'OAUTH2',
  access_token: 'access-1',
  refresh_token: 'refresh-1',
  ...(expiresInMinutes === undefined ? {} : { expires_at: inMinutes(expiresInMinutes) }),
  raw: {},
});
const clean: RefreshMarks = { credentials_refreshed_at: null, refresh_error_at: null, refresh_error_permanent: false };
const refused: RefreshMarks = {
  ...clean,
  refresh_error_at: new Date(now.getTime() - 60_000),
  refresh_error_permanent: true,
};

describe('before the refresh lock', () => {
  it('renews a token that expires within 15 minutes, or every time when forced; never what has no token', () => {
    expect(beforeRefresh({ credentials: oauth2(16), row: clean, forceRefresh: false, now })).toBe('current');
    expect(beforeRefresh({ credentials: oauth2(14), row: clean, forceRefresh: false, now })).toBe('refresh');
    expect(beforeRefresh({ credentials: oauth2(-5), row: clean, forceRefresh: false, now })).toBe('refresh');
    expect(beforeRefresh({ credentials: oauth2(undefined), row: clean, forceRefresh: false, now })).toBe('current');
    expect(beforeRefresh({ credentials: oauth2(600), row: clean, forceRefresh: true, now })).toBe('refresh');
    const apiKey: StoredCredentials = { type: 'API_KEY', apiKey: 'k' };
    expect(beforeRefresh({ credentials: apiKey, row: clean, forceRefresh: true, now })).toBe('current');
    // A minted kind without a token yet gets one at once.
    const minted: StoredCredentials = { type: 'OAUTH2_CC', client_id: 'c', client_secret: 's' };
    expect(beforeRefresh({ credentials: minted, row: clean, forceRefresh: false, now })).toBe('refresh');
  });

  it('does not ask the provider again for a grant it refused, unless forced', () => {
    expect(beforeRefresh({ credentials: oauth2(5), row: refused, forceRefresh: false, now })).toBe('failed');
    expect(beforeRefresh({ credentials: oauth2(5), row: refused, forceRefresh: true, now })).toBe('refresh');
    // A token still valid beyond the window is used whatever the last refresh said.
    expect(beforeRefresh({ credentials: oauth2(60), row: refused, forceRefresh: false, now })).toBe('current');
  });
});

describe('under the refresh lock', () => {
  const seen: RefreshMarks = { ...clean, credentials_refreshed_at: new Date('2026-06-01T11:00:00.000Z') };

  it('takes the token another caller renewed while this one waited, forced or not', () => {
    const renewed = { ...seen, credentials_refreshed_at: new Date('2026-06-01T11:59:59.000Z') };
    for (const forceRefresh of [false, true]) {
      expect(underLock({ seen, row: renewed, credentials: oauth2(60), forceRefresh, now })).toBe('current');
    }
  });

  it('compares the stored times, not clocks: a renewal stamped earlier than this caller read still counts', () => {
    const renewedByASlowClock = { ...seen, credentials_refreshed_at: new Date('2026-06-01T10:00:00.000Z') };
    expect(underLock({ seen, row: renewedByASlowClock, credentials: oauth2(5), forceRefresh: true, now })).toBe(
      'current',
    );
  });

  it('renews when nothing changed and the token still expires soon (or the caller forces it)', () => {
    expect(underLock({ seen, row: seen, credentials: oauth2(5), forceRefresh: false, now })).toBe('renew');
    expect(underLock({ seen, row: seen, credentials: oauth2(60), forceRefresh: false, now })).toBe('current');
    expect(underLock({ seen, row: seen, credentials: oauth2(60), forceRefresh: true, now })).toBe('renew');
    // The background refresher's wider window.
    expect(
      underLock({ seen, row: seen, credentials: oauth2(16), forceRefresh: false, now, windowMs: 17 * 60_000 }),
    ).toBe('renew');
  });

  it('fails without asking when the grant was refused meanwhile, even when forced; before, only when not forced', () => {
    const refusedMeanwhile = { ...seen, refresh_error_at: now, refresh_error_permanent: true };
    expect(underLock({ seen, row: refusedMeanwhile, credentials: oauth2(5), forceRefresh: true, now })).toBe('failed');
    const refusedBefore = { ...refusedMeanwhile };
    expect(
      underLock({ seen: refusedBefore, row: refusedBefore, credentials: oauth2(5), forceRefresh: false, now }),
    ).toBe('failed');
    expect(
      underLock({ seen: refusedBefore, row: refusedBefore, credentials: oauth2(5), forceRefresh: true, now }),
    ).toBe('renew');
  });
});

describe('after a failed refresh', () => {
  it('goes on with a token that still works when the provider was only unreachable and the caller did not force', () => {
    expect(keepsCurrentToken({ retryable: true, forceRefresh: false, credentials: oauth2(5), now })).toBe(true);
    expect(keepsCurrentToken({ retryable: true, forceRefresh: false, credentials: oauth2(undefined), now })).toBe(true);
    expect(keepsCurrentToken({ retryable: true, forceRefresh: false, credentials: oauth2(-1), now })).toBe(false);
    expect(keepsCurrentToken({ retryable: false, forceRefresh: false, credentials: oauth2(5), now })).toBe(false);
    expect(keepsCurrentToken({ retryable: true, forceRefresh: true, credentials: oauth2(5), now })).toBe(false);
    const noTokenYet: StoredCredentials = {
      type: 'JWT',
      client_email: 'a@b.c',
      private_key: '-----BEGIN PRIVATE KEY-----',
    };
    expect(keepsCurrentToken({ retryable: true, forceRefresh: false, credentials: noTokenYet, now })).toBe(false);
  });
});
