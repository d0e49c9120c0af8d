/**
 * Outbound webhooks on the real stack: the deliverWebhook workflow and its activities sign each
 * delivery, retry with back-off until the application answers 2xx, give up after the last attempt,
 * and keep a log that GET /webhook-deliveries reads. The application's URL obeys the outbound request
 * policy: an internal address is refused when it is saved (400) and again when a delivery connects.
 */
import { createHmac } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, WorkflowNotFoundError } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { bundleWorkflows } from '../../src/temporal/worker.js';
import { createWebhookActivities } from '../../activities/webhooks.js';
import { createRunAuthorities, syncEntityId } from '../../src/temporal/runAuthority.js';
import type { DeliverWebhookInput, SyncFinishedEvent } from '../../src/webhooks/deliveries.js';
import type { deliverWebhook } from '../../workflows/deliverWebhook.js';
import type { SyncRunResult } from '../../src/runtime/definitions.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { stack, uniqueName } from '../kit/stack.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { connectTemporal, connectWorker } from '../../src/temporal/connection.js';
import { deferCleanup } from '../kit/cleanup.js';
import { eventually } from '../helpers/eventually.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const WORKFLOW = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'workflows', 'deliverWebhook.ts');

let h: ApiHarness;
let temporal: Client;
let taskQueue: string;
let app: Awaited<ReturnType<typeof startFakeUpstream>>;
let secret = '';
let result: SyncRunResult;

beforeAll(async () => {
  h = await startApiHarness();
  app = await startFakeUpstream();
  h.fake.setHandler((_request, response) =>
    json(response, 200, {
      issues: [
        { id: '1', title: 'one' },
        { id: '2', title: 'two' },
      ],
    }),
  );
  await deployWithConnection(h, 'k');
  const { temporalAddress, temporalNamespace } = stack();
  const connection = await connectTemporal({ address: temporalAddress });
  temporal = new Client({ connection, namespace: temporalNamespace });
  // The service's own workflows carry encrypted payloads: reading their results needs its converter.
  const serviceClient = new Client({
    connection,
    namespace: temporalNamespace,
    dataConverter: createDataConverter({ db: h.pool, encryptor: h.deps.encryptor }),
  });

  // A real run's result, as the sync entity hands it over. With no webhook URL yet the entity records no
  // delivery and starts no delivery workflow (issue 31: a run without webhooks pays nothing for them;
  // test/api/syncRuns.test.ts covers its deliveries once there is a URL), so the deliveries below are
  // the ones this file starts.
  await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
  const ref = { environmentId: h.envA.id, integrationId: INTEGRATION, connectionId: 'c1', syncName: 'issues' };
  result = await eventually(
    async () => (await h.deps.syncs.status(ref)).latestResult ?? undefined,
    45_000,
    'the sync run',
  );
  await eventually(
    async () =>
      (await h.pool.query('SELECT 1 FROM sync_runs WHERE run_id = $1', [result.runId])).rowCount === 1
        ? true
        : undefined,
    45_000,
    'the run in the run history',
  );
  await expect(serviceClient.workflow.getHandle(`${result.runId}:webhook`).describe()).rejects.toBeInstanceOf(
    WorkflowNotFoundError,
  );
  secret = (await h.api.webhooks.setSettings({ url: `${app.url}/hooks` })).generated_secret ?? '';
  taskQueue = uniqueName('webhooks');
  // Bundled here from workflows/deliverWebhook.ts, until workflows/index.ts exports it.
  const workflowBundle = await bundleWorkflows(WORKFLOW);
  const workerConnection = await connectWorker({ address: temporalAddress });
  const worker = await Worker.create({
    connection: workerConnection,
    namespace: temporalNamespace,
    taskQueue,
    workflowBundle,
    activities: createWebhookActivities({
      db: h.pool,
      encryptor: h.deps.encryptor,
      authorities: createRunAuthorities({ client: temporal }),
    }),
  });
  const running = worker.run();
  deferCleanup(async () => {
    worker.shutdown();
    await running;
    await workerConnection.close();
    await connection.close();
  });
});

