import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import axios from 'axios';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerData, answerText, isHttpAnswer, recordedBodyLength, responseOf, utf8OfBase64 } from './httpAnswer.js';
import { BASE64_UTF8, type HttpAnswer } from './svcTypes.js';
import { redactJsonText, redactValue, WITHHELD_BODY } from './redaction.js';

// Bodies whose JSON reading differs at the edges: what axios (the client the request activity used to
// parse with) gave for each is what the script must still see.
const BODIES: Record<string, { type: string; body: string | Buffer }> = {
  object: { type: 'application/json', body: '{"items":[{"id":1}],"next":null}' },
  array: { type: 'application/json', body: '[{},{},{}]' },
  invalid: { type: 'application/json', body: '{"items": [1, 2' },
  html: { type: 'text/html', body: '<html>oops</html>' },
  empty: { type: 'application/json', body: '' },
  whitespace: { type: 'application/json', body: '  \n ' },
  padded: { type: 'application/json', body: ' {"a":1}\n' },
  bom: { type: 'application/json', body: Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"a":"é"}')]) },
  string: { type: 'application/json', body: '"text"' },
  number: { type: 'text/plain', body: '42' },
  literalNull: { type: 'application/json', body: 'null' },
  literalFalse: { type: 'application/json', body: 'false' },
  deep: { type: 'application/json', body: `${'['.repeat(100_000)}${']'.repeat(100_000)}` },
  // Raw control characters (JSON allows none outside whitespace): the text, carried as base64 (src/runtime/http.ts).
  controls: { type: 'application/json', body: '\u0001\u0002{"a":1}\u001f' },
};

function depth(value: unknown): number {
  let levels = 0;
  for (let node = value; Array.isArray(node); node = (node as unknown[])[0]) levels++;
  return levels;
}

let server: Server;
let base = '';

