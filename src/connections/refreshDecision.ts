/**
 * The token refresh's decisions (tokenRefresh.ts), pure: whether a caller asks the provider at all,
 * what it does once it holds the connection's refresh lock, and whether a failed refresh still leaves a
 * token to use. Unit tests: refreshDecision.test.ts, beside it.
 */
import { expiresSoon, hasToken, hasUsableToken, REFRESH_WINDOW_MS, type StoredCredentials } from './credentials.js';

/** The columns of a connection's row that say when its token was last renewed, and when that last failed. */
export interface RefreshMarks {
  credentials_refreshed_at: Date | null;
  refresh_error_at: Date | null;
  refresh_error_permanent: boolean;
}

/**
 * Before any lock (SPEC.md "Authentication" 4): `current` when there is nothing to renew (no token
 * kind, or a token valid beyond the window and no `forceRefresh`); `failed` when the provider already
 * refused the grant and the caller did not force a new try; `refresh` otherwise.
 */
export function beforeRefresh(input: {
  credentials: StoredCredentials;
  row: RefreshMarks;
  forceRefresh: boolean;
  now: Date;
}): 'current' | 'failed' | 'refresh' {
  const { credentials, row, forceRefresh } = input;
  if (!hasToken(credentials) || !(forceRefresh || expiresSoon(credentials, input.now))) return 'current';
  if (row.refresh_error_permanent && !forceRefresh) return 'failed';
  return 'refresh';
}

/**
 * Under the connection's refresh lock, from the row as this caller read it before waiting (`seen`) and
 * as it is now (`row`): `current` when another caller renewed it meanwhile, or it no longer needs it;
 * `failed` when the grant is refused (by a refresh meanwhile, or before, unless forced); `renew` to ask
 * the provider. "Meanwhile" compares stored values, not clocks, so that it holds when the processes'
 * clocks disagree.
 */
export function underLock(input: {
  seen: RefreshMarks;
  row: RefreshMarks;
  credentials: StoredCredentials;
  forceRefresh: boolean;
  now: Date;
  windowMs?: number;
}): 'current' | 'failed' | 'renew' {
  const { seen, row, credentials, forceRefresh } = input;
  if (!hasToken(credentials)) return 'current';
  const refreshedMeanwhile = !sameTime(row.credentials_refreshed_at, seen.credentials_refreshed_at);
  // Also when not forced: a provider issuing tokens shorter than the window must not make every waiter refresh.
  if (
    refreshedMeanwhile ||
    (!forceRefresh && !expiresSoon(credentials, input.now, input.windowMs ?? REFRESH_WINDOW_MS))
  )
    return 'current';
  const failedMeanwhile = !sameTime(row.refresh_error_at, seen.refresh_error_at);
  if (row.refresh_error_permanent && (failedMeanwhile || !forceRefresh)) return 'failed';
  return 'renew';
}

/**
 * After a failed refresh: whether the caller goes on with the token it has. A provider that is only
 * unreachable (a retryable failure) should not break runs while the current token still works; a
 * forced refresh reports the failure.
 */
export function keepsCurrentToken(input: {
  retryable: boolean;
  forceRefresh: boolean;
  credentials: StoredCredentials;
  now: Date;
}): boolean {
  return input.retryable && !input.forceRefresh && hasUsableToken(input.credentials, input.now);
}

function sameTime(a: Date | null, b: Date | null): boolean {
  return (a?.getTime() ?? null) === (b?.getTime() ?? null);
}
