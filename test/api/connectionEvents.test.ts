/**
 * Connection events on the real stack (docs/api.md "Connection events"): a loopback receiver gets a
 * signed webhook when a connection is created or re-authorised, when a refresh against a fake OAuth
 * token endpoint answering 400 marks it as needing re-authorisation (once, however often the refresh
 * is tried again), and when a sync run fails. Another environment's receiver gets none of them.
 */
import { createHmac, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { deployRequest, INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { apiFailure, fakeOAuthProvider, startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const OAUTH = 'oa';
let h: ApiHarness;
let tokens: Awaited<ReturnType<typeof startFakeUpstream>>;
let app: Awaited<ReturnType<typeof startFakeUpstream>>;
let otherApp: Awaited<ReturnType<typeof startFakeUpstream>>;
let secret = '';
const alice = { connectionId: 'alice', providerConfigKey: OAUTH };

interface Received {
  event: string | undefined;
  signatureValid: boolean;
  body: Record<string, unknown>;
}

/** What the receiver got, each with its signature checked against the environment's secret. */
function received(): Received[] {
  return app.requests.map((request) => ({
    event: request.headers['x-service-event'] as string | undefined,
    signatureValid:
      request.headers['x-service-hmac-sha256'] === createHmac('sha256', secret).update(request.body).digest('hex'),
    body: JSON.parse(request.body) as Record<string, unknown>,
  }));
}

const receivedWhere = (match: (body: Record<string, unknown>) => boolean, count: number, what: string) =>
  eventually(
    async () => {
      const found = received().filter((item) => match(item.body));
      return found.length >= count ? found : undefined;
    },
    60_000,
    what,
  );

beforeAll(async () => {
  tokens = await startFakeUpstream((_request, response) =>
    json(response, 400, { error: 'invalid_grant', error_description: 'the refresh token was revoked' }),
  );
  app = await startFakeUpstream((_request, response) => json(response, 200, { ok: true }));
  otherApp = await startFakeUpstream((_request, response) => json(response, 200, { ok: true }));
  h = await startApiHarness({
    providers: fakeOAuthProvider(tokens.url),
  });
  secret = (await h.api.webhooks.setSettings({ url: `${app.url}/hooks` })).generated_secret ?? '';
  await h.apiB.webhooks.setSettings({ url: `${otherApp.url}/hooks` });
  await h.api.integrations.create({
    unique_key: OAUTH,
    provider: 'fake-oauth',
    credentials: { type: 'OAUTH2', client_id: 'client-1', client_secret: 'client-secret-1' },
  });
}, 120_000);

describe('connection events', () => {
  it('sends a signed `creation` event for a new connection and `override` for a reconnect', async () => {
    await h.api.connections.import({
      provider_config_key: OAUTH,
      connection_id: 'alice',
      credentials: {
        type: 'OAUTH2',
        access_token: 'alice-access-1',
        refresh_token: 'alice-refresh-1',
        expires_at: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    const [created] = await receivedWhere((body) => body['operation'] === 'creation', 1, 'the creation event');
    expect(created).toMatchObject({ event: 'auth', signatureValid: true });
    expect(created!.body).toEqual({
      from: 'integration-service',
      type: 'auth',
      operation: 'creation',
      success: true,
      connectionId: 'alice',
      providerConfigKey: OAUTH,
      provider: 'fake-oauth',
      authMode: 'OAUTH2',
    });
    expect(JSON.stringify(created!.body)).not.toContain('alice-access-1');

    await h.api.connections.import({
      provider_config_key: OAUTH,
      connection_id: 'alice',
      credentials: {
        type: 'OAUTH2',
        access_token: 'alice-access-2',
        refresh_token: 'alice-refresh-2',
        expires_at: new Date(Date.now() - 60_000).toISOString(),
      },
    });
    const [override] = await receivedWhere((body) => body['operation'] === 'override', 1, 'the override event');
    expect(override).toMatchObject({ event: 'auth', signatureValid: true, body: { success: true } });
  });

  it('a refresh the token endpoint refuses (400) marks the connection and sends the event once', async () => {
    const before = tokens.requests.length;
    // The token expired a minute ago: reading the connection refreshes it, which the provider refuses.
    expect(await apiFailure(h.api.connections.get(alice))).toEqual({
      status: 424,
      code: 'connection_refresh_failed',
    });
    expect(tokens.requests.length).toBe(before + 1);
    expect(tokens.requests.at(-1)?.body).toContain('refresh_token=alice-refresh-2');

    // Marked, in the list (and the record, below) of the API.
    const listed = (await h.api.connections.list()).connections.find((c) => c.connection_id === 'alice')!;
    expect(listed.needs_reauth).toBe(true);
    expect(listed.refresh_error).toMatchObject({ code: 'invalid_grant', permanent: true });

    // Tried again, by a read and by a forced refresh: no second event.
    expect((await apiFailure(h.api.connections.get(alice))).code).toBe('connection_refresh_failed');
    expect((await apiFailure(h.api.connections.get(alice, { force_refresh: true }))).code).toBe(
      'connection_refresh_failed',
    );
    expect(tokens.requests.length).toBe(before + 2);

    const [event] = await receivedWhere((body) => body['operation'] === 'refresh', 1, 'the refresh failure event');
    expect(event).toMatchObject({ event: 'auth', signatureValid: true });
    expect(event!.body).toMatchObject({
      type: 'auth',
      operation: 'refresh',
      success: false,
      needsReauth: true,
      connectionId: 'alice',
      providerConfigKey: OAUTH,
      error: { type: 'invalid_grant' },
    });
    expect(JSON.stringify(event!.body)).not.toMatch(/alice-refresh|client-secret-1/);
    // Every delivery is settled: exactly one refresh event was recorded and received.
    await eventually(
      async () => {
        const { deliveries } = await h.api.webhooks.deliveries();
        return deliveries.every((d) => d.status === 'delivered') ? deliveries : undefined;
      },
      60_000,
      'every delivery delivered',
    );
    const { deliveries } = await h.api.webhooks.deliveries({ connection_id: 'alice' });
    expect(deliveries.filter((d) => (d.payload as { operation?: string }).operation === 'refresh')).toHaveLength(1);
    expect(received().filter((item) => item.body['operation'] === 'refresh')).toHaveLength(1);

    // A reconnect clears the mark (and is an `override` event).
    tokens.setHandler((_request, response) =>
      json(response, 200, { access_token: 'alice-access-3', refresh_token: 'alice-refresh-3', expires_in: 3600 }),
    );
    await h.api.connections.import({
      provider_config_key: OAUTH,
      connection_id: 'alice',
      credentials: { type: 'OAUTH2', access_token: 'alice-access-4', refresh_token: 'alice-refresh-4' },
    });
    const record = await h.api.connections.get(alice);
    expect(record).toMatchObject({ needs_reauth: false, refresh_error: null });
    await receivedWhere((body) => body['operation'] === 'override', 2, 'the second override event');
  });

  it('sends a signed sync event with success false when a sync run fails', async () => {
    await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
    await h.deploy(h.envA.id, deployRequest());
    await h.api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'k' },
    });
    h.fake.setHandler((_request, response) => json(response, 500, { error: 'down' }));
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
    const [failed] = await receivedWhere(
      (body) => body['type'] === 'sync' && body['success'] === false,
      1,
      'the failed sync event',
    );
    expect(failed).toMatchObject({
      event: 'sync',
      signatureValid: true,
      body: { connectionId: 'c1', providerConfigKey: INTEGRATION, syncName: 'issues', success: false },
    });
    expect((failed!.body['error'] as { type: string }).type).toBeTruthy();
  });

  it('refuses a delivering workflow that claims a delivery recorded under another id, and sends nothing', async () => {
    const { deliveries } = await h.api.webhooks.deliveries({ connection_id: 'alice' });
    const target = deliveries.find((d) => (d.payload as { operation?: string }).operation === 'refresh')!;
    const requestsBefore = app.requests.length;
    await h.pool.query(`UPDATE webhook_deliveries SET status = 'pending' WHERE id = $1`, [target.id]);
    const forged = h.temporal.workflow.execute('deliverWebhook', {
      taskQueue: h.taskQueue,
      workflowId: `event:${h.envA.id}:${randomUUID()}`,
      args: [{ deliveries: [target.id], retry: { maximumAttempts: 1 } }],
    });
    const failure = await forged.then(
      () => undefined,
      (error: unknown) => error,
    );
    // The whole cause chain: the workflow failed because its activities refused the delivery.
    const causes: string[] = [];
    for (let error = failure as { message?: string; cause?: unknown } | undefined; error;) {
      causes.push(String(error.message));
      error = error.cause as typeof error;
    }
    expect(causes.join(' / ')).toContain(`did not record webhook delivery ${target.id}`);
    const { rows } = await h.pool.query<{ attempts: number }>('SELECT attempts FROM webhook_deliveries WHERE id = $1', [
      target.id,
    ]);
    expect(rows[0]?.attempts).toBe(target.attempts);
    expect(app.requests.length).toBe(requestsBefore);
  });

  it('sends nothing of one environment to another’s receiver', () => {
    expect(otherApp.requests).toEqual([]);
    expect(received().every((item) => item.signatureValid)).toBe(true);
  });
});
