/**
 * The history budget (docs/architecture.md "History cost per operation"): events and bytes one `svc`
 * operation adds, as local and as normal activities, and a 5 MB response kept out of the history by
 * external storage in Postgres.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect } from 'vitest';
import { rootActionId, syncRunId } from '../../src/temporal/runAuthority.js';
import type { OperationMode, RunSyncInput } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { runtimeTestWith, type RuntimeHarness } from '../kit/index.js';
import { actionDefinition, executeSync, syncDefinition } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json } from '../kit/upstream.js';

const PAGES = 100;
const PER_PAGE = 100;
const BIG = 5 * 1024 * 1024;

const bigBody = JSON.stringify({ blob: 'x'.repeat(BIG) });

/** The runtime, its fake API answering pages of `PER_PAGE` rows, and one 5 MiB body at /big. */
const it = runtimeTestWith({
  upstream: (request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (url.pathname === '/big') {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(bigBody);
      return;
    }
    const page = Number(url.searchParams.get('page'));
    json(
      response,
      200,
      Array.from({ length: PER_PAGE }, (_, i) => ({ id: `${page}-${i}`, title: `record ${page}-${i}`, n: i })),
    );
  },
});

describe('history cost of svc operations', () => {
  const measure = async (h: RuntimeHarness, mode: OperationMode) => {
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {
        for (let page = 0; page < ${PAGES}; page++) {
          const res = await svc.get({ endpoint: '/rows', params: { page } });
          await svc.batchSave(res.data, 'Row');
        }
      }`),
    );
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: `rows-${mode}`, models: ['Row'], scriptHash }),
      connectionId: `h-${mode}`,
      mode: 'incremental',
      options: { operationMode: mode },
    };
    const started = Date.now();
    const { workflowId, result } = await executeSync(h, input);
    const ms = Date.now() - started;
    const description = await h.client.workflow.getHandle(workflowId).describe();
    const events = description.historyLength;
    const bytes = Number(description.raw.workflowExecutionInfo?.historySizeBytes ?? 0);
    const history = await h.client.workflow.getHandle(workflowId).fetchHistory();
    const byType: Record<string, number> = {};
    for (const event of history.events ?? [])
      byType[String(event.eventType)] = (byType[String(event.eventType)] ?? 0) + 1;
    const operations = result.operations;
    const line = {
      mode,
      operations,
      events,
      bytes,
      eventsPerOp: +(events / operations).toFixed(2),
      bytesPerOp: Math.round(bytes / operations),
      maxOpsByEvents: Math.floor(51_200 / (events / operations)),
      maxOpsByBytes: Math.floor((50 * 1024 * 1024) / (bytes / operations)),
      ms,
      byType,
    };
    console.log(`[history] ${JSON.stringify(line)}`);
    expect(result.models['Row']?.added).toBe(PAGES * PER_PAGE);
    return line;
  };

  it('local activities: about one event per operation; normal activities: about six', async ({ runtime: h }) => {
    const local = await measure(h, 'local');
    const normal = await measure(h, 'normal');
    expect(local.eventsPerOp).toBeLessThan(1.2);
    expect(normal.eventsPerOp).toBeGreaterThan(5);
    expect(local.events).toBeLessThan(normal.events / 4);
  });

  it('a run nearing the history limit stops itself with run_history_limit and a message saying what to do', async ({
    runtime: h,
  }) => {
    const scriptHash = await h.scripts.put(
      bundle(
        `async function (svc) { for (let page = 0; ; page++) await svc.get({ endpoint: '/rows', params: { page } }); }`,
      ),
    );
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: 'endless-pages', models: ['Row'], scriptHash }),
      connectionId: 'h-guard',
      mode: 'incremental',
      options: { operationMode: 'normal', historyEventBudget: 60 },
    };
    const failure = await h.client.workflow
      .execute('runSync', {
        taskQueue: h.taskQueue,
        workflowId: syncRunId({ ...input.definition, connectionId: input.connectionId }, randomUUID()),
        args: [input],
      })
      .catch((error: unknown) => (error as { cause?: unknown }).cause);
    expect(failure).toMatchObject({
      type: 'run_history_limit',
      message: expect.stringMatching(
        /near Temporal's limit of 51,200 events \/ 50 MiB\. Save records in larger batches/,
      ),
    });
  });

  it('a 5 MB response stays out of the history: Postgres keeps it, the history a claim', async ({ runtime: h }) => {
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const hash = await h.scripts.put(
      bundle(
        `async function (svc) { const res = await svc.get({ endpoint: '/big' }); return { length: res.data.blob.length }; }`,
      ),
    );
    const definition = actionDefinition('big', hash);
    const workflowId = rootActionId({ ...definition, connectionId: 'big' }, randomUUID());
    const outcome = await control.runAction({ definition, connectionId: 'big', input: {} }, { workflowId });
    expect(outcome).toEqual({ ok: true, output: { length: BIG } });
    const description = await h.client.workflow.getHandle(workflowId).describe();
    const bytes = Number(description.raw.workflowExecutionInfo?.historySizeBytes ?? 0);
    const blobs = await h.pool.query<{ size: number }>(
      'SELECT octet_length(data) AS size FROM payload_blobs ORDER BY 1 DESC LIMIT 1',
    );
    console.log(
      `[history] 5 MiB response: history ${bytes} bytes, largest payload in payload_blobs ${blobs.rows[0]?.size} bytes`,
    );
    expect(bytes).toBeLessThan(64 * 1024);
    expect(blobs.rows[0]?.size).toBeGreaterThan(BIG);
  });
});
