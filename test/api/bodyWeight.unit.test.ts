import type { AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { bodyCost, countJsonTokens, MAX_JSON_TOKENS } from '../../src/api/jsonBody.js';
import { defineRoute, type AnyRoute } from '../../src/api/route.js';
import { createServer, parseBodyLimit } from '../../src/api/server.js';

const bulk = defineRoute({
  method: 'post',
  path: '/bulk',
  summary: 'Counts the items of a body',
  tags: ['test'],
  auth: 'secret-key',
  body: z.object({ items: z.array(z.unknown()) }),
  responses: { 200: { description: 'the count', schema: z.object({ count: z.number() }) } },
  handler: async ({ body }) => ({ count: body.items.length }),
});
const routes: AnyRoute[] = [bulk];
const keys: Record<string, { id: string; name: string }> = {
  'sk-a': { id: 'env-a', name: 'a' },
  'sk-b': { id: 'env-b', name: 'b' },
  'sk-c': { id: 'env-c', name: 'c' },
};

let base = '';
let close: () => void = () => undefined;

beforeAll(async () => {
  // A budget that does not refill within the test: what a body costs is what the key has left.
  const app = createServer({ routes, authenticate: async (key) => keys[key], rateLimit: { perSecond: 1, burst: 400 } });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
afterAll(() => close());

const post = async (key: string, body: string) => {
  const response = await fetch(`${base}/bulk`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body,
  });
  return {
    status: response.status,
    json: (await response.json()) as { count?: number; error?: { code: string; message: string } },
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
    expect(bodyCost(10, 10)).toBe(1);
    expect(bodyCost(64 * 1024, 2_500)).toBe(4);
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

  it('a heavy body spends its own key’s budget by its weight, not another key’s', async () => {
    // 150,000 items: ~150 requests' worth of tokens plus ~12 of bytes.
    const heavy = JSON.stringify({ items: Array.from({ length: 150_000 }, (_, i) => i) });
    const first = await post('sk-a', heavy);
    expect(first).toEqual({ status: 200, json: { count: 150_000 } });
    const second = await post('sk-a', heavy);
    expect(second.status).toBe(200);
    // 400 - 2 × ~164 left ~70: the third is refused, and a small body still passes.
    const third = await post('sk-a', heavy);
    expect([third.status, third.json.error?.code]).toEqual([429, 'rate_limited']);
    expect((await post('sk-a', '{"items":[1]}')).json).toEqual({ count: 1 });
    // The other key's budget is its own.
    expect(await post('sk-b', heavy)).toEqual({ status: 200, json: { count: 150_000 } });
  });
});
