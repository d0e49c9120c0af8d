/**
 * Renews access tokens in the background, before they expire, so that a script (or a proxied request)
 * finds a valid token instead of waiting on the provider: every `intervalMs`, the tokens expiring
 * within `windowMs` are refreshed (OAuth 2 with a refresh token) or obtained again (client
 * credentials, service accounts, app installations), a bounded number per round. Each refresh takes
 * the connection's refresh lock (connectionService.ts), so on-demand refreshes, other rounds and
 * other worker processes never cause a second token request for one connection.
 */
import type { PostgresConnectionService } from './connectionService.js';
import { lineLog } from '../log.js';

/** How often the refresher looks. */
export const TOKEN_REFRESH_INTERVAL_MS = 60_000;
/**
 * Tokens expiring within this are renewed: the on-demand window (15 minutes, SPEC.md) plus two rounds,
 * so a token is renewed here before a script would have to wait for it.
 */
export const TOKEN_REFRESH_WINDOW_MS = 15 * 60_000 + 2 * TOKEN_REFRESH_INTERVAL_MS;
/** Connections renewed per round at most: a round is one token request per connection, one at a time. */
export const TOKEN_REFRESH_BATCH = 200;

export interface TokenRefresher {
  /** Runs one round now (tests; the timer runs them otherwise). */
  runOnce(): Promise<{ refreshed: number; failed: number }>;
  /** Stops the timer; resolves once a round in progress has finished. */
  stop(): Promise<void>;
}

export function startTokenRefresher(
  service: Pick<PostgresConnectionService, 'refreshExpiring'>,
  options: { intervalMs?: number; windowMs?: number; batch?: number; log?: (line: string) => void } = {},
): TokenRefresher {
  const intervalMs = options.intervalMs ?? TOKEN_REFRESH_INTERVAL_MS;
  const windowMs = options.windowMs ?? TOKEN_REFRESH_WINDOW_MS;
  const limit = options.batch ?? TOKEN_REFRESH_BATCH;
  const log = options.log ?? lineLog('token refresh');
  let running: Promise<{ refreshed: number; failed: number }> = Promise.resolve({ refreshed: 0, failed: 0 });
  const round = (): Promise<{ refreshed: number; failed: number }> => {
    running = running.then(async () => {
      try {
        const outcome = await service.refreshExpiring({ withinMs: windowMs, limit });
        if (outcome.failed > 0) log(`[token refresh] ${outcome.failed} token(s) could not be renewed`);
        return outcome;
      } catch (error) {
        // Postgres may be restarting: the next round tries again; tokens are still renewed on demand.
        log(`[token refresh] round failed (next in ${Math.round(intervalMs / 1000)} s): ${(error as Error).message}`);
        return { refreshed: 0, failed: 0 };
      }
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
