import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { ServiceError } from '../../src/errors.js';
import { defineRoute, type AnyRoute } from '../../src/api/route.js';
import { createServer } from '../../src/api/server.js';
import { buildOpenApiDocument } from '../../src/api/openapi.js';

const echo = defineRoute({
  method: 'post',
  path: '/echo/:name',
  summary: 'Echo',
  tags: ['test'],
  auth: 'secret-key',
  connectionScoped: true,
  params: z.object({ name: z.string().min(2) }).strict(),
  query: z.object({ times: z.coerce.number().int().min(1).max(3).default(1) }).strict(),
  body: z.object({ text: z.string() }).strict(),
  responses: { 200: { description: 'the echo', schema: z.object({ echo: z.string() }) } },
  handler: async ({ params, query, body, environment, connection }) => ({
    echo: `${params.name}:${body.text.repeat(query.times)}`,
    environment: environment.name,
    connection,
  }),
});
const failing = defineRoute({
  method: 'get',
  path: '/boom',
  summary: 'Throws an unexpected error',
  tags: ['test'],
  auth: 'none',
  responses: {},
  handler: async () => {
    throw new Error('secret internals at /srv/app.ts:12');
  },
});
const typed = defineRoute({
  method: 'get',
  path: '/conflict',
  summary: 'Throws a ServiceError',
  tags: ['test'],
  auth: 'none',
  responses: {},
  handler: async () => {
    throw new ServiceError('environment_exists', 'It is already there.');
  },
});
const routes: AnyRoute[] = [echo, failing, typed];

let base = '';
let close: () => void = () => undefined;
const logs: string[] = [];

beforeAll(async () => {
  const app = createServer({
    routes,
    authenticate: async (key) =>
      // Keys of their own for tests that must not meet the rate limit the others spend.
      ({
        'sk-good': { id: 'env-1', name: 'dev' },
        'sk-body': { id: 'env-2', name: 'body' },
        'sk-fields': { id: 'env-3', name: 'fields' },
      })[key],
    bodyLimit: '1kb',
    // A small budget, so that the test of the limit spends it; each body's parse and validation past a
    // quarter of a millisecond costs more of it (the first ones in a process, before the JIT, the most).
    rateLimit: { perSecond: 1, burst: 40 },
    logger: {
      info: (message, fields) => logs.push(JSON.stringify({ message, ...fields })),
      error: (message, fields) => logs.push(JSON.stringify({ message, ...fields })),
    },
  });
  const server = app.listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  close = () => server.close();
});
afterAll(() => close());

const good = {
  authorization: 'Bearer sk-good',
  'content-type': 'application/json',
  'connection-id': 'c1',
  'provider-config-key': 'github',
};

