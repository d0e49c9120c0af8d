/**
 * Bad input against every REST route: the routes are read from the service's own /openapi.json, and
 * each gets random and mutated bodies, queries, path parameters and headers. The service never answers
 * 5xx and never shows a stack trace or a source path; every refusal is a 4xx with a snake_case code.
 * Then malformed inbound webhooks, and bodies over the limit (413). The service.yaml fuzzer is
 * src/config/fuzz.test.ts.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { INTEGRATION } from '../kit/fixtures.js';
import { deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { recordFigures, size } from './lib/figures.js';
import { Random } from './lib/random.js';
import { json } from '../kit/upstream.js';

const CASES_PER_ROUTE = size(25, 400);
const SEED = Number(process.env['CHAOS_SEED'] ?? Date.now() % 1_000_000);
const BODY_LIMIT = '64kb';

interface Operation {
  method: string;
  path: string;
  params: string[];
  query: string[];
  bodyProperties: string[];
  /** Taking the service admin key rather than an environment key. */
  admin: boolean;
  /** Whether the route reads a body (OpenAPI's requestBody). */
  takesBody: boolean;
}

/**
 * Percent-encodings no URL may carry: a bare %, a % without two hex digits, bytes that are not UTF-8
 * (a lone continuation byte, an overlong form, an encoded UTF-16 surrogate, a truncated sequence).
 */
const MALFORMED_ENCODINGS = ['%', '%FF', '%ED%A0%80', '%C0%AF', '%E0%80%AF', '%G1', '%2', 'a%', '%E2%82', '%80'];

