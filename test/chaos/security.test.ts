/**
 * Security: every route refuses a request without a key, with a wrong key, and (for another
 * environment's data) with another environment's key; no connection reads another's records, metadata
 * or credentials; no secret appears in a log line, an error body, a Temporal payload or the payload
 * store, nor in this process's output; an inbound webhook with a bad signature is refused when the
 * integration has a secret. A provider whose key goes in the query (OpenWeather's `appid`), with an
 * upstream that echoes the key back in its 401, is the hard case of the scan (issue 16, finding 3).
 */
import { createHmac, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { Client } from '@temporalio/client';
import { deployRequest, INTEGRATION, PROVIDER, SERVICE_YAML } from '../kit/fixtures.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { stack } from '../kit/stack.js';
import { useLogScan } from '../connections/helpers/logScan.js';
import { recordFigures } from './lib/figures.js';
import { connectTemporal } from '../../src/temporal/connection.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';
import { json } from '../kit/upstream.js';

const secret = (tag: string) => `sk_${tag}_${randomBytes(12).toString('hex')}`;
const KEY_A1 = secret('a1');
const KEY_A2 = secret('a2');
const KEY_B1 = secret('b1');
const WEBHOOK_SECRET = secret('wh');
// Not sk_-like, not named like a key: only redaction by value finds it.
const WEATHER_KEY = `ow${randomBytes(16).toString('hex')}`;
const WEATHER = 'weather';
const logScan = useLogScan();
logScan.secret(KEY_A1, KEY_A2, KEY_B1, WEBHOOK_SECRET, WEATHER_KEY);

// OpenWeather's provider entry (API key in the `appid` query parameter), pointed at the fake API.
const WEATHER_YAML = SERVICE_YAML.replace(
  '\nmodels:\n',
  `
  ${WEATHER}:
    syncs:
      forecast:
        description: The forecast
        output: Forecast
        endpoint: GET /forecast
        sync_type: full
        runs: 1h
        auto_start: false
    actions:
      current:
        description: The weather now
        output: Forecast
        endpoint: GET /weather/current
models:
  Forecast:
    id: string
`,
);
const FORECAST_SYNC = bundle(`async function (svc) {
  const res = await svc.get({ endpoint: '/data/2.5/forecast', params: { q: 'Berlin' } });
  await svc.batchSave(res.data.list, 'Forecast');
}`);
const CURRENT_ACTION = bundle(`async function (svc) {
  const res = await svc.get({ endpoint: '/data/2.5/weather', params: { q: 'Berlin' } });
  return res.data;
}`);
const TAG = { [KEY_A1]: 'A1', [KEY_A2]: 'A2', [KEY_B1]: 'B1' } as Record<string, string>;

// The issues sync of the API fixtures, plus an action that reads its connection's credentials (a
// script may; they must still not end up in a Temporal payload or a log).
const READS_CREDENTIALS = bundle(`async function (svc) {
  const connection = await svc.getConnection();
  return { hasKey: typeof connection.credentials.apiKey === 'string' };
}`);

let h: ApiHarness;
const errorBodies: string[] = [];
/** Answers that show failures without being errors themselves (sync status, run history). */
const shownBodies: string[] = [];
let testStarted: Date;

async function request(
  method: string,
  path: string,
  headers: Record<string, string> = {},
  body?: unknown,
): Promise<{ status: number; text: string }> {
  const response = await fetch(`${h.baseUrl}${path}`, {
    method,
    headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (response.status >= 400) errorBodies.push(text);
  return { status: response.status, text };
}

const as = (key: string, connectionId?: string) => ({
  authorization: `Bearer ${key}`,
  ...(connectionId ? { 'connection-id': connectionId, 'provider-config-key': INTEGRATION } : {}),
});

beforeAll(async () => {
  testStarted = new Date(Date.now() - 1000);
  h = await startApiHarness();
  // The fake API answers each connection with issues named after the key it authenticated with.
  h.fake.setHandler((request, response) => {
    if (request.url?.startsWith('/weather')) {
      // A careless upstream: the key it refuses is repeated in the body, a header and the URL it echoes.
      const appid = new URL(request.url, 'http://x').searchParams.get('appid') ?? '';
      json(response, 401, { cod: 401, message: `Invalid API key ${appid}.`, request: request.url }, { 'x-key': appid });
      return;
    }
    const key = (request.headers['authorization'] ?? '').replace(/^Bearer /, '');
    const tag = TAG[key] ?? 'unknown';
    json(response, 200, { issues: [1, 2, 3].map((n) => ({ id: `${tag}-${n}`, title: `issue of ${tag}` })) });
  });
  const deployment = deployRequest();
  const withProbe = {
    ...deployment,
    scripts: deployment.scripts.map((script) =>
      script.kind === 'action' && script.name === 'get-issue' ? { ...script, code: READS_CREDENTIALS } : script,
    ),
  };
  for (const [client, env] of [
    [h.api, h.envA],
    [h.apiB, h.envB],
  ] as const) {
    await client.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
    await h.deploy(env.id, withProbe);
  }
  await h.api.integrations.create({
    unique_key: WEATHER,
    provider: 'openweathermap',
    provider_settings: { base_url: `${h.fake.url}/weather` },
  });
  await h.deploy(h.envA.id, {
    yaml: WEATHER_YAML,
    scripts: [
      ...withProbe.scripts,
      { integration: WEATHER, kind: 'sync', name: 'forecast', code: FORECAST_SYNC },
      { integration: WEATHER, kind: 'action', name: 'current', code: CURRENT_ACTION },
    ],
  });
  await h.api.connections.import({
    provider_config_key: WEATHER,
    connection_id: 'w1',
    credentials: { type: 'API_KEY', apiKey: WEATHER_KEY },
  });
  for (const [client, connectionId, apiKey] of [
    [h.api, 'c1', KEY_A1],
    [h.api, 'c2', KEY_A2],
    [h.apiB, 'c1', KEY_B1],
  ] as const) {
    await client.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: connectionId,
      credentials: { type: 'API_KEY', apiKey },
    });
  }
  await h.api.connections.setMetadata({
    provider_config_key: INTEGRATION,
    connection_id: 'c1',
    metadata: { note: 'only A1' },
  });
  await h.api.integrations.update(INTEGRATION, { webhook: { secret: WEBHOOK_SECRET } });
  await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
  await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c2', syncs: ['issues'] });
  await h.apiB.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
  for (const [client, id] of [
    [h.api, 'c1'],
    [h.api, 'c2'],
    [h.apiB, 'c1'],
  ] as const) {
    await eventually(
      async () => {
        const page = await client.records.list({ connectionId: id, providerConfigKey: INTEGRATION, model: 'Issue' });
        return page.records.length === 3 ? true : undefined;
      },
      60_000,
      `the records of ${id}`,
    );
  }
}, 180_000);

describe('security', () => {
  it('every route: no key and a wrong key are refused with 401', async () => {
    const spec = JSON.parse((await request('GET', '/openapi.json', as(h.envA.secretKey))).text) as {
      paths: Record<string, Record<string, { security?: unknown[] }>>;
    };
    let checked = 0;
    for (const [path, methods] of Object.entries(spec.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        if ((operation.security ?? []).length === 0) continue; // public: health, webhooks, OAuth callback
        const concrete = path.replace(/\{\w+\}/g, 'c1');
        for (const headers of [
          {},
          { authorization: 'Bearer nope' },
          { authorization: `Bearer ${h.envA.secretKey}x` },
          { authorization: h.envA.secretKey },
        ]) {
          const answer = await request(
            method.toUpperCase(),
            concrete,
            { ...headers, 'connection-id': 'c1', 'provider-config-key': INTEGRATION },
            method === 'get' || method === 'delete' ? undefined : {},
          );
          expect(answer.status, `${method} ${concrete} with ${JSON.stringify(headers)}: ${answer.text}`).toBe(401);
        }
        checked++;
      }
    }
    recordFigures('security-routes', { routesRefusingWithoutKey: checked });
    expect(checked).toBeGreaterThan(25);
  });

  it("another environment's key reaches none of this environment's connections, records, metadata or credentials", async () => {
    // c2 exists only in environment A.
    expect(
      (await request('GET', `/connections/c2?provider_config_key=${INTEGRATION}`, as(h.envB.secretKey))).status,
    ).toBe(404);
    expect((await request('GET', '/records?model=Issue', as(h.envB.secretKey, 'c2'))).status).toBe(404);
    expect(
      (await request('POST', '/action/trigger', as(h.envB.secretKey, 'c2'), { action_name: 'get-issue', input: {} }))
        .status,
    ).toBe(404);
    expect(
      (await request('DELETE', `/connections/c2?provider_config_key=${INTEGRATION}`, as(h.envB.secretKey))).status,
    ).toBe(404);
    const listB = (await request('GET', '/connections', as(h.envB.secretKey))).text;
    expect(listB).not.toContain('"c2"');
    // c1 exists in both: each environment sees its own.
    const bC1 = (await request('GET', `/connections/c1?provider_config_key=${INTEGRATION}`, as(h.envB.secretKey))).text;
    expect(bC1).toContain(KEY_B1);
    expect(bC1).not.toContain(KEY_A1);
    expect(bC1).not.toContain('only A1');
    const bRecords = (await request('GET', '/records?model=Issue', as(h.envB.secretKey, 'c1'))).text;
    expect(bRecords).toContain('B1-1');
    expect(bRecords).not.toMatch(/A1-|A2-/);
    // Within environment A, one connection sees only its own.
    const a2 = (await request('GET', `/connections/c2?provider_config_key=${INTEGRATION}`, as(h.envA.secretKey))).text;
    expect(a2).toContain(KEY_A2);
    expect(a2).not.toContain(KEY_A1);
    expect(a2).not.toContain('only A1');
    const a2Records = (await request('GET', '/records?model=Issue', as(h.envA.secretKey, 'c2'))).text;
    expect(a2Records).toContain('A2-1');
    expect(a2Records).not.toMatch(/A1-|B1-/);
    const a1Records = (await request('GET', '/records?model=Issue', as(h.envA.secretKey, 'c1'))).text;
    expect(a1Records).not.toMatch(/A2-|B1-/);
    // A script reads its own connection's credentials, never another's.
    const probe = await request('POST', '/action/trigger', as(h.envA.secretKey, 'c2'), {
      action_name: 'get-issue',
      input: {},
    });
    expect(probe.status, probe.text).toBe(200);
    expect(probe.text).toContain('"hasKey":true');
  });

  it('inbound webhooks: refused unsigned, badly signed, outside the tolerance window, and replayed', async () => {
    const now = Math.floor(Date.now() / 1000);
    const body = (id: string) => JSON.stringify({ type: 'issue.updated', issue: { id, title: 'from webhook' } });
    const hmac = (secret: string, text: string) => createHmac('sha256', secret).update(text).digest('hex');
    const signed = (text: string, at: number, secret = WEBHOOK_SECRET) => ({
      'x-signature-256': `sha256=${hmac(secret, `${at}.${text}`)}`,
      'x-signature-timestamp': String(at),
    });
    const send = async (environment: string, text: string, headers: Record<string, string>) => {
      const response = await fetch(`${h.baseUrl}/webhook/${environment}/${INTEGRATION}?connection_id=c1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body: text,
      });
      const answer = await response.text();
      if (response.status >= 400) errorBodies.push(answer);
      return { status: response.status, code: (JSON.parse(answer) as { error?: { code: string } }).error?.code };
    };
    const refused: [string, string, Record<string, string>, number, string][] = [
      ['no signature', 'w-missing', {}, 401, 'invalid_webhook_signature'],
      ['another secret', 'w-wrong', signed(body('w-wrong'), now, 'another-secret'), 401, 'invalid_webhook_signature'],
      [
        'garbage',
        'w-garbage',
        { 'x-signature-256': 'sha256=zz', 'x-signature-timestamp': String(now) },
        401,
        'invalid_webhook_signature',
      ],
      // The body alone signed (no timestamp in the signature), as before issue 16.
      [
        'body only',
        'w-body',
        { 'x-signature-256': `sha256=${hmac(WEBHOOK_SECRET, body('w-body'))}`, 'x-signature-timestamp': String(now) },
        401,
        'invalid_webhook_signature',
      ],
      // A valid signature of one time presented with another.
      [
        'moved timestamp',
        'w-moved',
        { ...signed(body('w-moved'), now - 10), 'x-signature-timestamp': String(now) },
        401,
        'invalid_webhook_signature',
      ],
      ['stale', 'w-stale', signed(body('w-stale'), now - 600), 401, 'webhook_timestamp_out_of_tolerance'],
      ['future', 'w-future', signed(body('w-future'), now + 600), 401, 'webhook_timestamp_out_of_tolerance'],
    ];
    // Webhooks reach running syncs (the fixture's issues sync does not start by itself).
    for (const client of [h.api, h.apiB]) {
      await client.syncs.start({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['issues'] });
    }
    const answers: Record<string, string> = {};
    for (const [name, id, headers, status, code] of refused) {
      const answer = await send(h.envA.name, body(id), headers);
      answers[name] = `${answer.status} ${answer.code}`;
      expect([answer.status, answer.code], name).toEqual([status, code]);
    }
    const valid = signed(body('w-ok'), now - 60);
    const first = await send(h.envA.name, body('w-ok'), valid);
    const replay = await send(h.envA.name, body('w-ok'), valid);
    answers['valid'] = `${first.status}`;
    answers['replay'] = `${replay.status} ${replay.code}`;
    expect(first.status).toBe(200);
    expect([replay.status, replay.code]).toEqual([409, 'webhook_replayed']);

    // Environment B's integration has no secret: refused until B opts in to unsigned webhooks.
    const unsigned = await send(h.envB.name, body('w-unsigned'), {});
    answers['unsigned'] = `${unsigned.status} ${unsigned.code}`;
    expect([unsigned.status, unsigned.code]).toEqual([401, 'webhook_signature_required']);
    const warned = await h.apiB.deploy.preview(deployRequest());
    expect(warned.warnings.join()).toContain('does not accept unsigned webhooks');
    await h.apiB.environment.updateSettings({ allow_unsigned_webhooks: true });
    try {
      expect((await send(h.envB.name, body('w-optin'), {})).status).toBe(200);
      expect((await h.apiB.deploy.preview(deployRequest())).warnings.join()).toContain('accepts unsigned webhooks');
    } finally {
      await h.apiB.environment.updateSettings({ allow_unsigned_webhooks: false });
    }
    recordFigures('security-webhooks', answers);

    // What was delivered arrived; nothing refused did.
    await eventually(
      async () => {
        const a = await h.api.records.list({
          connectionId: 'c1',
          providerConfigKey: INTEGRATION,
          model: 'Issue',
          ids: ['w-ok'],
        });
        const b = await h.apiB.records.list({
          connectionId: 'c1',
          providerConfigKey: INTEGRATION,
          model: 'Issue',
          ids: ['w-optin'],
        });
        return a.records.length === 1 && b.records.length === 1 ? true : undefined;
      },
      60_000,
      'the delivered webhooks',
    );
    const refusedIds = [...refused.map(([, id]) => id), 'w-unsigned'];
    for (const [client, name] of [
      [h.api, 'A'],
      [h.apiB, 'B'],
    ] as const) {
      const page = await client.records.list({
        connectionId: 'c1',
        providerConfigKey: INTEGRATION,
        model: 'Issue',
        ids: refusedIds,
      });
      expect(
        page.records.map((r) => r.id),
        name,
      ).toEqual([]);
    }
  });

  it('a key sent in the query and echoed by the upstream appears in no error, status or run', async () => {
    const weather = { 'connection-id': 'w1', 'provider-config-key': WEATHER };
    const action = await request(
      'POST',
      '/action/trigger',
      { ...as(h.envA.secretKey), ...weather },
      {
        action_name: 'current',
      },
    );
    expect(action.status, action.text).toBeGreaterThanOrEqual(400);
    expect(action.text).toContain('answered 401');
    await h.api.syncs.trigger({ provider_config_key: WEATHER, connection_id: 'w1', syncs: ['forecast'] });
    const status = await eventually(
      async () => {
        const answer = await request(
          'GET',
          `/sync/status?provider_config_key=${WEATHER}&syncs=forecast&connection_id=w1`,
          as(h.envA.secretKey),
        );
        return answer.text.includes('"latestError":{') ? answer : undefined;
      },
      60_000,
      'the failed forecast run',
    );
    shownBodies.push(status.text);
    expect(status.text).toContain('answered 401');
    const runs = await request('GET', `/sync/runs?provider_config_key=${WEATHER}`, as(h.envA.secretKey));
    shownBodies.push(runs.text);
    expect(runs.text).toContain('"status":"failed"');
    for (const body of [action.text, status.text, runs.text]) expect(body).not.toContain(WEATHER_KEY);
    // The upstream's 401 reached the fake API with the key: the scan below is not vacuous.
    expect(h.fake.requests.some((r) => r.url.includes(WEATHER_KEY))).toBe(true);
  });

  it('no secret in any log line, error body, Temporal payload or stored payload', async () => {
    const secrets = [KEY_A1, KEY_A2, KEY_B1, WEBHOOK_SECRET, WEATHER_KEY, h.envA.secretKey, h.envB.secretKey];
    const leaks: string[] = [];
    const scan = (where: string, text: string) => {
      for (const value of secrets) if (text.includes(value)) leaks.push(`${where} contains ${value.slice(0, 6)}…`);
    };
    for (const line of h.logs) scan('API log', line);
    for (const body of errorBodies) scan('error body', body);
    for (const body of shownBodies) scan('status or run history', body);
    for (const line of logScan.lines()) scan('process output', line);
    for (const table of ['sync_runs', 'webhook_deliveries', 'script_logs']) {
      const rows = await h.pool.query<{ row: string }>(`SELECT row_to_json(t)::text AS row FROM ${table} t`);
      for (const { row } of rows.rows) scan(table, row);
    }
    const scriptLogs = await h.pool.query<{ row: string }>('SELECT row_to_json(l)::text AS row FROM script_logs l');
    for (const { row } of scriptLogs.rows) scan('script log', row);
    const blobs = await h.pool.query<{ row: string }>(
      "SELECT encode(convert_to(row_to_json(b)::text, 'UTF8'), 'escape') AS row FROM payload_blobs b",
    );
    for (const { row } of blobs.rows) scan('payload store', row);

    const { temporalAddress, temporalNamespace } = stack();
    const connection = await connectTemporal({ address: temporalAddress });
    let histories = 0;
    let events = 0;
    try {
      const client = new Client({ connection, namespace: temporalNamespace });
      for await (const execution of client.workflow.list({ query: `StartTime >= "${testStarted.toISOString()}"` })) {
        const history = await client.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
        histories++;
        events += history.events?.length ?? 0;
        scan(`history of ${execution.workflowId}`, payloadText(history));
      }
    } finally {
      await connection.close();
    }
    recordFigures('security-secrets', {
      secretsTracked: secrets.length,
      processOutputLines: logScan.lines().length,
      apiLogLines: h.logs.length,
      errorBodies: errorBodies.length,
      scriptLogRows: scriptLogs.rows.length,
      storedPayloads: blobs.rows.length,
      temporalHistories: histories,
      historyEvents: events,
      leaks: leaks.length,
    });
    expect(histories).toBeGreaterThan(3);
    expect(leaks).toEqual([]);
  });
});

/** Every byte array in a history (payload data and metadata) as text, and the rest as JSON. */
function payloadText(value: unknown): string {
  const parts: string[] = [];
  const walk = (node: unknown) => {
    if (node instanceof Uint8Array) parts.push(Buffer.from(node).toString('utf8'));
    else if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') Object.values(node).forEach(walk);
    else if (typeof node === 'string') parts.push(node);
  };
  walk(value);
  return parts.join('\n');
}
