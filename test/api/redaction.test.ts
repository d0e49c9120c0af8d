/**
 * A script that puts its connection's credential into its own failure (`throw new Error(token)`): the
 * API shows the failure everywhere with the credential redacted, in every form it may take (as is,
 * percent-encoded, base64): the action's error, /sync/status, /sync/runs, the run history table and
 * the outbound webhook that tells the application about the failed run. A script that logs its
 * credential (`svc.log(token)`) has the line stored and shown by `GET /logs` redacted the same way.
 */
import { describe, expect, it } from 'vitest';
import { INTEGRATION } from '../kit/fixtures.js';
import { deployWithConnection, startApiHarness } from '../kit/api.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';

// A key with characters that percent-encoding changes, so each form is tried.
const KEY = 'k3y/with+odd=chars&more-8c1f';

const BASE64 = Buffer.from(KEY).toString('base64');

// The sandbox has no Buffer or btoa: the base64 form comes in as text, as a script might have built it.
const LEAKY = bundle(`async function (svc) {
  const key = (await svc.getConnection()).credentials.apiKey;
  throw new Error('as is: ' + key + ' encoded: ' + encodeURIComponent(key) + ' base64: ${BASE64}');
}`);

// A script that logs its key in each form, and one line with no secret, which must arrive as logged.
const CHATTY = bundle(`async function (svc) {
  const key = (await svc.getConnection()).credentials.apiKey;
  await svc.log('as is: ' + key + ' encoded: ' + encodeURIComponent(key) + ' base64: ${BASE64}');
  await svc.log('key ' + key, { level: 'error' });
  await svc.log('nothing secret here');
  // Across the 64 KiB cut of a line, through svc.log and through console.log.
  await svc.log('long ' + 'x'.repeat(65536 - 10) + key);
  console.log('console ' + 'y'.repeat(65536 - 12) + key);
  return { logged: true };
}`);

const YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      leaky:
        description: Fails with its key in the message
        output: Thing
        endpoint: GET /things
        sync_type: full
        runs: 1h
        auto_start: false
    actions:
      leak:
        description: Fails with its key in the message
        output: Thing
        endpoint: POST /leak
      chatty:
        description: Logs its key
        output: Thing
        endpoint: POST /chatty
models:
  Thing:
    id: string
`;

/** The API over the real stack, the scripts above deployed, and connection c1 holding KEY. */
async function deployed() {
  const h = await startApiHarness();
  const headers = await deployWithConnection(h, KEY, 'c1', {
    yaml: YAML,
    scripts: [
      { kind: 'sync', name: 'leaky', code: LEAKY },
      { kind: 'action', name: 'leak', code: LEAKY },
      { kind: 'action', name: 'chatty', code: CHATTY },
    ],
  });
  return { h, headers };
}

describe('credentials in a script’s own failure', () => {
  it('are redacted from the action error, the sync status, the run history and the webhook', async () => {
    const { h, headers } = await deployed();
    const action = await h.api.raw('POST', '/action/trigger', { headers, body: { action_name: 'leak' } });
    const actionText = JSON.stringify(action.json);
    expect(action.status).toBeGreaterThanOrEqual(400);
    expect(actionText).toContain('as is: [redacted] encoded: [redacted] base64: [redacted]');

    // The failed run is also told to the application by an outbound webhook.
    h.fake.setHandler((_req, res) => {
      res.writeHead(204).end();
    });
    await h.api.webhooks.setSettings({ url: `${h.fake.url}/hooks` });
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'c1', syncs: ['leaky'] });
    const status = await eventually(
      async () => {
        const answer = await h.api.raw('GET', `/sync/status?provider_config_key=${INTEGRATION}&syncs=leaky`);
        const text = JSON.stringify(answer.json);
        return text.includes('"latestError":{') ? text : undefined;
      },
      60_000,
      'the failed run',
    );
    const runs = JSON.stringify((await h.api.raw('GET', `/sync/runs?provider_config_key=${INTEGRATION}`)).json);
    const stored = JSON.stringify((await h.pool.query('SELECT error_message FROM sync_runs')).rows);
    const webhook = await eventually(
      async () => {
        const sent = h.fake.requests.filter((request) => request.url === '/hooks');
        return sent.length > 0 ? sent.map((request) => request.body).join() : undefined;
      },
      60_000,
      'the webhook of the failed run',
    );
    const deliveries = JSON.stringify(await h.api.webhooks.deliveries());
    for (const [where, text] of [
      ['action error', actionText],
      ['status', status],
      ['runs', runs],
      ['sync_runs', stored],
      ['webhook body', webhook],
      ['webhook deliveries', deliveries],
    ] as const) {
      expect(text, where).toContain('[redacted]');
      for (const form of [KEY, encodeURIComponent(KEY), BASE64.replace(/=+$/, '')]) {
        expect(text, `${where}: ${form}`).not.toContain(form);
      }
    }
  });

  it('are redacted from the svc.log lines a script wrote, as GET /logs shows and searches them', async () => {
    const { h, headers } = await deployed();
    const action = await h.api.raw('POST', '/action/trigger', { headers, body: { action_name: 'chatty' } });
    expect(action.status).toBe(200);

    const lines = await eventually(
      async () => {
        const { logs } = await h.api.logs.search({ sync: 'chatty' });
        return logs.length === 5 ? logs : undefined;
      },
      60_000,
      'the five log lines',
    );
    // The long lines are cut at 64 KiB after redaction: no beginning of the key is left at the cut.
    const long = lines.filter((line) => /^(long|console) /.test(line.message));
    expect(long).toHaveLength(2);
    for (const line of long) {
      expect(line.message.length).toBeLessThanOrEqual(65536);
      expect(line.message).not.toContain(KEY.slice(0, 4));
    }
    expect(
      lines
        .filter((line) => !long.includes(line))
        .map((line) => line.message)
        .sort(),
    ).toEqual([
      // base64's padding is not part of the secret's form (src/runtime/redaction.ts).
      'as is: [redacted] encoded: [redacted] base64: [redacted]==',
      'key [redacted]',
      'nothing secret here',
    ]);
    // Searching for the key finds nothing: it is not stored at all (checked in the table as well).
    expect((await h.api.logs.search({ text: KEY })).logs).toEqual([]);
    const stored = JSON.stringify((await h.pool.query('SELECT message FROM script_logs')).rows);
    for (const text of [JSON.stringify(lines), stored]) {
      for (const form of [KEY, encodeURIComponent(KEY), BASE64.replace(/=+$/, '')]) {
        expect(text).not.toContain(form);
      }
    }
  });
});
