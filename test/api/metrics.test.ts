/**
 * The Prometheus metrics on the real stack: the test scrapes GET /metrics (the listener main.ts
 * starts on METRICS_PORT) before and after a real sync run, actions and API errors, and checks that
 * each counter moved by exactly what happened, with route templates and configuration names as labels
 * and never a connection id.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { startMetricsServer, type MetricsServer } from '../../src/metrics/server.js';
import { connectionOf, deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

let h: ApiHarness;
let metrics: MetricsServer;
let hooks: Awaited<ReturnType<typeof startFakeUpstream>>;
// A connection id that must never become a label value.
const CONNECTION = 'conn-metrics-7d1f';

/** Parsed exposition: every sample line as its name, labels and value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const pair of (match[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      labels[pair[1]!] = pair[2]!;
    }
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

async function scrape(): Promise<{ text: string; value(name: string, labels?: Record<string, string>): number }> {
  const response = await fetch(`${metrics.url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  const text = await response.text();
  const samples = parse(text);
  return {
    text,
    // The sum over every series of `name` whose labels include `labels`.
    value: (name, labels = {}) =>
      samples
        .filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))
        .reduce((sum, s) => sum + s.value, 0),
  };
}

beforeAll(async () => {
  h = await startApiHarness();
  metrics = await startMetricsServer({ host: '127.0.0.1', port: 0 });
  hooks = await startFakeUpstream((_request, response) => json(response, 200, { ok: true }));
  h.fake.setHandler((request, response, body) => {
    if (request.method === 'POST' && request.url === '/api/issues') {
      json(response, 200, { id: 'new', ...(JSON.parse(body) as object) });
      return;
    }
    json(response, 200, {
      issues: [
        { id: '1', title: 'one' },
        { id: '2', title: 'two' },
        { id: '3', title: 'three' },
      ],
    });
  });
  await deployWithConnection(h, 'k', CONNECTION);
  await h.api.webhooks.setSettings({ url: `${hooks.url}/hooks` });
  return async () => metrics.close();
});

const sync = { integration: INTEGRATION, sync: 'issues' };

describe('GET /metrics', () => {
  it('counts a sync run: started, succeeded, its duration, its records, and its webhook', async () => {
    const before = await scrape();
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: CONNECTION, syncs: ['issues'] });
    await eventually(
      async () =>
        (await h.api.call<{ runs: unknown[] }>('GET', '/sync/runs', { query: { provider_config_key: INTEGRATION } }))
          .runs.length === 1
          ? true
          : undefined,
      60_000,
      'the run in the history',
    );
    // The webhook is a child workflow of its own, delivered after the run is recorded.
    const after = await eventually(
      async () => {
        const now = await scrape();
        const delivered = now.value('service_webhook_deliveries_total', { outcome: 'delivered' });
        return delivered > before.value('service_webhook_deliveries_total', { outcome: 'delivered' }) ? now : undefined;
      },
      60_000,
      'the delivered webhook in the metrics',
    );
    const moved = (name: string, labels: Record<string, string> = {}) =>
      after.value(name, labels) - before.value(name, labels);
    expect(moved('service_sync_runs_started_total', sync)).toBe(1);
    expect(moved('service_sync_runs_finished_total', { ...sync, status: 'success' })).toBe(1);
    expect(moved('service_sync_runs_finished_total', { ...sync, status: 'failed' })).toBe(0);
    expect(moved('service_sync_run_duration_seconds_count', { ...sync, status: 'success' })).toBe(1);
    expect(moved('service_sync_run_duration_seconds_sum', { ...sync, status: 'success' })).toBeGreaterThan(0);
    expect(moved('service_sync_records_total', { ...sync, model: 'Issue', action: 'added' })).toBe(3);
    expect(moved('service_sync_records_total', { ...sync, model: 'Issue', action: 'updated' })).toBe(0);
    expect(moved('service_webhook_deliveries_total', { outcome: 'delivered' })).toBe(1);
    expect(moved('service_webhook_delivery_attempts_total', { result: 'ok' })).toBe(1);
    expect(hooks.requests.filter((r) => r.url === '/hooks')).toHaveLength(1);

    // A second run sees the same three issues: nothing added, nothing updated.
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: CONNECTION, syncs: ['issues'] });
    const second = await eventually(
      async () => {
        const now = await scrape();
        return now.value('service_sync_runs_finished_total', sync) ===
          after.value('service_sync_runs_finished_total', sync) + 1
          ? now
          : undefined;
      },
      60_000,
      'the second run in the metrics',
    );
    expect(
      second.value('service_sync_runs_started_total', sync) - after.value('service_sync_runs_started_total', sync),
    ).toBe(1);
    expect(second.value('service_sync_records_total', sync) - after.value('service_sync_records_total', sync)).toBe(0);
    expect(after.text).not.toContain(CONNECTION);
  });

  it('counts a failed run as failed', async () => {
    const before = await scrape();
    h.fake.setHandler((_request, response) => json(response, 500, { error: 'down' }));
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: CONNECTION, syncs: ['issues'] });
    const after = await eventually(
      async () => {
        const now = await scrape();
        return now.value('service_sync_runs_finished_total', { ...sync, status: 'failed' }) >
          before.value('service_sync_runs_finished_total', { ...sync, status: 'failed' })
          ? now
          : undefined;
      },
      90_000,
      'the failed run in the metrics',
    );
    expect(
      after.value('service_sync_runs_finished_total', { ...sync, status: 'failed' }) -
        before.value('service_sync_runs_finished_total', { ...sync, status: 'failed' }),
    ).toBe(1);
    expect(after.value('service_sync_runs_finished_total', { ...sync, status: 'success' })).toBe(
      before.value('service_sync_runs_finished_total', { ...sync, status: 'success' }),
    );
  });

  it('times actions by outcome, and counts API requests by route template and status', async () => {
    h.fake.setHandler((request, response, body) =>
      json(response, 200, { id: 'new', ...(JSON.parse(body || '{}') as object) }),
    );
    const before = await scrape();
    const ok = await h.api.actions.trigger(connectionOf(CONNECTION), {
      action_name: 'create-issue',
      input: { title: 'hello' },
    });
    expect(ok).toMatchObject({ ok: true });
    const refused = await h.api.raw('POST', '/action/trigger', {
      connection: connectionOf(CONNECTION),
      body: { action_name: 'create-issue', input: {} },
    });
    expect(refused.status).toBe(422);
    // API errors: an unknown connection (404 on a templated route), twice; no key (401); no route (404).
    for (let i = 0; i < 2; i++) {
      const missing = await h.api.raw('GET', `/connections/nobody-${i}`, {
        query: { provider_config_key: INTEGRATION },
      });
      expect(missing.status).toBe(404);
    }
    expect((await h.anonymous.raw('GET', '/connections')).status).toBe(401);
    expect((await h.api.raw('GET', '/no/such/route/x1')).status).toBe(404);
    const after = await scrape();
    const moved = (name: string, labels: Record<string, string> = {}) =>
      after.value(name, labels) - before.value(name, labels);
    const action = { integration: INTEGRATION, action: 'create-issue' };
    expect(moved('service_action_duration_seconds_count', { ...action, outcome: 'success' })).toBe(1);
    expect(moved('service_action_duration_seconds_count', { ...action, outcome: 'action_error' })).toBe(1);
    expect(moved('service_action_duration_seconds_sum', action)).toBeGreaterThan(0);
    const http = 'service_http_request_duration_seconds_count';
    expect(moved(http, { method: 'POST', route: '/action/trigger', status: '200' })).toBe(1);
    expect(moved(http, { method: 'POST', route: '/action/trigger', status: '422' })).toBe(1);
    expect(moved(http, { method: 'GET', route: '/connections/:connection_id', status: '404' })).toBe(2);
    expect(moved(http, { method: 'GET', route: '/connections', status: '401' })).toBe(1);
    expect(moved(http, { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    // Latency is observed: the bucket of +Inf holds every request, the sum is positive.
    expect(
      moved('service_http_request_duration_seconds_bucket', { route: '/connections/:connection_id', le: '+Inf' }),
    ).toBe(2);
    // Raw paths and ids never become labels.
    expect(after.text).not.toContain('nobody-0');
    expect(after.text).not.toContain('/no/such/route');
    // Node's own process metrics come along.
    expect(after.value('process_cpu_user_seconds_total')).toBeGreaterThan(0);
  });
});

describe('the metrics listener', () => {
  it('with a token, answers only a scrape that presents it; serves nothing but /metrics', async () => {
    const token = 'metrics-token-0123456789';
    const guarded = await startMetricsServer({ host: '127.0.0.1', port: 0, token });
    try {
      const none = await fetch(`${guarded.url}/metrics`);
      expect(none.status).toBe(401);
      expect(await none.json()).toMatchObject({ error: { code: 'invalid_metrics_token' } });
      const wrong = await fetch(`${guarded.url}/metrics`, { headers: { authorization: `Bearer ${token}x` } });
      expect(wrong.status).toBe(401);
      expect(await wrong.text()).not.toContain('service_');
      const right = await fetch(`${guarded.url}/metrics`, { headers: { authorization: `Bearer ${token}` } });
      expect(right.status).toBe(200);
      expect(await right.text()).toContain('service_sync_runs_started_total');
      const elsewhere = await fetch(`${guarded.url}/other`, { headers: { authorization: `Bearer ${token}` } });
      expect(elsewhere.status).toBe(404);
      expect(await elsewhere.json()).toMatchObject({ error: { code: 'route_not_found' } });
      const post = await fetch(`${guarded.url}/metrics`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}` },
      });
      expect(post.status).toBe(405);
    } finally {
      await guarded.close();
    }
  });

  it('is not on the API port', async () => {
    const response = await h.api.raw('GET', '/metrics');
    expect(response.status).toBe(404);
  });
});
