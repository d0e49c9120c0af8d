/**
 * Renews access tokens in the background, before they expire, so that a script (or a proxied request)
 * finds a valid token instead of waiting on the provider: every `intervalMs` a round renews the tokens
 * expiring within `windowMs` (OAuth 2 with a refresh token), or obtains them again (client
 * credentials, service accounts, app installations). Each refresh takes the connection's refresh lock
 * (tokenRefresh.ts), so on-demand refreshes and other worker processes never cause a second token
 * request for one connection.
 *
 * Fair between environments (issue 29, finding 6), so that one environment's connections whose token
 * URL never answers cannot starve another's:
 * - a round claims its connections taking the environments in turn, at most `claimsPerEnvironment` of
 *   one (ConnectionService.claimExpiring), and a claim pushes the connection's next attempt back by a
 *   delay that doubles while its attempts fail (a timeout counts): a hanging connection is not taken
 *   again next round, and another process does not take it meanwhile;
 * - refreshes run `concurrency` at a time, at most `perEnvironment` of one environment, the
 *   environments served in turn: an environment whose token requests hang holds `perEnvironment`
 *   slots, never all of them;
 * - a round starts refreshes for `roundMs` at most; what it claimed and did not start is given back,
 *   and it ends when the ones it started have (a token request gives up after 15 s);
 * - rounds never overlap: a tick that finds a round still running is skipped.
 */
import type { RefreshClaim, RefreshClaimSystem } from './refreshClaims.js';
import { lineLog } from '../log.js';

/** How often the refresher looks. */
export const TOKEN_REFRESH_INTERVAL_MS = 60_000;
/**
 * Tokens expiring within this are renewed: the on-demand window (15 minutes, SPEC.md) plus two rounds,
 * so a token is renewed here before a script would have to wait for it.
 */
export const TOKEN_REFRESH_WINDOW_MS = 15 * 60_000 + 2 * TOKEN_REFRESH_INTERVAL_MS;
/** Connections claimed per round at most. */
export const TOKEN_REFRESH_BATCH = 200;
/** Of which one environment's at most. */
export const TOKEN_REFRESH_CLAIMS_PER_ENVIRONMENT = 100;
/** Token requests in flight at once, per process (each holds a database connection while it waits). */
export const TOKEN_REFRESH_CONCURRENCY = 4;
/** Of which one environment's at most. */
export const TOKEN_REFRESH_PER_ENVIRONMENT = 2;
/** How long a round starts refreshes; those it claimed and did not start wait for the next round. */
export const TOKEN_REFRESH_ROUND_MS = 45_000;
/** The delay before a connection is tried again after an attempt that did not renew it, doubling to the maximum. */
export const TOKEN_REFRESH_BACKOFF = { initialMs: 60_000, maxMs: 60 * 60_000 };

export interface TokenRefresherOptions {
  intervalMs?: number;
  windowMs?: number;
  batch?: number;
  claimsPerEnvironment?: number;
  concurrency?: number;
  perEnvironment?: number;
  roundMs?: number;
  backoff?: { initialMs: number; maxMs: number };
  log?: (line: string) => void;
}

export interface RoundOutcome {
  refreshed: number;
  failed: number;
  /** Claimed but not started before the round's time was up: given back. */
  deferred: number;
}

export interface TokenRefresher {
  /** Runs a round now, or answers the one in progress (tests; the timer runs them otherwise). */
  runOnce(): Promise<RoundOutcome>;
  /** Stops the timer; resolves once a round in progress has finished. */
  stop(): Promise<void>;
}

type RefreshService = Pick<RefreshClaimSystem, 'claimExpiring' | 'refreshClaimed' | 'releaseClaims'>;

