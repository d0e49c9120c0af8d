import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { gzipSync } from 'node:zlib';
import { readBodyBytes } from '../../src/api/body.js';
import { countJsonTokens, DEFAULT_BODY_TOKENS, MAX_JSON_TOKENS } from '../../src/api/jsonBody.js';
import { defineRoute, type AnyRoute } from '../../src/api/route.js';
import { createServer, parseBodyLimit } from '../../src/api/server.js';

/** A route that counts the items of its body, of a schema and a token cap of its own. */
const counting = (path: string, item: z.ZodType, bodyTokens?: number) =>
  defineRoute({
    method: 'post',
    path,
    summary: 'Counts the items of a body',
    tags: ['test'],
    auth: 'secret-key',
    body: z.object({ items: z.array(item) }),
    ...(bodyTokens === undefined ? {} : { bodyTokens }),
    responses: { 200: { description: 'the count', schema: z.object({ count: z.number() }) } },
    handler: async ({ body }) => ({ count: body.items.length }),
  });
const bulk = counting('/bulk', z.unknown(), MAX_JSON_TOKENS);
/** Each item must be a string: a body of numbers is refused with an issue per item. */
const strings = counting('/strings', z.string(), MAX_JSON_TOKENS);
/** A route of the default size. */
const small = counting('/small', z.unknown());
/** Holds the loop ~`ms` of work its body asks for, through `spend` (as a deploy's compile does). */
const busy = defineRoute({
  method: 'post',
  path: '/busy',
  summary: 'Works synchronously as long as asked',
  tags: ['test'],
  auth: 'secret-key',
  body: z.object({ ms: z.number().max(1000) }),
  responses: { 200: { description: 'done', schema: z.object({ count: z.number() }) } },
  handler: async ({ body, spend }) => ({
    count: spend(() => {
      const until = performance.now() + body.ms;
      let spins = 0;
      while (performance.now() < until) spins++;
      return spins > 0 ? 1 : 0;
    }),
  }),
});
/** Reads its body as bytes (as webhooks and the proxy do) and answers how many it read. */
const bytes = defineRoute({
  method: 'post',
  path: '/bytes',
  summary: 'Reads the body as bytes',
  tags: ['test'],
  auth: 'none',
  responses: { 200: { description: 'the bytes', schema: z.object({ text: z.string() }) } },
  handler: async ({ req }) => ({ text: (await readBodyBytes(req)).toString('utf8').slice(0, 40) }),
});
/** The same, passing the bytes on as sent (the proxy). */
const sent = defineRoute({
  method: 'post',
  path: '/sent',
  summary: 'Reads the body as sent',
  tags: ['test'],
  auth: 'none',
  responses: { 200: { description: 'the bytes', schema: z.object({ count: z.number() }) } },
  handler: async ({ req }) => ({ count: (await readBodyBytes(req, { inflate: false })).length }),
});
const routes: AnyRoute[] = [bulk, strings, small, bytes, busy, sent];
const keys: Record<string, { id: string; name: string }> = {
  'sk-a': { id: 'env-a', name: 'a' },
  'sk-b': { id: 'env-b', name: 'b' },
  'sk-c': { id: 'env-c', name: 'c' },
  'sk-d': { id: 'env-d', name: 'd' },
  'sk-e': { id: 'env-e', name: 'e' },
  'sk-f': { id: 'env-f', name: 'f' },
  'sk-g': { id: 'env-g', name: 'g' },
  'sk-h': { id: 'env-h', name: 'h' },
};

let base = '';
/** The keys the server was asked to authenticate, in order. */
const authenticated: string[] = [];
let close: () => void = () => undefined;

