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
  /** Takes one request; refused while the budget is below one (spent, or in debt). */
  take(key: string): { allowed: true } | { allowed: false; retryAfterSeconds: number };
  /**
   * Charges `cost` requests for work already done (a body's parse and validation, src/api/jsonBody.ts):
   * never refused, it may put the budget in debt, which later requests wait out.
   */
  charge(key: string, cost: number): void;
  /** When the key's budget is in debt: how long until it is not (work of the key waits until then). */
  owing(key: string): { retryAfterSeconds: number } | undefined;
}

export function createRateLimiter({ perSecond = 200, burst }: RateLimitOptions = {}): RateLimiter {
  const capacity = burst ?? perSecond * 2;
  const buckets = new Map<string, { tokens: number; at: number }>();
  /** The key's bucket, refilled to now. */
  const refilled = (key: string) => {
    const now = performance.now();
    const bucket = buckets.get(key) ?? { tokens: capacity, at: now };
    bucket.tokens = Math.min(capacity, bucket.tokens + ((now - bucket.at) / 1000) * perSecond);
    bucket.at = now;
    buckets.set(key, bucket);
    return bucket;
  };
  return {
    take(key) {
      const bucket = refilled(key);
      if (bucket.tokens >= 1) {
        bucket.tokens -= 1;
        return { allowed: true };
      }
      return { allowed: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / perSecond)) };
    },
    charge(key, cost) {
      if (cost > 0) refilled(key).tokens -= cost;
    },
    owing(key) {
      const bucket = refilled(key);
      return bucket.tokens < 0 ? { retryAfterSeconds: Math.max(1, Math.ceil(-bucket.tokens / perSecond)) } : undefined;
    },
  };
}