beforeAll(async () => {
  server = createServer((request, response) => {
    const fixture = BODIES[(request.url ?? '/').slice(1)];
    if (!fixture) return void response.writeHead(404).end();
    response.writeHead(200, { 'content-type': fixture.type });
    response.end(fixture.body);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe('answerData', () => {
  for (const name of Object.keys(BODIES)) {
    it(`gives what axios gave for a JSON request: ${name}`, async () => {
      const parsed = await axios.get<unknown>(`${base}/${name}`, { responseType: 'json' });
      const text = await axios.get<string>(`${base}/${name}`, { responseType: 'text' });
      expect(typeof text.data).toBe('string');
      const data = answerData(text.data, true);
      // A structure 10^5 deep is compared by its depth: a recursive comparison runs out of stack.
      // The same text carried as the base64 of its UTF-8 bytes (an answer JSON would escape heavily).
      const body = Buffer.from(text.data, 'utf8').toString('base64');
      const request = { method: 'GET', url: base };
      const answer: HttpAnswer = { status: 200, headers: {}, request, body, json: true, encoding: BASE64_UTF8 };
      const carried = responseOf(answer).data;
      if (name === 'deep') expect([depth(data), depth(carried)]).toEqual([depth(parsed.data), depth(parsed.data)]);
      else expect([data, carried]).toEqual([parsed.data, parsed.data]);
    });
  }

  it('leaves the text of a text, stream or binary answer as it is', () => {
    expect(answerData('{"a":1}', false)).toBe('{"a":1}');
    expect(answerData('', false)).toBe('');
  });
});

describe('responseOf', () => {
  const request = { method: 'GET', url: 'https://api.example.com/items' };

  it('parses the text form and passes the older parsed form through', () => {
    const answer = { status: 200, headers: { 'content-type': 'application/json' }, request, body: '[1,2]', json: true };
    expect(isHttpAnswer(answer)).toBe(true);
    expect(responseOf(answer)).toEqual({ status: 200, headers: answer.headers, request, data: [1, 2] });
    const older = { status: 200, headers: {}, request, data: { body: 'a field named body' } };
    expect(isHttpAnswer(older)).toBe(false);
    expect(responseOf(older)).toBe(older);
    // A body that is a string in the older form is still its data.
    expect(responseOf({ status: 200, headers: {}, request, data: 'x' })).toEqual({
      status: 200,
      headers: {},
      request,
      data: 'x',
    });
  });

  it('decodes a body carried as the base64 of its UTF-8 bytes, as Buffer wrote it', () => {
    const texts = ['', 'a', 'ab', 'abc', '\u0001'.repeat(7), '[{"a":"é\u0000"},"\ufeff😀"]', '\ufeffkept BOM'];
    for (const text of texts) {
      const body = Buffer.from(text, 'utf8').toString('base64');
      expect(utf8OfBase64(body)).toBe(text);
      const answer: HttpAnswer = { status: 200, headers: {}, request, body, json: true, encoding: BASE64_UTF8 };
      expect(answerText(answer)).toBe(text);
      expect(responseOf(answer).data).toEqual(answerData(text, true));
    }
    expect(() => utf8OfBase64('ab$d')).toThrow(TypeError);
    expect(() => utf8OfBase64('abcde')).toThrow(TypeError);
  });

  it('weighs a body by its text, or by the JSON of older data', () => {
    expect(recordedBodyLength({ status: 200, headers: {}, request, body: 'abcd', json: true })).toBe(4);
    expect(recordedBodyLength({ status: 200, headers: {}, request, data: { a: 1 } })).toBe(7);
  });
});

describe('redactJsonText', () => {
  const secret = 'sk-live-4f2a/9b"x';
  const secrets = [secret];

  it('redacts an answer carried as base64 as its text, and shows it as text', () => {
    const request = { method: 'GET', url: 'https://api.example.com/me' };
    const text = `\u0001{"echo":"${secret.replace('"', '\\"')}","raw":"${secret}"}`;
    const body = Buffer.from(text, 'utf8').toString('base64');
    const carried: HttpAnswer = { status: 200, headers: {}, request, body, json: true, encoding: BASE64_UTF8 };
    const shown = redactValue({ result: carried }, secrets);
    expect(shown.result.encoding).toBeUndefined();
    expect(shown.result.body).toBe(redactValue(text, secrets));
    expect(shown.result.body).not.toContain(secret);
    expect(JSON.stringify(shown)).not.toContain(Buffer.from(secret).toString('base64').slice(0, 8));
  });

  it('redacts what redactValue redacts once the text is parsed, as written or as JSON writes it', () => {
    const bodies = [
      JSON.stringify({ error: `bad token ${secret}` }),
      // `/` written as `\/` (PHP's json_encode does so by default), in a value and in a key.
      `{"error":"bad token sk-live-4f2a\\/9b\\"x","other":"a \\"quoted\\" word"}`,
      `{"sk-live-4f2a\\/9b\\"x":1,"list":["x","sk-live-4f2a/9b\\"x"]}`,
    ];
    for (const body of bodies) {
      const redacted = redactJsonText(body, secrets);
      expect(JSON.parse(redacted)).toEqual(redactValue(JSON.parse(body), secrets));
      expect(JSON.stringify(JSON.parse(redacted))).not.toContain('sk-live');
    }
  });

  it('withholds a body that spells a credential in \\u escapes', () => {
    for (const body of [
      `{"error":"bad token \\u0073k-live-4f2a/9b\\"x"}`,
      `["\\u0073\\u006b-live-4f2a\\/9b\\u0022x"]`,
      `{"\\u0073k-live-4f2a/9b\\"x":true}`,
      // Not JSON, so the script sees the text, escapes and all: one bad escape later, a body cut
      // mid-escape, an escape outside any string (test/api/answerRedaction.test.ts, through the stack).
      `{"error":"bad token \\u0073k-live-4f2a/9b\\"x","hint":"C:\\q"}`,
      `{"error":"bad token \\u0073k-live-4f2a/9b\\"x","more":"\\u00`,
      `error: bad token \\u0073k-live-4f2a\\/9b"x`,
    ]) {
      expect(redactJsonText(body, secrets)).toBe(WITHHELD_BODY);
    }
  });

  it('leaves escapes that spell no credential, and a text that is not JSON redacted by value', () => {
    expect(redactJsonText('{"a":"b\\"c","d":"\\u0041\\\\"}', secrets)).toBe('{"a":"b\\"c","d":"\\u0041\\\\"}');
    expect(redactJsonText(`<p>token ${secret}</p>`, secrets)).toBe('<p>token [redacted]</p>');
    expect(redactJsonText('{"a":"x"}\n{"b":"\\u0073k-live-4f2a/9b\\"x"}', secrets)).toBe(WITHHELD_BODY);
    expect(redactJsonText(`x ${secret}`, [])).toBe(`x ${secret}`);
  });
});
