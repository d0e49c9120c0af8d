/**
 * Liveness and readiness (docs/operations.md, "Health and readiness") of an API process and of a worker
 * process with SERVICE_HEALTH_PORT, against a Temporal dev server this test starts and stops itself:
 * ready while it runs, 503 naming `temporal` while it is stopped (liveness still 200), ready again once
 * it is back. The answers name checks only, nothing of the addresses behind them.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, onTestFinished } from 'vitest';
import { freePort } from '../src/devstack/process.js';
import { startTemporal, type TemporalServer } from '../src/devstack/temporal.js';
import { eventually } from './helpers/eventually.js';
import { productionEnv, startService } from './helpers/serviceProcess.js';
import { stack } from './kit/stack.js';
import { useDatabase } from './kit/db.js';

interface Answer {
  status: number;
  body: { status?: string; checks?: Record<string, string>; error?: { code: string; message: string } };
  text: string;
  ms: number;
}

async function get(port: number, path: string): Promise<Answer> {
  const started = Date.now();
  const response = await fetch(`http://127.0.0.1:${port}${path}`, { signal: AbortSignal.timeout(30_000) });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text) as Answer['body'], text, ms: Date.now() - started };
}

const dataDir = mkdtempSync(join(tmpdir(), 'service-readiness-'));
afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

/** A dev server of this test's own, on a fixed port and a state file, so that a restart is the same server. */
async function ownTemporal(port: number): Promise<TemporalServer> {
  const env = { ...process.env };
  delete env['TEMPORAL_ADDRESS'];
  return startTemporal({ port, dbFile: join(dataDir, 'temporal.sqlite'), env, namespace: stack().temporalNamespace });
}

describe('readiness follows Temporal; liveness does not', () => {
  it('API /readyz and the worker health port: 200, then 503 naming temporal while it is down, then 200', async () => {
    const temporalPort = await freePort();
    let temporal = await ownTemporal(temporalPort);
    // Stopped when the test ends, passed or failed (an afterAll inside a test left this server running
    // after a clean-clone CI run); the variable holds the server of the restart by then.
    onTestFinished(() => temporal.stop());
    const { url } = await useDatabase();
    const [apiPort, healthPort] = [await freePort(), await freePort()];
    const env = productionEnv(url, { TEMPORAL_ADDRESS: temporal.address });
    const api = startService({ ...env, SERVICE_ROLE: 'api', PORT: String(apiPort) });
    const worker = startService({ ...env, SERVICE_ROLE: 'worker', SERVICE_HEALTH_PORT: String(healthPort) });
    await api.waitFor(/^ready\. Ctrl-C stops everything\./m, 180_000, 'the API to be ready');

    // The worker's health port answers from before its pollers run; ready only once they do.
    const early = await eventually(() => get(healthPort, '/readyz').catch(() => undefined), 180_000, 'the health port');
    if (early.status === 503) expect(early.body.checks?.['pollers']).toBe('down');
    await worker.waitFor(/^ready\. Ctrl-C stops everything\./m, 300_000, 'the worker to be ready');

    const up = { database: 'ok', temporal: 'ok' };
    expect(await get(apiPort, '/readyz')).toMatchObject({ status: 200, body: { status: 'ready', checks: up } });
    expect(await get(healthPort, '/readyz')).toMatchObject({
      status: 200,
      body: { status: 'ready', checks: { ...up, pollers: 'ok' } },
    });

    await temporal.stop();
    const down = (port: number) =>
      eventually(
        async () => {
          const answer = await get(port, '/readyz');
          return answer.status === 503 ? answer : undefined;
        },
        60_000,
        `readiness on port ${port} to say 503`,
      );
    for (const port of [apiPort, healthPort]) {
      const answer = await down(port);
      expect(answer.body).toMatchObject({
        status: 'not_ready',
        checks: { database: 'ok', temporal: 'down' },
        error: { code: 'not_ready', message: 'Not ready: temporal is down.' },
      });
      // Bounded by the 2 s deadline of each check, whatever Temporal does.
      expect(answer.ms).toBeLessThan(10_000);
      // Nothing of where Temporal or Postgres are.
      expect(answer.text).not.toMatch(/127\.0\.0\.1|localhost|postgres:|\d{4,5}/);
      expect(await get(port, '/livez')).toMatchObject({ status: 200, body: { status: 'ok' } });
    }
    expect(await get(apiPort, '/health')).toMatchObject({ status: 200 });

    temporal = await ownTemporal(temporalPort);
    for (const port of [apiPort, healthPort]) {
      await eventually(
        async () => ((await get(port, '/readyz')).status === 200 ? true : undefined),
        180_000,
        `readiness on port ${port} to be back`,
      );
    }
    // The worker survived the outage and its pollers run again.
    expect((await get(healthPort, '/readyz')).body.checks).toEqual({ ...up, pollers: 'ok' });

    const openapi = (await get(apiPort, '/openapi.json')).body as unknown as { paths: Record<string, unknown> };
    expect(Object.keys(openapi.paths)).toEqual(expect.arrayContaining(['/livez', '/readyz', '/health']));
    expect((await get(healthPort, '/nothing')).status).toBe(404);

    api.interrupt();
    worker.interrupt();
    expect(await api.exited, api.output()).toBe(0);
    expect(await worker.exited, worker.output()).toBe(0);
  }, 700_000);
});