describe('API server: what every route shares', () => {
  it('answers a valid request with the handler result, the request id echoed', async () => {
    const response = await fetch(`${base}/echo/ab?times=2`, {
      method: 'POST',
      headers: { ...good, 'x-request-id': 'req-123' },
      body: JSON.stringify({ text: 'hi' }),
    });
    expect(response.status).toBe(200);
    expect(response.headers.get('x-request-id')).toBe('req-123');
    expect(await response.json()).toEqual({
      echo: 'ab:hihi',
      environment: 'dev',
      connection: { environmentId: 'env-1', integrationId: 'github', connectionId: 'c1' },
    });
    expect(logs.some((line) => line.includes('"request_id":"req-123"') && line.includes('"status":200'))).toBe(true);
  });

  it('refuses a request without a key, and one with an unknown key, in the error envelope', async () => {
    const missing = await fetch(`${base}/echo/ab`, { method: 'POST', body: '{}' });
    expect(missing.status).toBe(401);
    expect(await missing.json()).toEqual({
      error: { code: 'missing_authorization', message: expect.stringContaining('Bearer') },
    });
    const wrong = await fetch(`${base}/echo/ab`, {
      method: 'POST',
      headers: { ...good, authorization: 'Bearer sk-other' },
      body: '{}',
    });
    expect(wrong.status).toBe(401);
    expect(((await wrong.json()) as { error: { code: string } }).error.code).toBe('invalid_secret_key');
  });

  it('lists every invalid field with its place', async () => {
    const response = await fetch(`${base}/echo/a?times=9&extra=1`, {
      method: 'POST',
      headers: { ...good, authorization: 'Bearer sk-fields' },
      body: JSON.stringify({ text: 3 }),
    });
    expect(response.status).toBe(400);
    const body = (await response.json()) as { error: { code: string; errors: { path: string }[] } };
    expect(body.error.code).toBe('invalid_request');
    expect(body.error.errors.map((error) => error.path).sort()).toEqual(
      ['body.text', 'path.name', 'query', 'query.times'].sort(),
    );
  });

  it('requires the connection headers on connection-scoped routes', async () => {
    const response = await fetch(`${base}/echo/ab`, {
      method: 'POST',
      headers: { authorization: 'Bearer sk-fields', 'content-type': 'application/json' },
      body: '{"text":"x"}',
    });
    expect(response.status).toBe(400);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('missing_connection_headers');
  });

  it('answers malformed JSON with 400 and an oversized body with 413, once the caller is known', async () => {
    // A body is read only after its key is checked: a stranger's is not parsed at all.
    const stranger = await fetch(`${base}/echo/ab`, {
      method: 'POST',
      headers: { ...good, authorization: 'Bearer sk-nobody' },
      body: '{"text":',
    });
    expect(stranger.status).toBe(401);
    const body = { ...good, authorization: 'Bearer sk-body' };
    const malformed = await fetch(`${base}/echo/ab`, { method: 'POST', headers: body, body: '{"text":' });
    expect(malformed.status).toBe(400);
    expect(((await malformed.json()) as { error: { code: string } }).error.code).toBe('invalid_json');
    const big = await fetch(`${base}/echo/ab`, {
      method: 'POST',
      headers: body,
      body: JSON.stringify({ text: 'x'.repeat(5000) }),
    });
    expect(big.status).toBe(413);
    expect(((await big.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
  });

  it('never shows a stack trace or internals: unexpected errors are a 500 with a request id to look up', async () => {
    const response = await fetch(`${base}/boom`);
    expect(response.status).toBe(500);
    const text = await response.text();
    expect(text).not.toContain('/srv/app.ts');
    expect(text).not.toContain('at ');
    expect(JSON.parse(text)).toEqual({
      error: { code: 'internal_error', message: expect.stringContaining('request id') },
    });
    const conflict = await fetch(`${base}/conflict`);
    expect(conflict.status).toBe(409);
    expect(await conflict.json()).toEqual({ error: { code: 'environment_exists', message: 'It is already there.' } });
  });

  it('answers an unknown route with 404 in the envelope', async () => {
    const response = await fetch(`${base}/nope`);
    expect(response.status).toBe(404);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe('route_not_found');
  });

  it('limits requests per key, with Retry-After', async () => {
    const statuses: number[] = [];
    let retryAfter: string | null = null;
    for (let i = 0; i < 60; i++) {
      const response = await fetch(`${base}/echo/ab`, {
        method: 'POST',
        headers: { ...good, 'x-request-id': `rl-${i}` },
        body: '{"text":"x"}',
      });
      statuses.push(response.status);
      if (response.status === 429) retryAfter = response.headers.get('retry-after');
    }
    expect(statuses).toContain(429);
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1);
  });

  it('documents the routes in OpenAPI 3.1 from the same schemas', () => {
    const document = buildOpenApiDocument({ title: 't', version: '1', description: 'd' }, routes);
    expect(document.openapi).toBe('3.1.0');
    const operation = document.paths['/echo/{name}']?.['post'] as {
      parameters: { name: string; in: string }[];
      requestBody: unknown;
      security: unknown[];
    };
    expect(operation.parameters.map((parameter) => `${parameter.in}:${parameter.name}`)).toEqual([
      'path:name',
      'query:times',
      'header:Connection-Id',
      'header:Provider-Config-Key',
    ]);
    expect(operation.requestBody).toBeDefined();
    expect(operation.security).toEqual([{ secretKey: [] }]);
  });
});

describe('API server: NUL characters', () => {
  it('refuses U+0000 in the path, the query and headers with 400, not a database error', async () => {
    for (const url of [`${base}/echo/a%00b`, `${base}/boom?x=%00`]) {
      const response = await fetch(url, { method: 'POST', headers: good, body: '{"text":"x"}' });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe('invalid_request');
    }
  });
});
