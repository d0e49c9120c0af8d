/**
 * Secret keys kept by API processes (src/connections/environmentKeyCache.ts, issue 31): a kept key
 * spares the lookup query, and still stops working when it is rotated or its environment deleted, in
 * the process that changed it at once and in every other one as soon as Postgres notifies them; a
 * process whose notification connection is lost keeps nothing until it listens again.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import type { Pool } from '../../src/db/pool.js';
import { createEnvironmentStore, type EnvironmentStore } from '../../src/connections/environmentStore.js';
import { loadSettings } from '../../src/settings.js';
import { eventually } from '../helpers/eventually.js';
import { uniqueName } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';

let pool: Pool;
let lookups = 0;

/** The file's pool, counting in `lookups` the key lookups sent through it. */
function countingLookups(): Pool {
  return new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return (...args: unknown[]) => {
        if (typeof args[0] === 'string' && args[0].includes('secret_key_hash = $1')) lookups++;
        return (target.query as (...a: unknown[]) => unknown)(...args);
      };
    },
  });
}

/** Two API processes' stores on one database, each keeping keys, their key lookups counted. */
async function twoProcesses() {
  const counted = countingLookups();
  const a = createEnvironmentStore({ db: counted, holdings: [] });
  const b = createEnvironmentStore({ db: counted, holdings: [] });
  const stops = [await a.cacheSecretKeys(), await b.cacheSecretKeys()];
  return { a, b, stop: () => Promise.all(stops.map((stop) => stop())) };
}

/**
 * Runs `body` with two processes' stores (twoProcesses) and an environment created in `a` that `b`
 * already knows, then stops their caches.
 */
async function withTwoProcesses(
  body: (context: {
    a: EnvironmentStore;
    b: EnvironmentStore;
    environment: { id: string };
    secretKey: string;
  }) => Promise<void>,
): Promise<void> {
  const { a, b, stop } = await twoProcesses();
  try {
    const { environment, secretKey } = await a.create({ name: uniqueName('env').toLowerCase() });
    expect((await b.findBySecretKey(secretKey))?.id).toBe(environment.id);
    await body({ a, b, environment, secretKey });
  } finally {
    await stop();
  }
}

beforeAll(async () => {
  ({ pool } = await useDatabase());
});

describe('kept secret keys', () => {
  it('spare the lookup, and a rotated key stops working in the rotating process at once and in the other one when notified', async () => {
    await withTwoProcesses(async ({ a, b, environment, secretKey }) => {
      const before = lookups;
      for (let i = 0; i < 20; i++) expect((await b.findBySecretKey(secretKey))?.id).toBe(environment.id);
      expect(lookups).toBe(before);
      expect((await a.findBySecretKey(secretKey))?.id).toBe(environment.id);

      const started = Date.now();
      const rotated = await a.rotateSecretKey(environment.id);
      expect(await a.findBySecretKey(secretKey)).toBeUndefined();
      await eventually(async () => ((await b.findBySecretKey(secretKey)) === undefined ? true : undefined), 5000);
      expect(Date.now() - started).toBeLessThan(5000);
      expect((await b.findBySecretKey(rotated))?.id).toBe(environment.id);
      // A renamed environment is seen with its new name.
      const name = uniqueName('renamed').toLowerCase();
      await a.rename(environment.id, name);
      await eventually(async () => ((await b.findBySecretKey(rotated))?.name === name ? true : undefined), 5000);
    });
  });

  it('stop working when the environment is deleted', async () => {
    await withTwoProcesses(async ({ a, b, environment, secretKey }) => {
      await a.delete(environment.id);
      expect(await a.findBySecretKey(secretKey)).toBeUndefined();
      await eventually(async () => ((await b.findBySecretKey(secretKey)) === undefined ? true : undefined), 5000);
    });
  });

  it('are not used while the notification connection is lost: a rotation then is seen at once', async () => {
    await withTwoProcesses(async ({ a, b, environment, secretKey }) => {
      // Every listener of this database loses its connection (as a Postgres restart would do it).
      await pool.query(
        `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND application_name LIKE '% key cache'`,
      );
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Rotated straight in the database, as if its notification were lost too.
      await pool.query(`UPDATE environments SET secret_key_hash = 'x' WHERE id = $1`, [environment.id]);
      expect(await b.findBySecretKey(secretKey)).toBeUndefined();
      // Listening again (after about a second), it keeps keys again.
      const { secretKey: other } = await a.create({ name: uniqueName('env').toLowerCase() });
      await eventually(
        async () => {
          await b.findBySecretKey(other);
          const before = lookups;
          await b.findBySecretKey(other);
          return lookups === before ? true : undefined;
        },
        10_000,
        'the cache to listen again',
      );
    });
  });

  it('are kept no longer than their ttl (SERVICE_KEY_CACHE_SECONDS: 0 to an hour, 10 s unless set)', async () => {
    const counted = countingLookups();
    const store = createEnvironmentStore({ db: counted, holdings: [] });
    const stop = await store.cacheSecretKeys({ ttlMs: 300 });
    try {
      const { environment, secretKey } = await store.create({ name: uniqueName('env').toLowerCase() });
      expect((await store.findBySecretKey(secretKey))?.id).toBe(environment.id);
      const before = lookups;
      expect((await store.findBySecretKey(secretKey))?.id).toBe(environment.id);
      expect(lookups).toBe(before);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect((await store.findBySecretKey(secretKey))?.id).toBe(environment.id);
      expect(lookups).toBe(before + 1);
    } finally {
      await stop();
    }
    expect(loadSettings({}).SERVICE_KEY_CACHE_SECONDS).toBe(10);
    expect(loadSettings({ SERVICE_KEY_CACHE_SECONDS: '0' }).SERVICE_KEY_CACHE_SECONDS).toBe(0);
    expect(() => loadSettings({ SERVICE_KEY_CACHE_SECONDS: '7200' })).toThrow(/SERVICE_KEY_CACHE_SECONDS/);
  });
});