beforeAll(async () => {
  // A budget that does not refill within the test: what a body costs is what the key has left.
  const app = createServer({
    routes,
    authenticate: async (key) => {
      authenticated.push(key);
      return keys[key];
    },
    rateLimit: { perSecond: 1, burst: 100 },
    bodyLimit: '5mb',
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
afterAll(() => close());

const post = async (key: string, body: string | Buffer, path = '/bulk', headers: Record<string, string> = {}) => {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
    body,
  });
  return {
    status: response.status,
    retryAfter: Number(response.headers.get('retry-after')),
    json: (await response.json()) as {
      count?: number;
      text?: string;
      error?: { code: string; message: string; errors?: unknown[] };
    },
  };
};

/** The longest the event loop was held while `work` ran, in ms (sampled every 5 ms). */
async function longestHold(work: () => Promise<void>): Promise<number> {
  const histogram = monitorEventLoopDelay({ resolution: 5 });
  histogram.enable();
  try {
    await work();
  } finally {
    histogram.disable();
  }
  return histogram.max / 1e6;
}

describe('JSON bodies are weighed before they are parsed', () => {
  it('counts the commas, colons and opening brackets outside strings', () => {
    const count = (text: string) => countJsonTokens(Buffer.from(text), Number.POSITIVE_INFINITY);
    expect(count('{}')).toBe(1);
    expect(count('{"a":1,"b":[1,2,{"c":3}]}')).toBe(9);
    expect(count('"a,b:[{"')).toBe(0);
    expect(count(String.raw`{"a\",:[{":"\\",",":1}`)).toBe(4);
    expect(count(String.raw`["\\\"[,", 1]`)).toBe(2);
    // An unterminated string ends the count; the parser refuses the text afterwards.
    expect(count('[1,"2,3')).toBe(2);
    expect(count('[' + '0,'.repeat(10) + '0]')).toBe(11);
    // Counting stops just past the limit it is given.
    expect(countJsonTokens(Buffer.from('[' + '0,'.repeat(1000) + '0]'), 10)).toBe(11);
  });

  it('reads the body limit as Express does, for the routes that read bytes (the proxy, webhooks)', () => {
    expect([parseBodyLimit('64kb'), parseBodyLimit('5mb'), parseBodyLimit('1024'), parseBodyLimit('1.5KB')]).toEqual([
      65_536, 5_242_880, 1_024, 1_536,
    ]);
    expect(() => parseBodyLimit('lots')).toThrow(/not a size such as '5mb'/);
  });

  it('a stranger’s body of 300,000 keys is never parsed, and a known key’s is refused unparsed', async () => {
    const text = JSON.stringify({
      items: Object.fromEntries(Array.from({ length: 300_000 }, (_, i) => [`k${i}`, 'v'])),
    });
    // What parsing it costs on this machine now: the hold each request used to put on every caller.
    const parsing = performance.now();
    JSON.parse(text);
    const parseMs = performance.now() - parsing;

    let answers: Awaited<ReturnType<typeof post>>[] = [];
    const stranger = await longestHold(async () => {
      answers = await Promise.all([post('sk-nobody', text), post('sk-nobody', text), post('sk-nobody', text)]);
    });
    expect(answers.map((answer) => [answer.status, answer.json.error?.code])).toEqual(
      Array(3).fill([401, 'invalid_secret_key']),
    );
    // Before, each of these requests held the loop at least as long as the parse (three side by side, 3×).
    expect(stranger, `held ${stranger} ms; the parse takes ${parseMs} ms`).toBeLessThan(parseMs / 2);
    const known = await longestHold(async () => {
      answers = await Promise.all([post('sk-c', text), post('sk-c', text)]);
    });
    expect(answers.map((answer) => [answer.status, answer.json.error?.code])).toEqual(
      Array(2).fill([413, 'payload_too_large']),
    );
    expect(answers[0]!.json.error?.message).toContain(`more than ${MAX_JSON_TOKENS.toLocaleString('en-US')} values`);
    console.log(
      `longest hold: strangers ${stranger.toFixed(1)} ms, a known key ${known.toFixed(1)} ms; parse ${parseMs.toFixed(1)} ms`,
    );
    expect(known, `held ${known} ms; the parse takes ${parseMs} ms`).toBeLessThan(parseMs / 2);
  });

  it('what a body costs the loop is charged to its own key, whose budget it may put in debt', async () => {
    // 150,000 numbers where strings are wanted: an issue each, the costliest body to validate.
    const refused = JSON.stringify({ items: Array.from({ length: 150_000 }, (_, i) => i) });
    const started = performance.now();
    const first = await post('sk-a', refused, '/strings');
    const ms = performance.now() - started;
    expect(first.status).toBe(400);
    expect(first.json.error?.code).toBe('invalid_request');
    // The answer lists the first 100 problems and says how many there were, not 150,000 of them.
    expect(first.json.error?.errors).toHaveLength(100);
    expect(first.json.error?.message).toContain('(and 149999 more); the first 100 are listed');
    // It held the loop far longer than its budget (1 ms a request, then 0.5 ms a request more; 100): the key is
    // in debt, and even a small request waits until it is paid.
    const next = await post('sk-a', '{"items":[1]}');
    expect([next.status, next.json.error?.code], `the refused body took ${ms.toFixed(0)} ms`).toEqual([
      429,
      'rate_limited',
    ]);
    expect(next.retryAfter).toBeGreaterThan(1);
    // Another key's budget is its own, and the same count of valid items costs little.
    const valid = JSON.stringify({ items: Array.from({ length: 150_000 }, (_, i) => String(i)) });
    expect(await post('sk-b', '{"items":[1]}')).toMatchObject({ status: 200, json: { count: 1 } });
    expect(await post('sk-b', valid, '/strings')).toMatchObject({ status: 200, json: { count: 150_000 } });
  });

  it('a route takes at most its own number of tokens; a body says UTF-8 or nothing', async () => {
    const items = (count: number) => JSON.stringify({ items: Array.from({ length: count }, () => 0) });
    expect(await post('sk-d', items(DEFAULT_BODY_TOKENS - 10), '/small')).toMatchObject({ status: 200 });
    const over = await post('sk-d', items(DEFAULT_BODY_TOKENS + 10), '/small');
    expect([over.status, over.json.error?.code]).toEqual([413, 'payload_too_large']);
    expect(over.json.error?.message).toContain('more than 10,000 values');
    // UTF-16 would hide its tokens from a count over the bytes: refused before it is read.
    const utf16 = await post('sk-d', Buffer.from('{"items":[1]}', 'utf16le'), '/bulk', {
      'content-type': 'application/json; charset=utf-16le',
    });
    expect([utf16.status, utf16.json.error?.code]).toEqual([415, 'invalid_request']);
    // A charset inside a quoted parameter is that parameter's; the body's own is the one that counts.
    const quoted = await post('sk-d', Buffer.from('{"items":[1]}'), '/bulk', {
      'content-type': 'application/json; x="a;charset=utf-8"; charset=utf-7',
    });
    expect(quoted.status).toBe(415);
    expect(
      await post('sk-d', '{"items":[1]}', '/bulk', { 'content-type': 'application/json; charset=UTF-8' }),
    ).toMatchObject({
      status: 200,
    });
  });

  it('a JSON body read as bytes is inflated as the parser would, within the limit', async () => {
    const text = '{"type":"issue.updated"}';
    const gzipped = await post('', gzipSync(text), '/bytes', { 'content-encoding': 'gzip' });
    expect(gzipped).toMatchObject({ status: 200, json: { text } });
    // 6 MB of spaces in ~6 KB of gzip: refused at the 5 MB limit, not inflated whole.
    const bomb = await post('', gzipSync(Buffer.alloc(6 * 1024 * 1024, 0x20)), '/bytes', {
      'content-encoding': 'gzip',
    });
    expect([bomb.status, bomb.json.error?.code]).toEqual([413, 'payload_too_large']);
    const unknown = await post('', Buffer.from(text), '/bytes', { 'content-encoding': 'zstd' });
    expect(unknown.status).toBe(415);
    // What is passed on as sent (the proxy, with its Content-Encoding) stays compressed.
    const compressed = gzipSync(text);
    expect(await post('', compressed, '/sent', { 'content-encoding': 'gzip' })).toMatchObject({
      status: 200,
      json: { count: compressed.length },
    });
  });

  it('work a handler does for a body is charged to its key, not to another', async () => {
    // 200 ms of work against a budget of 100 requests of 0.5 ms: the key is in debt afterwards.
    expect(await post('sk-e', '{"ms":200}', '/busy')).toMatchObject({ status: 200, json: { count: 1 } });
    const next = await post('sk-e', '{"ms":0}', '/busy');
    expect([next.status, next.json.error?.code]).toEqual([429, 'rate_limited']);
    expect(await post('sk-f', '{"ms":0}', '/busy')).toMatchObject({ status: 200 });
  });

  it('requests a key sends side by side do no body work once it is in debt', async () => {
    // Both are counted when their headers arrive, with the budget full, and only then send their bodies'
    // last byte: the first one's work puts the key in debt, and the second one does none.
    const sending = [0, 1].map(() => {
      const request = httpRequest(`${base}/busy`, {
        method: 'POST',
        headers: { authorization: 'Bearer sk-g', 'content-type': 'application/json', 'content-length': 10 },
      });
      const status = new Promise<number>((resolve, reject) => {
        request.on('response', (response) => {
          response.resume();
          resolve(response.statusCode ?? 0);
        });
        request.on('error', reject);
      });
      request.write('{"ms":200');
      return { request, status };
    });
    const deadline = Date.now() + 30_000;
    while (authenticated.filter((key) => key === 'sk-g').length < 2 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    for (const { request } of sending) request.end('}');
    const statuses = await Promise.all(sending.map(({ status }) => status));
    expect(statuses.sort()).toEqual([200, 429]);
    // A request's own charges do not refuse its own work: one body that puts the key in debt is served.
    const heavy = JSON.stringify({ items: Array.from({ length: 150_000 }, (_, i) => i) });
    expect(await post('sk-h', heavy, '/strings')).toMatchObject({ status: 400 });
  });

  it('a body is decoded as UTF-8 whatever parameter the header hides another charset in', async () => {
    // `charset =utf-7` (a space before `=`): Node's MIME parser ignores it, the body parser would have
    // decoded UTF-7, in which `+ACw-` is a comma the weighing never sees.
    const sneaky = await post('sk-d', '{"items":[1+ACw-1+ACw-1]}', '/bulk', {
      'content-type': 'application/json; charset =utf-7',
    });
    expect([sneaky.status, sneaky.json.error?.code]).toEqual([400, 'invalid_json']);
    expect(
      await post('sk-d', '{"items":[1]}', '/bulk', { 'content-type': 'application/json; charset=""' }),
    ).toMatchObject({
      status: 200,
    });
  });
});
