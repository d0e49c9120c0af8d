/**
 * The outbound client bounds what an external API answers, so that no answer is held whole in the
 * worker or the API process. Each test checks what the process was made to hold, and failed before its fix:
 * - a gzip bomb through `svc` with `decompress` (src/runtime/http.ts: 32 MiB at most);
 * - an endless upstream answer held whole by the proxy (src/api/routes/proxy/allProxy.ts: 32 MiB at most,
 *   502 proxy_response_too_large).
 */
import { gzipSync } from 'node:zlib';
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, type ApiHarness } from '../kit/index.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { bundle } from '../kit/scripts.js';

const KEY = 'key-response-limits-4c1d9e';

// Decompresses to 48 MiB: about 48 KiB on the wire. A 1 GiB bomb is 1 MiB on the wire and would take
// the worker (every environment's syncs and actions) down with it; 48 MiB shows that no bound applies.
const BOMB_BYTES = 48 * 1024 * 1024;
const BOMB = gzipSync(Buffer.alloc(BOMB_BYTES, 'a'), { level: 9 });

const PROBE = bundle(`async function (svc, input) {
  try {
    const res = await svc.get({ endpoint: input.url, decompress: true, responseType: 'text' });
    return { ok: true, status: res.status, length: typeof res.data === 'string' ? res.data.length : -1 };
  } catch (e) {
    return { ok: false, code: e.code, message: String(e.message).slice(0, 300) };
  }
}`);

const YAML = `
integrations:
  ${INTEGRATION}:
    actions:
      probe:
        description: Fetches a URL
        input: Probe
        output: Result
        endpoint: POST /probe
models:
  Probe:
    url: string
  Result:
    ok: boolean
`;

let bombsServed = 0;
let hugeServed = 0;

/** The API whose fake external API serves a gzip bomb and 40 MiB, with the probe action deployed. */
const it = kit.extend<{ api: ApiHarness }>({
  api: [async ({ db, upstream }, use) => withApiHarness({ database: db, upstream }, use, setUp), { scope: 'file' }],
});

async function setUp(h: ApiHarness): Promise<void> {
  h.fake.setHandler((req, res) => {
    const url = new URL(req.url ?? '/', h.fake.url);
    if (url.pathname.endsWith('/bomb')) {
      bombsServed++;
      res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' });
      res.end(BOMB);
    } else if (url.pathname.endsWith('/huge')) {
      // More than the proxy passes on (32 MiB), sent as it is produced.
      hugeServed++;
      res.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(1024 * 1024, 'b');
      let sent = 0;
      const more = (): void => {
        while (sent < 40) {
          sent++;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end();
      };
      more();
    } else {
      res.writeHead(404).end();
    }
  });
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.deploy(h.envA.id, {
    yaml: YAML,
    scripts: [{ integration: INTEGRATION, kind: 'action' as const, name: 'probe', code: PROBE }],
  });
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'c1',
    credentials: { type: 'API_KEY', apiKey: KEY },
  });
}

describe('the outbound client bounds what an external API answers', () => {
  it('svc with decompress: a decompression bomb from the external API is refused, not decompressed whole into the worker', async ({
    api: h,
  }) => {
    const response = await h.api.raw('POST', '/probe', {
      headers: { 'connection-id': 'c1', 'provider-config-key': INTEGRATION },
      body: { url: '/bomb' },
    });
    expect(bombsServed).toBeGreaterThan(0);
    const result = response.json as { ok?: boolean; length?: number; code?: string; message?: string };
    // The outcome that matters: the script never got the 48 MiB body (the worker never held it).
    expect(result.length ?? 0, JSON.stringify(result).slice(0, 400)).toBeLessThan(BOMB_BYTES);
    expect(result.ok, JSON.stringify(result).slice(0, 400)).toBe(false);
  }, 120_000);
  it('the proxy refuses an upstream answer past 32 MiB with a clear error instead of holding it whole', async ({
    api: h,
  }) => {
    const response = await h.api.raw('GET', '/proxy/huge', {
      headers: { 'connection-id': 'c1', 'provider-config-key': INTEGRATION },
    });
    expect(hugeServed).toBeGreaterThan(0);
    expect(response.status).toBe(502);
    expect((response.json as { error?: { code?: string } }).error?.code).toBe('proxy_response_too_large');
  }, 60_000);
});