/** What an answer may not contain: a stack frame, a source path, an internal error class. */
const LEAK = /\n\s+at |\bat [\w.<>]+ \(|\.(ts|js):\d+|node_modules|TypeError|ReferenceError|SyntaxError: Unexpected/;

let h: ApiHarness;
let operations: Operation[];

beforeAll(async () => {
  h = await startApiHarness({ bodyLimit: BODY_LIMIT });
  h.fake.setHandler((_request, response) => json(response, 200, { ok: true }));
  await deployWithConnection(h, 'fuzz-key');
  const spec = (await (
    await fetch(`${h.baseUrl}/openapi.json`, { headers: { authorization: `Bearer ${h.envA.secretKey}` } })
  ).json()) as { paths: Record<string, Record<string, OpenApiOperation>> };
  operations = Object.entries(spec.paths).flatMap(([path, methods]) =>
    Object.entries(methods)
      .filter(([method]) => ['get', 'post', 'put', 'patch', 'delete'].includes(method))
      .map(([method, operation]) => ({
        method: method.toUpperCase(),
        path,
        params: (operation.parameters ?? []).filter((p) => p.in === 'path').map((p) => p.name),
        query: (operation.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name),
        bodyProperties: Object.keys(operation.requestBody?.content?.['application/json']?.schema?.properties ?? {}),
        admin: (operation.security ?? []).some((scheme) => 'adminKey' in scheme),
        // The proxy passes any body on; it declares none.
        takesBody: operation.requestBody !== undefined || path.startsWith('/proxy'),
      })),
  );
}, 120_000);

interface OpenApiOperation {
  parameters?: { in: string; name: string }[];
  security?: Record<string, unknown>[];
  requestBody?: { content?: Record<string, { schema?: { properties?: Record<string, unknown> } }> };
}

describe('bad input', () => {
  it('every route, random and mutated input: never a 5xx, never a stack trace, always a coded 4xx refusal', async () => {
    const random = new Random(SEED);
    expect(operations.length).toBeGreaterThan(25);
    const statuses = new Map<number, number>();
    const failures: string[] = [];
    let requests = 0;
    for (const operation of operations) {
      for (let i = 0; i < CASES_PER_ROUTE; i++) {
        // Now and then a raw malformed percent-encoding, in the path or the query: always a 400.
        const malformed = random.chance(0.1) ? random.pick(MALFORMED_ENCODINGS) : undefined;
        const inPath = malformed !== undefined && operation.params.length > 0 && random.chance(0.5);
        const path = operation.path.replace(/\{(\w+)\}/g, (_m, name: string) =>
          inPath
            ? `x${malformed}`
            : encodeURIComponent(random.pick([random.string(), 'c1', INTEGRATION, h.envA.name, h.envB.name, name])),
        );
        const query = new URLSearchParams();
        for (const name of [...operation.query, ...random.some(['limit', 'cursor', 'model', 'x', '__proto__'])]) {
          if (random.chance(0.6)) query.set(name, random.scalarText());
        }
        const rawQuery =
          malformed !== undefined && !inPath ? `${random.pick(['x', ...operation.query])}=${malformed}` : '';
        const headers: Record<string, string> = {};
        const auth = random.int(10);
        if (auth < 7) headers['authorization'] = `Bearer ${h.envA.secretKey}`;
        else if (auth === 7)
          headers['authorization'] = random.pick(['Bearer', 'Basic abc', `Bearer ${headerSafe(random.string())}`, '']);
        if (random.chance(0.7)) headers['connection-id'] = random.pick(['c1', headerSafe(random.string())]);
        if (random.chance(0.7))
          headers['provider-config-key'] = random.pick([INTEGRATION, headerSafe(random.string())]);
        let body: string | undefined;
        if (operation.method !== 'GET' && operation.method !== 'DELETE' && random.chance(0.9)) {
          const kind = random.int(4);
          if (kind === 0) body = random.pick(['{', '[1,', 'null', '"x"', '{"a":}', '\u0000', 'true', '1e999']);
          else if (kind === 1) body = JSON.stringify(random.value(3));
          else body = JSON.stringify(random.mutatedObject(operation.bodyProperties));
          headers['content-type'] = random.pick([
            'application/json',
            'application/json',
            'text/plain',
            'application/x-www-form-urlencoded',
            'application/json; charset=latin1',
          ]);
        }
        const search = [query.toString(), rawQuery].filter((part) => part !== '').join('&');
        const url = `${h.baseUrl}${path}${search === '' ? '' : `?${search}`}`;
        const response = await fetch(url, {
          method: operation.method,
          headers,
          ...(body === undefined ? {} : { body }),
        }).catch((error: unknown) => error);
        requests++;
        if (!(response instanceof Response)) {
          failures.push(`${operation.method} ${url}: no answer (${String(response)})`);
          continue;
        }
        const text = await response.text();
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        const what = `${operation.method} ${url} ${headers['content-type'] ?? ''} ${body?.slice(0, 200) ?? ''} -> ${response.status} ${text.slice(0, 300)}`;
        if (malformed !== undefined && response.status !== 400) failures.push(`malformed encoding not a 400: ${what}`);
        else if (response.status >= 500) failures.push(what);
        else if (LEAK.test(text)) failures.push(`leak: ${what}`);
        else if (response.status >= 400) {
          // Either the taxonomy's { error: { code, message } }, or an action's own ActionError, which
          // the API hands back as { error_type: 'action_script_failure', payload } (docs/api.md).
          const code = codeOf(text);
          if (typeof code !== 'string' || !/^[a-z][a-z0-9_]*$/.test(code)) failures.push(`uncoded: ${what}`);
        }
      }
    }
    const serverErrors = h.logs.filter((line) => /internal_error|"status":5\d\d/.test(line));
    recordFigures('bad-input', {
      seed: SEED,
      routes: operations.length,
      requests,
      statuses: [...statuses.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([status, n]) => `${status}×${n}`)
        .join(' '),
      failures: failures.length,
    });
    expect(failures.slice(0, 10)).toEqual([]);
    expect(serverErrors.slice(0, 5)).toEqual([]);
  }, 600_000);

  it('a malformed percent-encoding answers 400 on every route, in the path or the query, with or without a key', async () => {
    const checked: string[] = [];
    const failures: string[] = [];
    // Routes of the OpenAPI document, a generated endpoint, and the browser routes outside it.
    const targets = [
      ...operations.map((operation) => ({ method: operation.method, path: operation.path, params: operation.params })),
      { method: 'GET', path: '/issues/{id}', params: ['id'] },
      { method: 'GET', path: '/oauth/connect/{integration}', params: ['integration'] },
      { method: 'GET', path: '/oauth/callback', params: [] },
      { method: 'GET', path: '/connect', params: [] },
      { method: 'POST', path: '/connect', params: [] },
      { method: 'GET', path: '/dashboard/{file}', params: ['file'] },
    ];
    for (const target of targets) {
      for (const malformed of MALFORMED_ENCODINGS) {
        const urls = [`${target.path.replace(/\{\w+\}/g, 'c1')}?x=${malformed}`];
        if (target.params.length > 0) urls.push(target.path.replace(/\{\w+\}/g, `c${malformed}`));
        for (const url of urls) {
          for (const authorization of [`Bearer ${h.envA.secretKey}`, undefined]) {
            const response = await fetch(`${h.baseUrl}${url}`, {
              method: target.method,
              headers: {
                ...(authorization ? { authorization } : {}),
                'connection-id': 'c1',
                'provider-config-key': INTEGRATION,
                ...(target.method === 'GET' || target.method === 'DELETE'
                  ? {}
                  : { 'content-type': 'application/json' }),
              },
              ...(target.method === 'GET' || target.method === 'DELETE' ? {} : { body: '{}' }),
            });
            const text = await response.text();
            const code = codeOf(text);
            if (response.status !== 400 || code !== 'invalid_request') {
              failures.push(`${target.method} ${url} -> ${response.status} ${text.slice(0, 200)}`);
            }
            checked.push(url);
          }
        }
      }
    }
    recordFigures('malformed-encodings', {
      routes: targets.length,
      requests: checked.length,
      failures: failures.length,
    });
    expect(failures.slice(0, 10)).toEqual([]);
    expect(targets.length).toBeGreaterThan(25);
  }, 300_000);

  it('malformed inbound webhooks are refused with a 4xx that says why', async () => {
    const post = (path: string, body: string | Buffer, headers: Record<string, string> = {}) =>
      fetch(`${h.baseUrl}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...headers },
        body,
      });
    const webhook = `/webhook/${h.envA.name}/${INTEGRATION}`;
    // Unsigned, so that what is malformed is the webhook itself (signatures: test/chaos/security.test.ts).
    await h.api.environment.updateSettings({ allow_unsigned_webhooks: true });
    const cases: [string, Response][] = [
      ['not JSON', await post(webhook, '{"type": ')],
      ['a JSON string', await post(webhook, '"issue.updated"')],
      ['no type', await post(webhook, '{"issue":{"id":"1"}}')],
      ['type not a string', await post(webhook, '{"type":{"a":1}}')],
      ['unknown environment', await post(`/webhook/nope-env/${INTEGRATION}`, '{"type":"issue.updated"}')],
      ['unknown integration', await post(`/webhook/${h.envA.name}/nope`, '{"type":"issue.updated"}')],
      [
        'binary body',
        await post(webhook, Buffer.from([0xff, 0xfe, 0x00, 0x01]), { 'content-type': 'application/octet-stream' }),
      ],
      ['oversized', await post(webhook, JSON.stringify({ type: 'x', pad: 'y'.repeat(200_000) }))],
    ];
    const answers: string[] = [];
    for (const [name, response] of cases) {
      const text = await response.text();
      answers.push(`${name}: ${response.status}`);
      expect(response.status, `${name}: ${text}`).toBeGreaterThanOrEqual(400);
      expect(response.status, `${name}: ${text}`).toBeLessThan(500);
      expect(text).not.toMatch(LEAK);
      expect((JSON.parse(text) as { error: { code: string } }).error.code).toMatch(/^[a-z_]+$/);
    }
    expect(cases.at(-1)![1].status).toBe(413);
    recordFigures('bad-webhooks', { cases: answers.join('; ') });
  });

  it(`bodies over the limit (${BODY_LIMIT} here) are refused with 413 on every route that takes a body`, async () => {
    const big = JSON.stringify({ padding: 'z'.repeat(100 * 1024) });
    const refused: string[] = [];
    // Routes that take no body (a key's rotation, a redeploy) do not read one: they are not among these.
    for (const operation of operations.filter((o) => ['POST', 'PUT', 'PATCH'].includes(o.method) && o.takesBody)) {
      const path = operation.path.replace(/\{(\w+)\}/g, 'c1');
      const response = await fetch(`${h.baseUrl}${path}`, {
        method: operation.method,
        headers: {
          // A body is read once its key is checked: each route with the key it takes.
          authorization: `Bearer ${operation.admin ? h.adminKey : h.envA.secretKey}`,
          'content-type': 'application/json',
          'connection-id': 'c1',
          'provider-config-key': INTEGRATION,
        },
        body: big,
      }).catch((error: unknown) => {
        // A reset instead of an answer (the server destroying the request it refused) says which route.
        throw new Error(
          `${operation.method} ${path}: ${String(error)}: ${String((error as { cause?: unknown }).cause)}`,
        );
      });
      const text = await response.text();
      expect(response.status, `${operation.method} ${path}: ${text.slice(0, 200)}`).toBe(413);
      expect(codeOf(text)).toBe('payload_too_large');
      refused.push(`${operation.method} ${operation.path}`);
    }
    recordFigures('oversized', { routesRefusing413: refused.length });
    expect(refused.length).toBeGreaterThan(10);
  });
});

/** Header values a client can send at all (fetch refuses others before they leave): visible ASCII. */
function headerSafe(value: string): string {
  return value.replace(/[^\x21-\x7e]/g, '_') || '_';
}

/**
 * The code of an error answer: the taxonomy's `error.code`, an ActionError's `error_type`, or for /mcp
 * (JSON-RPC 2.0 error objects, docs/api.md "Actions as tools for AI agents") the service's code in
 * `error.data.code`, else the protocol's numeric code (the SDK's own refusals: 406, 415, …) as `json_rpc_<n>`.
 */
function codeOf(text: string): unknown {
  const parsed = safeJson(text) as
    { jsonrpc?: unknown; error?: { code?: unknown; data?: { code?: unknown } }; error_type?: unknown } | undefined;
  if (parsed?.jsonrpc === '2.0' && typeof parsed.error?.code === 'number') {
    return parsed.error.data?.code ?? `json_rpc_${Math.abs(parsed.error.code)}`;
  }
  return parsed?.error?.code ?? parsed?.error_type;
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