export function startTokenRefresher(service: RefreshService, options: TokenRefresherOptions = {}): TokenRefresher {
  const intervalMs = options.intervalMs ?? TOKEN_REFRESH_INTERVAL_MS;
  const windowMs = options.windowMs ?? TOKEN_REFRESH_WINDOW_MS;
  const log = options.log ?? lineLog('token refresh');
  let running: Promise<RoundOutcome> | undefined;

  const round = (): Promise<RoundOutcome> => {
    running ??= refreshRound(service, { ...options, windowMs })
      .then((outcome) => {
        if (outcome.failed > 0) log(`[token refresh] ${outcome.failed} token(s) could not be renewed`);
        return outcome;
      })
      .catch((error: unknown) => {
        // Postgres may be restarting: the next round tries again; tokens are still renewed on demand.
        log(`[token refresh] round failed (next in ${Math.round(intervalMs / 1000)} s): ${(error as Error).message}`);
        return { refreshed: 0, failed: 0, deferred: 0 };
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const timer = setInterval(() => void round(), intervalMs);
  timer.unref();
  return {
    runOnce: round,
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}

/** One round: claim fairly, refresh with bounded and fair concurrency, give back what was not started. */
export async function refreshRound(
  service: RefreshService,
  options: TokenRefresherOptions & { windowMs: number },
): Promise<RoundOutcome> {
  const concurrency = Math.max(1, options.concurrency ?? TOKEN_REFRESH_CONCURRENCY);
  const perEnvironment = Math.max(1, Math.min(concurrency, options.perEnvironment ?? TOKEN_REFRESH_PER_ENVIRONMENT));
  const deadline = Date.now() + (options.roundMs ?? TOKEN_REFRESH_ROUND_MS);
  const claims = await service.claimExpiring({
    withinMs: options.windowMs,
    limit: options.batch ?? TOKEN_REFRESH_BATCH,
    perEnvironment: options.claimsPerEnvironment ?? TOKEN_REFRESH_CLAIMS_PER_ENVIRONMENT,
    backoff: options.backoff ?? TOKEN_REFRESH_BACKOFF,
  });
  const outcome: RoundOutcome = { refreshed: 0, failed: 0, deferred: 0 };
  const scheduler = fairQueue(claims, perEnvironment);
  await Promise.all(
    Array.from({ length: Math.min(concurrency, claims.length) }, async () => {
      for (;;) {
        const claim = await scheduler.next();
        if (claim === undefined) return;
        if (Date.now() >= deadline) {
          scheduler.putBack(claim);
          return;
        }
        try {
          const result = await service.refreshClaimed(claim, options.windowMs);
          outcome[result]++;
        } finally {
          scheduler.done(claim);
        }
      }
    }),
  );
  const left = scheduler.drain();
  outcome.deferred = left.length;
  await service.releaseClaims(left);
  return outcome;
}

/**
 * The claims of a round, handed out one environment after another, never more than `perEnvironment`
 * of one environment at a time. `next()` waits while every environment with claims left is at its
 * limit, and answers undefined once no claim is left.
 */
export function fairQueue(claims: readonly RefreshClaim[], perEnvironment: number) {
  const queues = new Map<string, RefreshClaim[]>();
  for (const claim of claims) {
    const queue = queues.get(claim.scope.environmentId) ?? [];
    queue.push(claim);
    queues.set(claim.scope.environmentId, queue);
  }
  const inFlight = new Map<string, number>();
  let turn: string[] = [...queues.keys()];
  const waiters: (() => void)[] = [];

  function done(claim: RefreshClaim): void {
    inFlight.set(claim.scope.environmentId, (inFlight.get(claim.scope.environmentId) ?? 1) - 1);
    waiters.splice(0).forEach((wake) => wake());
  }

  function take(): RefreshClaim | undefined {
    for (let index = 0; index < turn.length; index++) {
      const environmentId = turn[index]!;
      if ((inFlight.get(environmentId) ?? 0) >= perEnvironment) continue;
      const claim = queues.get(environmentId)?.shift();
      if (claim === undefined) continue;
      inFlight.set(environmentId, (inFlight.get(environmentId) ?? 0) + 1);
      // This environment goes to the back of the turn.
      turn = [...turn.slice(0, index), ...turn.slice(index + 1), environmentId];
      return claim;
    }
    return undefined;
  }
  const left = (): number => [...queues.values()].reduce((sum, queue) => sum + queue.length, 0);

  return {
    async next(): Promise<RefreshClaim | undefined> {
      for (;;) {
        const claim = take();
        if (claim !== undefined || left() === 0) return claim;
        await new Promise<void>((resolve) => waiters.push(resolve));
      }
    },
    /** A claim handed out has been dealt with: its environment may have another. */
    done,
    /** A claim handed out and not started: first of its environment again. */
    putBack(claim: RefreshClaim): void {
      queues.get(claim.scope.environmentId)?.unshift(claim);
      done(claim);
    },
    /** The claims not handed out, removed from the queue. */
    drain(): RefreshClaim[] {
      const rest = [...queues.values()].flat();
      queues.clear();
      waiters.splice(0).forEach((wake) => wake());
      return rest;
    },
  };
}
