/**
 * Security: every route refuses a request without a key, with a wrong key, and (for another
 * environment's data) with another environment's key; no connection reads another's records, metadata
 * or credentials; no secret appears in a log line, an error body, a Temporal payload or the payload
 * store; an inbound webhook with a bad signature is refused when the integration has a secret.
 */
import { createHmac, randomBytes } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { Connection, Client } from '@temporalio/client';
import { bundle, deployRequest, INTEGRATION, PROVIDER } from '../api/fixtures.js';
import { eventually, json, startApiHarness, type ApiHarness } from '../api/helpers/harness.js';
import { stack } from '../helpers/stack.js';
import { recordFigures } from './lib/figures.js';

const secret = (tag: string) => `sk_${tag}_${randomBytes(12).toString('hex')}`;
const KEY_A1 = secret('a1');
const KEY_A2 = secret('a2');
const KEY_B1 = secret('b1');
const WEBHOOK_SECRET = secret('wh');
const TAG = { [KEY_A1]: 'A1', [KEY_A2]: 'A2', [KEY_B1]: 'B1' } as Record<string, string>;

// The issues sync of the API fixtures, plus an action that reads its connection's credentials (a
// script may; they must still not end up in a Temporal payload or a log).
const READS_CREDENTIALS = bundle(`async function (svc) {
  const connection = await svc.getConnection();
  return { hasKey: typeof connection.credentials.apiKey === 'string' };
}`);

let h: ApiHarness;
const errorBodies: string[] = [];
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

  it('inbound webhooks: a missing or bad signature is refused where the integration has a secret', async () => {
    const body = JSON.stringify({ type: 'issue.updated', issue: { id: 'w1', title: 'from webhook' } });
    const send = async (environment: string, headers: Record<string, string>) => {
      const response = await fetch(`${h.baseUrl}/webhook/${environment}/${INTEGRATION}?connection_id=c1`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
      const text = await response.text();
      if (response.status >= 400) errorBodies.push(text);
      return { status: response.status, text };
    };
    const good = createHmac('sha256', WEBHOOK_SECRET).update(body).digest('hex');
    const wrong = createHmac('sha256', 'another-secret').update(body).digest('hex');
    const missing = await send(h.envA.name, {});
    const bad = await send(h.envA.name, { 'x-signature-256': `sha256=${wrong}` });
    const garbage = await send(h.envA.name, { 'x-signature-256': 'sha256=zz' });
    const valid = await send(h.envA.name, { 'x-signature-256': `sha256=${good}` });
    recordFigures('security-webhooks', {
      missing: missing.status,
      bad: bad.status,
      garbage: garbage.status,
      valid: valid.status,
    });
    for (const refused of [missing, bad, garbage]) {
      expect(refused.status, refused.text).toBe(401);
      expect(refused.text).toContain('invalid_webhook_signature');
    }
    expect(valid.status, valid.text).toBe(200);
  });

  it('no secret in any log line, error body, Temporal payload or stored payload', async () => {
    const secrets = [KEY_A1, KEY_A2, KEY_B1, WEBHOOK_SECRET, h.envA.secretKey, h.envB.secretKey];
    const leaks: string[] = [];
    const scan = (where: string, text: string) => {
      for (const value of secrets) if (text.includes(value)) leaks.push(`${where} contains ${value.slice(0, 6)}…`);
    };
    for (const line of h.logs) scan('API log', line);
    for (const body of errorBodies) scan('error body', body);
    const scriptLogs = await h.pool.query<{ row: string }>('SELECT row_to_json(l)::text AS row FROM script_logs l');
    for (const { row } of scriptLogs.rows) scan('script log', row);
    const blobs = await h.pool.query<{ row: string }>(
      "SELECT encode(convert_to(row_to_json(b)::text, 'UTF8'), 'escape') AS row FROM payload_blobs b",
    );
    for (const { row } of blobs.rows) scan('payload store', row);

    const { temporalAddress, temporalNamespace } = stack();
    const connection = await Connection.connect({ address: temporalAddress });
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
