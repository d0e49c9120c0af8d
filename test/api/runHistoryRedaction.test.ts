/**
 * GET /runs/:run_id/history never answers a connection's credentials, also once the connection is gone
 * (issue 29, finding 7). An action reads its connection (`svc.getConnection()`: the recorded result
 * holds the key). While the connection exists the API redacts the key; after DELETE /connections/:id
 * the history showed it once in clear (nothing left to redact with). Counted here in every payload,
 * decoded, and in the whole answer: after the delete, after a new connection of the same id, and after
 * the same connection's key is replaced.
 */
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, type ApiHarness } from '../kit/index.js';
import { deployScripts } from '../kit/api.js';
import { INTEGRATION } from '../kit/fixtures.js';
import { collectPayloadTexts } from '../helpers/historyPayloads.js';
import { bundle } from '../kit/scripts.js';

const READER = bundle(`async function (svc) {
  const connection = await svc.getConnection();
  await svc.log('read the connection of ' + connection.connection_id);
  return { id: connection.connection_id };
}`);

const YAML = `
integrations:
  ${INTEGRATION}:
    actions:
      reader:
        description: Reads its connection
        output: Thing
        endpoint: POST /reader
models:
  Thing:
    id: string
`;

/** The API with the reader action deployed. */
const it = kit.extend<{ api: ApiHarness }>({
  api: [
    async ({ db, upstream }, use) =>
      withApiHarness({ database: db, upstream }, use, (h) =>
        deployScripts(h, { yaml: YAML, scripts: [{ kind: 'action', name: 'reader', code: READER }] }),
      ),
    { scope: 'file' },
  ],
});

const ref = (connectionId: string) => ({ connectionId, providerConfigKey: INTEGRATION });

async function importKey(h: ApiHarness, connectionId: string, apiKey: string): Promise<void> {
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: connectionId,
    credentials: { type: 'API_KEY', apiKey },
  });
}

/** Runs the reader on the connection; its run id, from its log line. */
async function readerRun(h: ApiHarness, connectionId: string): Promise<string> {
  expect(await h.api.actions.trigger(ref(connectionId), { action_name: 'reader', input: {} })).toEqual({
    ok: true,
    output: { id: connectionId },
  });
  const { logs } = await h.api.logs.search({ sync: 'reader', connection_id: connectionId });
  const runId = logs[0]?.run_id ?? '';
  expect(runId).toMatch(/^action:/);
  return runId;
}

/** How often `secret` appears in the history the API answers: in its decoded payloads and in the whole text. */
async function occurrences(
  h: ApiHarness,
  runId: string,
  secret: string,
): Promise<{ payloads: number; answer: number; withheld: boolean }> {
  const run = await h.api.runs.history(runId);
  const count = (text: string) => text.split(secret).length - 1;
  return {
    payloads: collectPayloadTexts(run.history).reduce((sum, text) => sum + count(text), 0),
    answer: count(JSON.stringify(run)),
    withheld: run.payloads_withheld,
  };
}

describe('run history of a connection that is gone', () => {
  it('shows the key 0 times after DELETE /connections/:id, and after a new connection of that id', async ({
    api: h,
  }) => {
    const key = 'key-of-the-deleted-connection-5b0e7f';
    await importKey(h, 'gone', key);
    const runId = await readerRun(h, 'gone');
    const before = await occurrences(h, runId, key);
    expect({ payloads: before.payloads, answer: before.answer }).toEqual({ payloads: 0, answer: 0 });
    // The connection id, beside the redacted key: the history is there and decoded.
    expect(JSON.stringify(collectPayloadTexts((await h.api.runs.history(runId)).history))).toContain('[redacted]');

    await h.api.connections.delete(ref('gone'));
    const after = await occurrences(h, runId, key);
    expect({ payloads: after.payloads, answer: after.answer }).toEqual({ payloads: 0, answer: 0 });

    // Another connection under the same id holds another key: it redacts nothing of the first one's.
    await importKey(h, 'gone', 'key-of-the-next-connection-7a2c91');
    const recreated = await occurrences(h, runId, key);
    expect({ payloads: recreated.payloads, answer: recreated.answer }).toEqual({ payloads: 0, answer: 0 });
    // How: the values are withheld once the connection is gone; the answer says so.
    expect([before.withheld, after.withheld, recreated.withheld]).toEqual([false, true, true]);
  }, 120_000);

  it('shows a replaced key 0 times: the values the run read are redacted with the current ones', async ({ api: h }) => {
    const oldKey = 'key-before-the-replacement-3d9a44';
    await importKey(h, 'replaced', oldKey);
    const runId = await readerRun(h, 'replaced');
    await importKey(h, 'replaced', 'key-after-the-replacement-6e1b08');
    const after = await occurrences(h, runId, oldKey);
    expect({ payloads: after.payloads, answer: after.answer }).toEqual({ payloads: 0, answer: 0 });
    expect(after.withheld).toBe(false);
  }, 120_000);
});
