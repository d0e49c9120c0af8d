/**
 * What the sync entity does when a run ends, on the real stack: the run enters the history that
 * GET /sync/runs reads (the dashboard's chart), and the application's webhook hears of it, signed,
 * with per-model counts or the error.
 */
import { createHmac } from 'node:crypto';
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, withFakeUpstream, type ApiHarness, type FakeUpstream } from '../kit/index.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { deployWithConnection } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';
import { json } from '../kit/upstream.js';

let secret = '';
let failing = false;

interface Run {
  run_id: string;
  sync: string;
  status: string;
  started_at: string;
  finished_at: string;
  duration_ms: number;
  models: Record<string, { added: number; updated: number; deleted: number }>;
  error: { code: string; message: string } | null;
}

const runs = async (h: ApiHarness) =>
  (
    await h.api.call<{ runs: Run[] }>('GET', '/sync/runs', {
      query: { provider_config_key: INTEGRATION, connection_id: 'c1' },
    })
  ).runs;

/**
 * `app`: the application's webhook receiver. `api`: the API, its fake external API answering two
 * issues (404 once `failing`), deployed with connection c1, its webhooks sent to `app`.
 */
const it = kit.extend<{ app: FakeUpstream; api: ApiHarness }>({
  app: [
    // eslint-disable-next-line no-empty-pattern -- vitest reads a fixture's dependencies from this pattern
    async ({}, use) => withFakeUpstream((_request, response) => json(response, 200, { ok: true }), use),
    { scope: 'file' },
  ],
  api: [
    async ({ db, upstream, app }, use) =>
      withApiHarness({ database: db, upstream }, use, async (h) => {
        h.fake.setHandler((_request, response) =>
          failing
            ? json(response, 404, { error: 'gone' })
            : json(response, 200, {
                issues: [
                  { id: '1', title: 'one' },
                  { id: '2', title: 'two' },
                ],
              }),
        );
        await deployWithConnection(h, 'k');
        secret = (await h.api.webhooks.setSettings({ url: `${app.url}/hooks` })).generated_secret ?? '';
      }),
    { scope: 'file' },
  ],
});

describe('after each sync run', () => {
  it('records a successful run with its per-model counts, and tells the application, signed', async ({
    api: h,
    app,
  }) => {
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
    const [run] = await eventually(
      async () => ((await runs(h)).length === 1 ? runs(h) : undefined),
      45_000,
      'the run in the history',
    );
    expect(run).toMatchObject({
      sync: 'issues',
      status: 'success',
      error: null,
      models: { Issue: { added: 2, updated: 0, deleted: 0 } },
    });
    expect(run!.run_id).toMatch(/^sync:.*:issues:run:/);
    expect(run!.duration_ms).toBeGreaterThanOrEqual(0);

    const delivery = await eventually(
      async () => app.requests.find((request) => request.url === '/hooks'),
      30_000,
      'the webhook',
    );
    const signature = createHmac('sha256', secret).update(delivery.body).digest('hex');
    expect(delivery.headers['x-service-hmac-sha256']).toBe(signature);
    expect(JSON.parse(delivery.body)).toMatchObject({
      type: 'sync',
      connectionId: 'c1',
      syncName: 'issues',
      success: true,
      model: 'Issue',
      runId: run!.run_id,
      responseResults: { added: 2, updated: 0, deleted: 0 },
    });
  });

  it('records a failed run with its error, and the application hears of the failure', async ({ api: h, app }) => {
    failing = true;
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
    const [latest] = await eventually(
      async () => ((await runs(h)).length === 2 ? runs(h) : undefined),
      45_000,
      'the failed run',
    );
    expect(latest).toMatchObject({ sync: 'issues', status: 'failed', models: {} });
    expect(latest!.error?.code).toBeTruthy();
    const failure = await eventually(
      async () =>
        app.requests.find(
          (request) =>
            request.url === '/hooks' && (JSON.parse(request.body) as { success?: boolean }).success === false,
        ),
      30_000,
      'the failure webhook',
    );
    // The failure's times are the run's, as the history recorded them before the delivery started.
    expect(JSON.parse(failure.body)).toMatchObject({
      syncName: 'issues',
      success: false,
      error: { type: latest!.error!.code, description: latest!.error!.message },
      startedAt: latest!.started_at,
      failedAt: latest!.finished_at,
    });
  });

  it('is refused without a key, validated, and scoped to the environment', async ({ api: h }) => {
    expect((await h.anonymous.raw('GET', '/sync/runs', { query: { provider_config_key: INTEGRATION } })).status).toBe(
      401,
    );
    const invalid = await h.api.raw('GET', '/sync/runs', { query: { provider_config_key: INTEGRATION, limit: 0 } });
    expect(invalid.status).toBe(400);
    const other = await h.apiB.call<{ runs: Run[] }>('GET', '/sync/runs', {
      query: { provider_config_key: INTEGRATION },
    });
    expect(other.runs).toEqual([]);
  });
});
