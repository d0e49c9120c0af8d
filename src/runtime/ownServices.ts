/**
 * A request step's own bookkeeping waits for the service's own servers. Before a script's request goes
 * out, its activity verifies the calling run (Temporal), reads the step ledger and the connection's
 * credentials (Postgres). A script's `retries` count the external API's failures; a Postgres or Temporal
 * restart is not the API's, and failed a run that asked for no retries (test/chaos/faults.test.ts: a
 * `svc.get` failed `http_error` at the moment Postgres restarted). So those phases are tried again while
 * the failure says our own server cannot be reached, for a bounded time; past it the step fails as
 * before, retryable, with the error that says which server.
 */
import { isDatabaseUnavailable } from '../db/pool.js';
import { isServiceError } from '../errors.js';

/**
 * How long a step waits for Postgres or Temporal to answer again (a restart takes about a second here, a
 * managed database's failover tens of seconds). With the request's own wait (60 s), inside the attempt's
 * 90 s (workflows/svcOperations.ts REQUEST_ATTEMPT_TIMEOUT).
 */
export const OWN_SERVICES_WAIT_MS = 25_000;

/** Whether `error` says Postgres or Temporal cannot be reached right now (not that a query failed). */
export function ownServiceUnavailable(error: unknown): boolean {
  return isDatabaseUnavailable(error) || (isServiceError(error) && error.code === 'temporal_unavailable');
}

/** Runs `work`, again while it fails because Postgres or Temporal cannot be reached, up to `waitMs`. */
export async function whileOwnServicesReturn<T>(
  work: () => Promise<T>,
  options: { waitMs?: number; sleep?: (ms: number) => Promise<void> } = {},
): Promise<T> {
  const deadline = Date.now() + (options.waitMs ?? OWN_SERVICES_WAIT_MS);
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  for (let delayMs = 100; ; delayMs = Math.min(delayMs * 2, 2_000)) {
    try {
      return await work();
    } catch (error) {
      if (!ownServiceUnavailable(error) || Date.now() + delayMs > deadline) throw error;
      await sleep(delayMs);
    }
  }
}
