/**
 * Flaky external APIs: 30 % of requests fail at random with a 500, a 429 with Retry-After, or a reset
 * connection. With `retries` set, a paginated sync gets every record; with retries 0 the script sees
 * the error (and a sync that does not catch it fails its run with it).
 */
import { describe, expect, it } from 'vitest';
import { WorkflowFailedError } from '@temporalio/client';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { RUN_WORKFLOW_TASK_TIMEOUT_MS, type RunSyncInput, type SyncRunResult } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, syncDefinition, useRuntime } from '../kit/runtime.js';
import { recordFigures, size } from './lib/figures.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const TOTAL = size(2_000, 20_000);
const PAGE = 50;
const FAILURE_RATE = 0.3;

describe('flaky external API (30 % of requests fail)', () => {
  it('with retries every record arrives; with retries 0 the script sees the error', async () => {
    const h = await useRuntime();
    const failures = { 500: 0, 429: 0, reset: 0, ok: 0 };
    const api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const roll = Math.random();
      if (roll < FAILURE_RATE) {
        const kind = Math.floor((roll / FAILURE_RATE) * 3);
        if (kind === 0) {
          failures[500]++;
          return json(response, 500, { error: 'internal' });
        }
        if (kind === 1) {
          failures[429]++;
          return json(response, 429, { error: 'slow down' }, { 'retry-after': '1' });
        }
        failures.reset++;
        request.socket.destroy();
        return;
      }
      failures.ok++;
      const start = Number(url.searchParams.get('offset') ?? '0');
      const items = Array.from({ length: Math.max(0, Math.min(PAGE, TOTAL - start)) }, (_, i) => ({
        id: `f${start + i}`,
        n: start + i,
      }));
      json(response, 200, { items, next: start + PAGE < TOTAL ? String(start + PAGE) : null });
    });
    h.connections.setBaseUrl(api.url);

    const syncScript = (retries: number) =>
      bundle(`async function sync(svc) {
        for await (const page of svc.paginate({ endpoint: '/items', retries: ${retries}, paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'offset', responsePath: 'items' } })) {
          await svc.batchSave(page, 'Item');
        }
      }`);
    const run = async (name: string, retries: number) => {
      const input: RunSyncInput = {
        definition: syncDefinition({
          syncName: name,
          syncType: 'full',
          models: ['Item'],
          scriptHash: await h.scripts.put(syncScript(retries)),
        }),
        connectionId: 'flaky',
        mode: 'incremental',
        options: { retryInitialIntervalMs: 50 },
      };
      return h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: h.taskQueue,
        workflowId: syncRunId({ ...input.definition, connectionId: input.connectionId }, `flaky-${name}`),
        args: [input],
        workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
      });
    };

    const started = Date.now();
    const result = await run('retried', 12);
    const seconds = (Date.now() - started) / 1000;
    expect(result.models['Item']).toEqual({ added: TOTAL, updated: 0, deleted: 0, unchanged: 0 });
    const stored = await h.pool.query<{ n: string; ids: string }>(
      "SELECT count(*) AS n, count(DISTINCT id) AS ids FROM records WHERE sync_name = 'retried'",
    );
    expect(stored.rows[0]).toEqual({ n: String(TOTAL), ids: String(TOTAL) });
    const failed = failures[500] + failures[429] + failures.reset;
    recordFigures('flaky', {
      records: TOTAL,
      requests: failed + failures.ok,
      failed500: failures[500],
      failed429: failures[429],
      resets: failures.reset,
      failedShare: Math.round((failed / (failed + failures.ok)) * 100) / 100,
      syncS: Math.round(seconds * 10) / 10,
    });
    expect(failed).toBeGreaterThan(0);

    // Retries 0: a sync that does not catch the error fails its run with it (or, rarely, every page
    // came through; then the next sync is tried, up to a bound that makes a pass by luck impossible).
    let syncError: unknown;
    for (let attempt = 0; attempt < 5 && syncError === undefined; attempt++) {
      syncError = await run(`unretried-${attempt}`, 0).then(
        () => undefined,
        (error: unknown) => error,
      );
    }
    expect(syncError).toBeInstanceOf(WorkflowFailedError);
    const cause = (syncError as WorkflowFailedError).cause as { type?: string; message: string } | undefined;
    expect(cause?.message).toMatch(/500|429|ECONNRESET|socket hang up/);

    // Retries 0 in an action that catches: the script itself sees the error, code and status.
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const seen = new Set<string>();
    const probe = await h.scripts.put(
      bundle(`async function (svc) {
        const out = [];
        for (let i = 0; i < 30; i++) {
          try { await svc.get({ endpoint: '/items', params: { offset: 0 } }); out.push('ok'); }
          catch (e) { out.push(e.code + ':' + (e.response ? e.response.status : e.errno)); }
        }
        return out;
      }`),
    );
    const outcome = await control.runAction({
      definition: actionDefinition('probe', probe),
      connectionId: 'c',
      input: {},
    });
    expect(outcome.ok).toBe(true);
    for (const entry of (outcome as { output: string[] }).output) seen.add(entry);
    recordFigures('flaky-unretried', { outcomesSeenByScript: [...seen].sort().join(' ') });
    expect(
      [...seen].some((entry) => /^http_status_error:(500|429)$/.test(entry) || /^http_network_error:/.test(entry)),
    ).toBe(true);
  }, 300_000);
});
