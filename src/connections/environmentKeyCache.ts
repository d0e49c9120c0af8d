/**
 * Environments by secret key digest, kept by an API process so that a request is authenticated
 * without a query of its own (issue 31: the lookup was one of the three round trips of a page of
 * GET /records). What keeps a rotated or deleted key from working on:
 *
 * - every change of an environment (EnvironmentStore: rotate, rename, settings, delete) sends
 *   `NOTIFY environment_keys` in its own transaction, and each process's cache LISTENs on a
 *   connection of its own and forgets everything when one arrives: a rotated key stops working as
 *   soon as Postgres delivers the notification (milliseconds), in every process; in the process that
 *   made the change, before the change returns;
 * - entries are kept only while that connection is up: when it drops, the cache is emptied and
 *   unused until it listens again, so no notification can be missed unnoticed;
 * - a lookup that raced a change is not kept (a generation count), and an entry is kept TTL_MS at
 *   the most, the bound should a notification be lost in a way the connection does not report.
 *
 * Only keys that were found are kept: an unknown key is looked up every time.
 */
import pg from 'pg';
import type { Pool } from '../db/pool.js';
import { log } from '../log.js';

/** The channel of environment changes (EnvironmentStore sends it with each). */
export const ENVIRONMENT_CHANGES = 'environment_keys';

/** The longest an entry is kept, whatever happens. */
export const KEY_CACHE_TTL_MS = 10_000;
const RECONNECT_MS = 1000;
const ENTRIES_KEPT = 10_000;

export interface EnvironmentKeyCache<T> {
  /** The environment kept for this digest, if any. */
  get(digest: string): T | undefined;
  /** The generation to hand to `set`: taken before the lookup whose result is kept. */
  generation(): number;
  /** Keeps a lookup's result, unless a change was notified since `generation` was taken. */
  set(digest: string, environment: T, generation: number): void;
  /** Forgets everything (a change in this process). */
  invalidate(): void;
  stop(): Promise<void>;
}

export async function startEnvironmentKeyCache<T>(
  db: Pool,
  { ttlMs = KEY_CACHE_TTL_MS }: { ttlMs?: number } = {},
): Promise<EnvironmentKeyCache<T>> {
  const entries = new Map<string, { environment: T; at: number }>();
  let generation = 0;
  let listening = false;
  let stopped = false;
  let client: pg.Client | undefined;
  let retry: NodeJS.Timeout | undefined;

  const invalidate = () => {
    generation++;
    entries.clear();
  };

  const lost = new WeakSet<pg.Client>();
  // Said once per outage, not at every attempt to listen again.
  let reported = false;
  const down = (gone: pg.Client, why: string) => {
    if (lost.has(gone)) return;
    lost.add(gone);
    listening = false;
    invalidate();
    gone.removeAllListeners('notification');
    gone.end().catch(() => undefined);
    if (stopped) return;
    if (!reported) {
      log.warn(
        { component: 'db' },
        `secret key cache: not listening (${why}); keys are looked up every time until it is back`,
      );
      reported = true;
    }
    retry = setTimeout(() => void listen(), RECONNECT_MS);
    retry.unref();
  };

  async function listen(): Promise<void> {
    const next = new pg.Client({
      ...db.options,
      application_name: `${db.options.application_name ?? 'integration-service'} key cache`,
    });
    next.on('error', (error) => down(next, error.message));
    next.on('end', () => down(next, 'connection ended'));
    next.on('notification', (message) => {
      if (message.channel === ENVIRONMENT_CHANGES) invalidate();
    });
    try {
      await next.connect();
      await next.query(`LISTEN ${ENVIRONMENT_CHANGES}`);
    } catch (error) {
      down(next, error instanceof Error ? error.message : String(error));
      return;
    }
    if (stopped) {
      await next.end().catch(() => undefined);
      return;
    }
    client = next;
    // Whatever changed while nobody listened: nothing is kept from before.
    invalidate();
    listening = true;
    reported = false;
  }

  await listen();
  return {
    get(digest) {
      const entry = listening ? entries.get(digest) : undefined;
      if (!entry) return undefined;
      if (performance.now() - entry.at > ttlMs) {
        entries.delete(digest);
        return undefined;
      }
      return entry.environment;
    },
    generation: () => generation,
    set(digest, environment, taken) {
      if (!listening || taken !== generation) return;
      entries.set(digest, { environment, at: performance.now() });
      if (entries.size > ENTRIES_KEPT) entries.delete(entries.keys().next().value!);
    },
    invalidate,
    async stop() {
      stopped = true;
      listening = false;
      clearTimeout(retry);
      invalidate();
      if (client) lost.add(client);
      await client?.end().catch(() => undefined);
    },
  };
}
