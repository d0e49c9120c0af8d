/**
 * Per-key token buckets. In memory, so each API process limits on its own: with N processes behind a
 * load balancer a key gets up to N times the rate. That is the usual trade for not putting a shared
 * store on every request's path; docs/operations.md says so.
 */
export interface RateLimitOptions {
  /** Sustained requests per second per key. @default 200 */
  perSecond?: number;
  /** Burst size. @default 2 × perSecond */
  burst?: number;
}

export interface RateLimiter {
  /** Takes `cost` requests (default 1; at most the burst, so that any single request can pass). */
  take(key: string, cost?: number): { allowed: true } | { allowed: false; retryAfterSeconds: number };
}

export function createRateLimiter({ perSecond = 200, burst }: RateLimitOptions = {}): RateLimiter {
  const capacity = burst ?? perSecond * 2;
  const buckets = new Map<string, { tokens: number; at: number }>();
  return {
    take(key, cost = 1) {
      const need = Math.min(cost, capacity);
      const now = performance.now();
      const bucket = buckets.get(key) ?? { tokens: capacity, at: now };
      bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
      bucket.at = now;
      buckets.set(key, bucket);
      if (bucket.tokens >= need) {
        bucket.tokens -= need;
        return { allowed: true };
      }
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((need - bucket.tokens) / perSecond)) };
    },
  };
}
