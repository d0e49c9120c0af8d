/**
 * A script's request while Postgres is down. The request step reads the connection's credentials from
 * Postgres before the request goes out (as the service's worker does for every request), and a script
 * that asks for no `retries` has one attempt: a clean-clone CI run once failed `http_error` when a
 * request's step met a Postgres restart (faults.test.ts). The script's retries count the external API's
 * failures, not ours: the step waits for Postgres (src/runtime/ownServices.ts, up to 25 s) and the request
 * goes out once. It owns its stack.
 */
import { describe, expect, it } from 'vitest';
import { RUN_WORKFLOW_TASK_TIMEOUT_MS, type RunSyncInput, type SyncRunResult } from '../../src/runtime/definitions.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { recordFigures } from './lib/figures.js';
import { runResult, fakeApiWorkers, useOwnStack } from '../kit/ownStack.js';
import { recordsSync } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { ENVIRONMENT } from '../kit/testConnections.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const CONNECTION = 'outage';
const TASK_QUEUE = 'chaos-outage';

// Two requests in a row, then the save: the second request's step meets Postgres down.
const twoRequests = bundle(`async function (svc) {
  const first = await svc.get({ endpoint: '/first' });
  const second = await svc.get({ endpoint: '/second' });
  await svc.batchSave([{ id: 'a', title: first.data.title }, { id: 'b', title: second.data.title }], 'Record');
}`);

describe('a request step while Postgres is down', () => {
  const ownStack = useOwnStack();

  it('waits for Postgres and sends the request once, although the script asked for no retries', async () => {
    const own = ownStack();
    const hits = { first: 0, second: 0 };
    let outage: Promise<{ killMs: number; recoverMs: number }> | undefined;
    const api = await startFakeUpstream(async (request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      if (path === '/first') {
        hits.first++;
        if (hits.first === 1) {
          // Postgres goes away before the first answer, and comes back a moment after it.
          const killMs = await own.killPostgres();
          outage = new Promise((resolve) => setTimeout(resolve, 1_500)).then(async () => ({
            killMs,
            recoverMs: await own.recoverPostgres(),
          }));
        }
        return json(response, 200, { title: 'one' });
      }
      if (path === '/second') {
        hits.second++;
        return json(response, 200, { title: 'two' });
      }
      json(response, 404, { error: 'not_found' });
    });
    const workers = await fakeApiWorkers(own, api.url, {
      taskQueue: TASK_QUEUE,
      environmentName: 'outage',
      connectionId: CONNECTION,
      apiKey: 'outage-key',
    });
    try {
      const scriptHash = await createPostgresScriptStore({ db: own.pool }).put(twoRequests, ENVIRONMENT);
      const input: RunSyncInput = {
        definition: recordsSync({ scriptHash }),
        connectionId: CONNECTION,
        mode: 'incremental',
      };
      const workflowId = syncRunId({ ...input.definition, connectionId: CONNECTION }, 'chaos-outage');
      const started = Date.now();
      await own.client.workflow.start<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: TASK_QUEUE,
        workflowId,
        args: [input],
        workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
      });
      const result = await runResult<SyncRunResult>(own.client, workflowId);
      const timing = await outage;
      const stored = await own.pool.query<{ id: string; title: string }>(
        "SELECT id, data->>'title' AS title FROM records WHERE sync_name = 'records' ORDER BY id",
      );
      recordFigures('request-during-outage', {
        postmasterGoneMs: timing?.killMs ?? -1,
        recoveryMs: timing?.recoverMs ?? -1,
        runS: Math.round((Date.now() - started) / 100) / 10,
        workerDeaths: workers.deaths.length,
        hits: JSON.stringify(hits),
      });
      expect(timing).toBeDefined();
      expect(result.models['Record']).toMatchObject({ added: 2 });
      expect(stored.rows).toEqual([
        { id: 'a', title: 'one' },
        { id: 'b', title: 'two' },
      ]);
      expect(hits).toEqual({ first: 1, second: 1 });
      expect(workers.deaths).toEqual([]);
    } finally {
      await workers.stop();
    }
  }, 600_000);
});
