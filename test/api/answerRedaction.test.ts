/**
 * Hostile review of issue 31's JSON hole fix (failed answers redacted as text, redactJsonText): an
 * upstream echoes the connection's API key back in a failed answer in the spellings JSON (and a
 * careless API) allows. Wherever the failure shows (the error the script catches, the action's output
 * and error, the run history's payloads), the key must not be readable: not as is, and not in a `\u`
 * or `\/` spelling a reader decodes at a glance.
 */
import { describe, expect, it } from 'vitest';
import { deployWithConnection, startApiHarness } from '../kit/api.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { bundle } from '../kit/scripts.js';

// A key with a '/' (JSON may write it `\/`) and characters percent-encoding changes.
const KEY = 'k3y/with+odd=chars&more-8c1f';

/** Every character of `text` as a `\u` escape, in upper or lower case hex. */
const escapeAll = (text: string, upper = false) =>
  [...text]
    .map((char) => {
      const hex = char.charCodeAt(0).toString(16).padStart(4, '0');
      return `\\u${upper ? hex.toUpperCase() : hex}`;
    })
    .join('');
/** The first character escaped, the '/' written `\/`, the rest as is. */
const MIXED = `\\u${KEY.charCodeAt(0).toString(16).padStart(4, '0')}${KEY.slice(1).replace('/', '\\/')}`;

/** Failed answers (401), each spelling the key in its own way. */
const BODIES: Record<string, string> = {
  plain: JSON.stringify({ error: `invalid key ${KEY}` }),
  slash: JSON.stringify({ error: `invalid key ${KEY}` }).replace('/', '\\/'),
  escaped: `{"error":"invalid key ${escapeAll(KEY)}"}`,
  upper: `{"error":"invalid key ${escapeAll(KEY, true)}"}`,
  mixed: `{"error":"invalid key ${MIXED}"}`,
  inKey: `{"${escapeAll(KEY)}":"invalid"}`,
  // The same echo in a body that is not JSON because of one bad escape later on (or cut mid-escape).
  badEscapeLater: `{"error":"invalid key ${MIXED}","hint":"C:\\q"}`,
  cutMidEscape: `{"error":"invalid key ${MIXED}","more":"\\u00`,
  // An escape outside any string: a careless API's text error with a JSON content type.
  outsideString: `error: invalid key ${MIXED}`,
  // Control characters: the answer crosses as base64 (src/runtime/http.ts `carried`), redacted before.
  controls: `\u0001${JSON.stringify({ error: `invalid key ${KEY}` })}\u0002 ${MIXED}`,
};

const CATCHER = bundle(`async function (svc, input) {
  const out = {};
  for (const name of input.names) {
    try {
      await svc.get({ endpoint: '/echo/' + name, retries: 0 });
      out[name] = 'no error';
    } catch (e) {
      out[name] = { status: e.response && e.response.status, data: e.response && e.response.data };
    }
  }
  return out;
}`);

const THROWER = bundle(`async function (svc, input) {
  await svc.get({ endpoint: '/echo/' + input.name, retries: 0 });
  return {};
}`);

const YAML = `
integrations:
  ${INTEGRATION}:
    actions:
      catcher:
        description: Catches failed answers
        output: Thing
        endpoint: POST /catcher
      thrower:
        description: Lets a failed answer fail the run
        output: Thing
        endpoint: POST /thrower
models:
  Thing:
    id: string
`;

/** `text` with the escapes a reader decodes at a glance (`\u0061`, `\/`, at any depth of escaping) decoded. */
function decoded(text: string): string {
  let current = text;
  for (let round = 0; round < 4; round++) {
    const next = current
      .replace(/\\+u([0-9a-fA-F]{4})/g, (_match, hex: string) => String.fromCharCode(parseInt(hex, 16)))
      .replace(/\\+\//g, '/');
    if (next === current) break;
    current = next;
  }
  return current;
}

describe('a connection key echoed in a failed answer, in JSON spellings', () => {
  it('is not readable in what the script catches, the action output or error, nor the run history', async () => {
    const h = await startApiHarness();
    const headers = await deployWithConnection(h, KEY, 'c1', {
      yaml: YAML,
      scripts: [
        { kind: 'action', name: 'catcher', code: CATCHER },
        { kind: 'action', name: 'thrower', code: THROWER },
      ],
    });
    h.fake.setHandler((request, response) => {
      const name = (request.url ?? '').split('/').pop() ?? '';
      response.writeHead(401, { 'content-type': 'application/json', 'x-echo': KEY });
      response.end(BODIES[name] ?? '{}');
    });
    const names = Object.keys(BODIES);
    const caught = await h.api.raw('POST', '/action/trigger', {
      headers,
      body: { action_name: 'catcher', input: { names } },
    });
    expect(caught.status).toBe(200);
    const outputs = caught.json as Record<string, unknown>;
    const leaks: string[] = [];
    for (const name of names) {
      const text = JSON.stringify(outputs[name]);
      expect(text, name).toContain('401');
      if (decoded(text).includes(KEY)) leaks.push(`caught ${name}: ${text}`);
    }
    for (const name of names) {
      const thrown = await h.api.raw('POST', '/action/trigger', {
        headers,
        body: { action_name: 'thrower', input: { name } },
      });
      expect(thrown.status, name).toBeGreaterThanOrEqual(400);
      const text = JSON.stringify(thrown.json);
      if (decoded(text).includes(KEY)) leaks.push(`thrown ${name}: ${text}`);
    }
    // The run histories, as Temporal holds them (payloads decoded by the service's codec are what
    // GET /runs/:id/history shows; here, the stored step ledger rows and run rows as well).
    const ledger = await h.pool.query<{ text: string }>(
      `SELECT row_to_json(t)::text AS text FROM (SELECT * FROM script_steps) t`,
    );
    for (const row of ledger.rows) if (decoded(row.text).includes(KEY)) leaks.push(`ledger: ${row.text.slice(0, 300)}`);
    console.log(`[answerRedaction] leaks:\n${leaks.join('\n')}`);
    expect(leaks).toEqual([]);
  }, 600_000);
});