const event = (overrides: Partial<SyncFinishedEvent> = {}): SyncFinishedEvent => ({
  environmentId: h.envA.id,
  integrationId: INTEGRATION,
  connectionId: 'c1',
  syncName: 'issues',
  result,
  error: null,
  ...overrides,
});

/** The id a sync entity gives it: the webhook workflow of one run (`<run id>:webhook`) of the event's sync. */
const runIdOf = (event: SyncFinishedEvent) => `${syncEntityId(event)}:run:${uniqueName('run')}`;
const deliver = (input: DeliverWebhookInput, runId = runIdOf(input.event!)) =>
  temporal.workflow.execute<typeof deliverWebhook>('deliverWebhook', {
    taskQueue,
    workflowId: `${runId}:webhook`,
    args: [input],
  });

/** What every sync webhook body of connection c1's `issues` sync starts with (the de-facto base). */
const bodyBase = {
  from: 'integration-service',
  type: 'sync',
  connectionId: 'c1',
  providerConfigKey: INTEGRATION,
  syncName: 'issues',
  syncVariant: 'base',
};

describe('outbound webhooks', () => {
  it('signs the delivery, retries with back-off until 2xx, and logs every attempt', async () => {
    let calls = 0;
    app.setHandler((_request, response) => {
      calls++;
      json(response, calls <= 2 ? 503 : 200, {});
    });
    const started = Date.now();
    expect(await deliver({ event: event(), retry: { initialIntervalMs: 200, maximumAttempts: 5 } })).toEqual({
      delivered: 1,
      failed: 0,
    });
    // Two failures, so two back-offs of 200 ms then 400 ms at least.
    expect(Date.now() - started).toBeGreaterThanOrEqual(600);
    const sent = app.requests.filter((request) => request.url === '/hooks');
    expect(sent).toHaveLength(3);
    const last = sent[2]!;
    expect(last.headers['x-service-hmac-sha256']).toBe(createHmac('sha256', secret).update(last.body).digest('hex'));
    // The de-facto sync webhook body (camelCase), with this service's `runId`.
    expect(JSON.parse(last.body)).toEqual({
      ...bodyBase,
      model: 'Issue',
      syncType: 'INCREMENTAL',
      success: true,
      responseResults: { added: 2, updated: 0, deleted: 0 },
      modifiedAfter: result.startedAt,
      queryTimeStamp: result.startedAt,
      runId: result.runId,
    });
    const { deliveries } = await h.api.webhooks.deliveries();
    expect(deliveries[0]).toMatchObject({
      status: 'delivered',
      attempts: 3,
      last_status_code: 200,
      last_error: null,
      model: 'Issue',
      connection_id: 'c1',
    });
    expect((await h.apiB.webhooks.deliveries()).deliveries).toEqual([]);
  });

  it('gives a delivery up after the last attempt, and reports a failed run with its start from the history', async () => {
    app.setHandler((_request, response) => json(response, 500, {}));
    const error = { code: 'script_error', message: 'script issues failed: TypeError' };
    const failedRun = event({ result: null, error });
    // The sync entity records the run before it starts the delivery; the body's times come from there.
    const runId = runIdOf(failedRun);
    const startedAt = new Date(Date.now() - 60_000).toISOString();
    const finishedAt = new Date(Date.now() - 1000).toISOString();
    await h.deps.runHistory.record({
      runId,
      environmentId: h.envA.id,
      integrationId: INTEGRATION,
      connectionId: 'c1',
      syncName: 'issues',
      mode: 'full_refresh',
      status: 'failed',
      startedAt,
      finishedAt,
      models: {},
      error,
    });
    expect(await deliver({ event: failedRun, retry: { initialIntervalMs: 50, maximumAttempts: 2 } }, runId)).toEqual({
      delivered: 0,
      failed: 1,
    });
    const body = JSON.parse(app.requests.filter((request) => request.url === '/hooks').at(-1)!.body) as unknown;
    expect(body).toEqual({
      ...bodyBase,
      model: null,
      syncType: 'INITIAL',
      success: false,
      error: { type: 'script_error', description: 'script issues failed: TypeError' },
      startedAt,
      failedAt: finishedAt,
    });
    const { deliveries } = await h.api.webhooks.deliveries({ status: 'failed' });
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({
      attempts: 2,
      last_status_code: 500,
      model: null,
      payload: { success: false, error: { type: 'script_error' } },
    });
    expect(deliveries[0]?.last_error).toContain('answered 500');
  });

  it('sends nothing when the run changed nothing or no URL is set', async () => {
    const before = app.requests.length;
    const unchanged = { ...result, models: { Issue: { added: 0, updated: 0, deleted: 0, unchanged: 2 } } };
    expect(await deliver({ event: event({ result: unchanged }) })).toEqual({ delivered: 0, failed: 0 });
    await h.api.webhooks.setSettings({ url: null });
    expect(await deliver({ event: event() })).toEqual({ delivered: 0, failed: 0 });
    expect(app.requests.length).toBe(before);
  });

  describe('to an internal address', () => {
    // A local server that no allowance opens (the fakes of this file are opened one port each), so a
    // request that reached it would show here.
    let internal: Server;
    let internalUrl = '';
    let reached = 0;
    beforeAll(async () => {
      internal = createServer((_request, response) => {
        reached++;
        response.writeHead(200).end('{}');
      });
      await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
      internalUrl = `http://127.0.0.1:${(internal.address() as AddressInfo).port}/hooks`;
    });
    afterAll(async () => {
      internal.closeAllConnections();
      await new Promise((resolve) => internal.close(resolve));
    });

    it('is refused when saved, with a 400 naming the address, and the stored URL stays', async () => {
      await h.api.webhooks.setSettings({ url: `${app.url}/hooks` });
      for (const url of [
        internalUrl,
        'http://localhost:9/hooks',
        'http://[::1]:9/hooks',
        'http://[::ffff:127.0.0.1]/hooks',
        'http://2130706433/hooks',
        'http://10.0.0.7/hooks',
        'http://192.168.1.1/hooks',
        'http://169.254.169.254/latest/meta-data',
        'https://0.0.0.0/hooks',
      ]) {
        const answer = await h.api.raw('PUT', '/webhook-settings', { body: { url } });
        expect([url, answer.status]).toEqual([url, 400]);
        const error = (answer.json as { error: { code: string; message: string } }).error;
        expect([url, error.code]).toEqual([url, 'webhook_url_refused']);
        expect(error.message).toMatch(
          /^url: the request to .+ was refused: .+ is .+; the operator can allow it with SERVICE_OUTBOUND_ALLOW$/,
        );
      }
      expect((await h.api.webhooks.getSettings()).url).toBe(`${app.url}/hooks`);
      // The test's own fake (its port opened as SERVICE_OUTBOUND_ALLOW would) is accepted.
      expect((await h.api.webhooks.setSettings({ url: `${app.url}/other` })).url).toBe(`${app.url}/other`);
      expect(reached).toBe(0);
    });

    it('is refused again when a delivery connects (a URL stored before the rule), and nothing arrives', async () => {
      // As an older version could have stored it: past the check at save time.
      await h.pool.query('UPDATE outbound_webhook_settings SET url = $2 WHERE environment_id = $1', [
        h.envA.id,
        internalUrl,
      ]);
      expect(await deliver({ event: event(), retry: { initialIntervalMs: 50, maximumAttempts: 2 } })).toEqual({
        delivered: 0,
        failed: 1,
      });
      const { deliveries } = await h.api.webhooks.deliveries({ status: 'failed' });
      const refused = deliveries.find((delivery) => delivery.url === internalUrl);
      expect(refused).toMatchObject({ attempts: 2, last_status_code: null });
      expect(refused?.last_error).toMatch(
        /the request failed: the request to 127\.0\.0\.1 port \d+ was refused: 127\.0\.0\.1 is a loopback address/,
      );
      expect(reached).toBe(0);
    });
  });
});
