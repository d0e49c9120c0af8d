/**
 * The outbound request policy, attacked from every side a caller controls (issue 16, findings 1 and
 * 4): a script's absolute URL, `baseUrlOverride`, the proxy's `Base-Url-Override`, an integration
 * whose base URL points inward, and redirects answered by the external API. The outcome is checked
 * where it matters: the internal server saw no connection at all, and the other host saw no
 * credential. Only the fake API and one "other host" are open (test/helpers/outbound.ts); every other
 * local port is what an internal service would be.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stack } from '../kit/stack.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const KEY = 'key-outbound-7f3a9c21';
const X_KEY = 'x-key-5d1e44b0c2';
const WEATHER_KEY = 'appid-9b8c7d6e5f4a';

const PROBE = bundle(`async function (svc, input) {
  try {
    const res = await svc.get({ endpoint: input.url, ...(input.base ? { baseUrlOverride: input.base } : {}) });
    return { ok: true, status: res.status, data: res.data, url: res.request.url };
  } catch (e) {
    return { ok: false, code: e.code, message: e.message, status: e.status === undefined ? null : e.status };
  }
}`);

const YAML = `
integrations:
${[INTEGRATION, 'xkey', 'weather', 'inward']
  .map(
    (id) => `  ${id}:
    actions:
      probe:
        description: Fetches a URL
        input: Probe
        output: Result
        endpoint: POST /${id}/probe`,
  )
  .join('\n')}
models:
  Probe:
    url: string
  Result:
    ok: boolean
`;

interface ProbeResult {
  ok: boolean;
  code?: string;
  message?: string;
  status?: number | null;
  data?: unknown;
  url?: string;
}

let h: ApiHarness;
let other: Awaited<ReturnType<typeof startFakeUpstream>>;
let internal: Server;
let internalUrl: string;
const internalRequests: string[] = [];
let internalConnections = 0;

beforeAll(async () => {
  h = await startApiHarness();
  other = await startFakeUpstream((_req, res) => json(res, 200, { landed: true }));
  // An internal service: on loopback, never opened in the policy.
  internal = createServer((req, res) => {
    internalRequests.push(`${req.method} ${req.url} ${JSON.stringify(req.headers)}`);
    res.end('internal data');
  });
  internal.on('connection', () => internalConnections++);
  await new Promise<void>((resolve) => internal.listen(0, '127.0.0.1', resolve));
  internalUrl = `http://127.0.0.1:${(internal.address() as AddressInfo).port}`;

  h.fake.setHandler((req, res) => {
    const url = new URL(req.url ?? '/', h.fake.url);
    if (url.pathname.endsWith('/to-internal')) {
      res.writeHead(302, { location: `${internalUrl}/api/v1/namespaces/default/workflows` }).end();
    } else if (url.pathname.endsWith('/to-other')) {
      // Echoes the query (with a key sent in it) into the Location, as a careless API might.
      res.writeHead(307, { location: `${other.url}/landing${url.search}` }).end();
    } else if (url.pathname.endsWith('/hop')) {
      res.writeHead(301, { location: '/api/final' }).end();
    } else {
      json(res, 200, { path: url.pathname, key: req.headers['x-api-key'] ?? req.headers['authorization'] ?? null });
    }
  });

  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.api.integrations.create({
    unique_key: 'xkey',
    provider: PROVIDER,
    provider_settings: { api_key: { in: 'header', name: 'X-Api-Key', format: '${apiKey}' } },
  });
  await h.api.integrations.create({
    unique_key: 'weather',
    provider: 'openweathermap',
    provider_settings: { base_url: `${h.fake.url}/weather` },
  });
  // The environment's own configuration pointing the base URL at an internal service.
  await h.api.integrations.create({
    unique_key: 'inward',
    provider: PROVIDER,
    provider_settings: { base_url: internalUrl },
  });
  await h.deploy(h.envA.id, {
    yaml: YAML,
    scripts: [INTEGRATION, 'xkey', 'weather', 'inward'].map((integration) => ({
      integration,
      kind: 'action' as const,
      name: 'probe',
      code: PROBE,
    })),
  });
  for (const [integration, apiKey] of [
    [INTEGRATION, KEY],
    ['xkey', X_KEY],
    ['weather', WEATHER_KEY],
    ['inward', KEY],
  ] as const) {
    await h.api.connections.import({
      provider_config_key: integration,
      connection_id: 'c1',
      credentials: { type: 'API_KEY', apiKey },
    });
  }
}, 180_000);

afterAll(async () => {
  internal.closeAllConnections();
  await new Promise((resolve) => internal.close(resolve));
});

async function probe(integration: string, url: string, base?: string): Promise<ProbeResult> {
  const response = await h.api.raw('POST', `/${integration}/probe`, {
    headers: { 'connection-id': 'c1', 'provider-config-key': integration },
    body: { url, ...(base === undefined ? {} : { base }) },
  });
  expect(response.status, JSON.stringify(response.json)).toBe(200);
  return response.json as ProbeResult;
}

describe('the outbound request policy', () => {
  it('a script reaches no internal address, however it is spelled', async () => {
    const port = new URL(internalUrl).port;
    const temporal = stack().temporalAddress;
    const postgres = new URL(stack().postgresAdminUrl);
    const targets = [
      `${internalUrl}/api/v1/namespaces/default/workflows`,
      `http://localhost:${port}/`,
      `http://[::ffff:127.0.0.1]:${port}/`,
      `http://[::1]:${port}/`,
      `http://2130706433:${port}/`,
      `http://0x7f.0.0.1:${port}/`,
      `http://0.0.0.0:${port}/`,
      `http://${temporal}/api/v1/namespaces`,
      `http://127.0.0.1:${postgres.port}/`,
    ];
    for (const url of targets) {
      const result = await probe(INTEGRATION, url);
      expect(result, url).toMatchObject({ ok: false, code: 'outbound_request_refused' });
      expect(result.message, url).toContain('SERVICE_OUTBOUND_ALLOW');
    }
    expect(internalConnections).toBe(0);
  });

  it('baseUrlOverride and Base-Url-Override go only to the provider’s hosts', async () => {
    const viaScript = await probe(INTEGRATION, '/steal', internalUrl);
    expect(viaScript).toMatchObject({ ok: false, code: 'base_url_not_allowed' });
    const toOther = await probe(INTEGRATION, '/steal', other.url);
    expect(toOther).toMatchObject({ ok: false, code: 'base_url_not_allowed' });

    for (const [integration, target] of [
      [INTEGRATION, internalUrl],
      ['xkey', `${internalUrl}/api/v1/namespaces/default/workflows/sync:x/terminate`],
      ['xkey', other.url],
      ['weather', other.url],
    ] as const) {
      const response = await h.api.proxy(
        { connectionId: 'c1', providerConfigKey: integration },
        { method: 'POST', path: '/terminate', baseUrlOverride: target },
      );
      expect(response.status, `${integration} → ${target}`).toBe(403);
      expect((response.json as { error: { code: string } }).error.code).toBe('base_url_not_allowed');
    }
    expect(internalConnections).toBe(0);
    expect(other.requests).toEqual([]);
  });

  it('an integration whose base URL points at an internal address reaches nothing, by svc or by proxy', async () => {
    const viaScript = await probe('inward', '/api/v1/namespaces');
    expect(viaScript).toMatchObject({ ok: false, code: 'outbound_request_refused' });
    const viaProxy = await h.api.proxy(
      { connectionId: 'c1', providerConfigKey: 'inward' },
      { method: 'GET', path: '/api/v1/namespaces' },
    );
    expect(viaProxy.status).toBe(403);
    expect((viaProxy.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'outbound_request_refused',
    });
    expect(internalConnections).toBe(0);
    expect(internalRequests).toEqual([]);
  });

  it('redirects: each hop is checked, and credentials never follow to another host', async () => {
    const inward = await probe(INTEGRATION, '/to-internal');
    expect(inward).toMatchObject({ ok: false, code: 'outbound_request_refused' });
    expect(internalConnections).toBe(0);

    const headerKey = await probe('xkey', '/to-other');
    const queryKey = await probe('weather', '/to-other');
    expect(headerKey).toMatchObject({ ok: true, status: 200, data: { landed: true } });
    expect(queryKey).toMatchObject({ ok: true, status: 200, data: { landed: true } });
    expect(other.requests).toHaveLength(2);
    const arrived = JSON.stringify(other.requests);
    for (const secret of [KEY, X_KEY, WEATHER_KEY]) expect(arrived).not.toContain(secret);
    expect(other.requests.map((r) => r.url)).toEqual(['/landing', '/landing']);
    // The key in the query is not in what the script keeps of the request either.
    expect(JSON.stringify(queryKey)).not.toContain(WEATHER_KEY);

    // A redirect within the provider's origin keeps the credentials: each hop is authorised again.
    const sameOrigin = await probe('xkey', '/hop');
    expect(sameOrigin).toMatchObject({ ok: true, data: { path: '/api/final', key: X_KEY } });
  });
});
