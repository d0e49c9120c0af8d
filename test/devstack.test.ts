import { createServer, type AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import type { PortChooser } from '../src/devstack/portRetry.js';
import { startPostgres, assertPostgresReachable, type PostgresServer } from '../src/devstack/postgres.js';
import { freePorts } from '../src/devstack/process.js';
import { startTemporal, assertTemporalReachable, type TemporalServer } from '../src/devstack/temporal.js';

// The harness's own servers are shared by every test file, so this file starts a second pair to stop.
const local = { ...process.env, TEMPORAL_ADDRESS: '', DATABASE_URL: '' };

describe('dev stack: a server that goes away makes the run fail with a message naming it', () => {
  it('names Postgres when the cluster it started is stopped, within seconds, without hanging', async () => {
    const postgres = await startPostgres({ ephemeral: true, env: local });
    expect(postgres.owned).toBe(true);
    expect(postgres.version).toMatch(/^PostgreSQL \d+/);
    await assertPostgresReachable(postgres.url, 2000);
    await postgres.stop();

    const started = Date.now();
    await expect(assertPostgresReachable(postgres.url, 1500)).rejects.toThrow(
      /Postgres is not reachable at postgres:\/\/.*ECONNREFUSED/s,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
  });

  it('names Temporal when the dev server it started is stopped, within seconds, without hanging', async () => {
    const temporal = await startTemporal({ env: local });
    expect(temporal.owned).toBe(true);
    expect(temporal.version).toMatch(/Server \d+\.\d+/);
    await assertTemporalReachable(temporal.address, temporal.namespace, 2000);
    await temporal.stop();

    const started = Date.now();
    await expect(assertTemporalReachable(temporal.address, temporal.namespace, 1500)).rejects.toThrow(
      /Temporal is not reachable at 127\.0\.0\.1:\d+/,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    // Starting a dev server of its own takes over a minute on a loaded machine (a clean-clone CI run
    // timed out at 60 s); what is timed is the failure, above.
  }, 240_000);

  it('uses DATABASE_URL and TEMPORAL_ADDRESS as given, starting nothing, and names them when they do not answer', async () => {
    const env = { ...process.env, DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', TEMPORAL_ADDRESS: '127.0.0.1:1' };
    // Both wait up to 10 s for a server that may still be starting; run them side by side.
    await Promise.all([
      expect(startPostgres({ env })).rejects.toThrow(
        /Postgres is not reachable at postgres:\/\/nobody@127\.0\.0\.1:1\/none.*DATABASE_URL/s,
      ),
      expect(startTemporal({ env })).rejects.toThrow(/Temporal is not reachable at 127\.0\.0\.1:1.*TEMPORAL_ADDRESS/s),
    ]);
  }, 60_000);
});

describe('dev stack: a port found free but taken before the server binds it', () => {
  // The race of a CI run (a dev server's metrics port taken): the first start is handed a port a
  // listener holds; the server exits saying so and the second start, on other ports, comes up.
  it('starts the Temporal dev server again when its metrics port was taken, and Postgres when its port was', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const held = (holder.address() as AddressInfo).port;
    const handed: number[][] = [];
    const choosePorts: PortChooser = async (count, taken) => {
      const free = await freePorts(count, [...taken, held]);
      if (handed.length === 0) free[free.length - 1] = held;
      handed.push(free);
      return free;
    };
    let temporal: TemporalServer | undefined;
    let postgres: PostgresServer | undefined;
    try {
      temporal = await startTemporal({ env: local, choosePorts });
      expect(handed).toHaveLength(2);
      expect(handed[0]).toContain(held);
      await assertTemporalReachable(temporal.address, temporal.namespace, 2000);

      handed.length = 0;
      postgres = await startPostgres({ ephemeral: true, env: local, choosePorts });
      expect(handed).toHaveLength(2);
      expect(handed[0]).toEqual([held]);
      expect(handed[1]).not.toContain(held);
      await assertPostgresReachable(postgres.url, 2000);
      expect(new URL(postgres.url).port).toBe(String(handed[1]![0]));
    } finally {
      await temporal?.stop();
      await postgres?.stop();
      await new Promise((resolve) => holder.close(resolve));
    }
  }, 240_000);
});
