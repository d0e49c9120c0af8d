/** A flaky external API (5xx, 429 with Retry-After, connection resets) is retried exactly as configured. */
import { beforeAll, describe, expect, it } from 'vitest';
import { createSyncControl, type SyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, useRuntime, type RuntimeHarness } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

describe('retries of svc requests', () => {
  let h: RuntimeHarness;
  let control: SyncControl;
  const times = new Map<string, number[]>();
  const failuresLeft = new Map<string, number>();
  let api: Awaited<ReturnType<typeof startFakeUpstream>>;

  beforeAll(async () => {
    h = await useRuntime();
    control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const key = url.searchParams.get('key') ?? '';
      times.set(key, [...(times.get(key) ?? []), Date.now()]);
      const left = failuresLeft.get(key) ?? 0;
      if (left > 0) {
        failuresLeft.set(key, left - 1);
        if (url.pathname === '/reset') {
          request.socket.destroy();
          return;
        }
        if (url.pathname === '/429') return json(response, 429, { error: 'slow down' }, { 'retry-after': '2' });
        if (url.pathname === '/418') return json(response, 418, { error: 'teapot' });
        return json(response, 503, { error: 'unavailable' });
      }
      json(response, 200, { ok: key });
    });
    h.connections.setBaseUrl(api.url);
  });

  const call = async (path: string, key: string, failures: number, config: string) => {
    failuresLeft.set(key, failures);
    const hash = await h.scripts.put(
      bundle(`async function (svc) {
        try { const res = await svc.get({ endpoint: '${path}', params: { key: '${key}' }, ${config} }); return { status: res.status, data: res.data }; }
        catch (e) { return { failed: e.code, status: e.response ? e.response.status : undefined, errno: e.errno }; }
      }`),
    );
    const outcome = await control.runAction({
      definition: actionDefinition(key, hash),
      connectionId: 'c',
      input: {},
      options: { retryInitialIntervalMs: 300 },
    });
    const hits = times.get(key) ?? [];
    return { outcome, hits: hits.length, gaps: hits.slice(1).map((time, i) => time - hits[i]!) };
  };

  it('5xx: retried `retries` times with exponential back-off, then the error reaches the script', async () => {
    const ok = await call('/503', 'a', 2, 'retries: 2');
    expect(ok.outcome).toEqual({ ok: true, output: { status: 200, data: { ok: 'a' } } });
    expect(ok.hits).toBe(3);
    expect(ok.gaps[0]).toBeGreaterThanOrEqual(300);
    expect(ok.gaps[1]).toBeGreaterThanOrEqual(600);

    const exhausted = await call('/503', 'b', 5, 'retries: 1');
    expect(exhausted.outcome).toEqual({ ok: true, output: { failed: 'http_status_error', status: 503 } });
    expect(exhausted.hits).toBe(2);

    const none = await call('/503', 'c', 5, '');
    expect(none.hits).toBe(1); // retries default to 0
  });

  it('429 honours Retry-After over the back-off', async () => {
    const result = await call('/429', 'd', 1, 'retries: 3');
    expect(result.outcome).toEqual({ ok: true, output: { status: 200, data: { ok: 'd' } } });
    expect(result.hits).toBe(2);
    expect(result.gaps[0]).toBeGreaterThanOrEqual(1900);
  });

  it('connection resets are retried; other statuses only with retryOn', async () => {
    const reset = await call('/reset', 'e', 2, 'retries: 2');
    expect(reset.outcome).toEqual({ ok: true, output: { status: 200, data: { ok: 'e' } } });
    expect(reset.hits).toBe(3);

    const resetExhausted = await call('/reset', 'f', 3, 'retries: 1');
    expect(resetExhausted.outcome).toEqual({ ok: true, output: { failed: 'http_network_error', errno: 'ECONNRESET' } });
    expect(resetExhausted.hits).toBe(2);

    const teapot = await call('/418', 'g', 1, 'retries: 2');
    expect(teapot.outcome).toEqual({ ok: true, output: { failed: 'http_status_error', status: 418 } });
    expect(teapot.hits).toBe(1);

    const teapotRetried = await call('/418', 'h', 1, 'retries: 2, retryOn: [418]');
    expect(teapotRetried.outcome).toEqual({ ok: true, output: { status: 200, data: { ok: 'h' } } });
    expect(teapotRetried.hits).toBe(2);
  });
});
