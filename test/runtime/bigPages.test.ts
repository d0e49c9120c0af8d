/**
 * Issue 17, "no stall": local activity results travel to Temporal in the completion of their workflow
 * task, which gRPC caps at 4 MiB. Inline results of ~90 KB used to pile up there until the completion
 * was refused forever. The run now ends a workflow task once its results pass 1 MiB (encoded, estimated), and results above
 * 64 KiB leave the history (claim check), so any page size completes. Payloads are encrypted as in
 * production: the run's estimate of a result's weight must hold for the codec that really runs.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Duration } from '@temporalio/common';
import { describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import type { RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

describe('big pages never stall a run', () => {
  it('50,000 records at pages of 1,000, pages of 100 KB, and 1 KB records at pages of 5,000, complete with exact counts', async () => {
    const h = await useRuntime({ encryptor: new Encryptor([randomBytes(32)]) });
    const api = await startFakeUpstream((request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const start = Number(url.searchParams.get('cursor') ?? '0');
      const limit = Number(url.searchParams.get('limit'));
      const total = Number(url.searchParams.get('total'));
      const pad = 'x'.repeat(Number(url.searchParams.get('pad') ?? '0'));
      const items = Array.from({ length: Math.min(limit, total - start) }, (_, i) => ({
        id: `r${start + i}`,
        title: `record ${start + i}`,
        n: start + i,
        ...(pad ? { pad } : {}),
      }));
      json(response, 200, { items, next: start + limit < total ? String(start + limit) : null });
    });
    h.connections.setBaseUrl(api.url);
    const sync = async (name: string, total: number, page: number, pad: number, taskTimeout?: Duration) => {
      const scriptHash = await h.scripts.put(
        bundle(`async function (svc) {
          for await (const items of svc.paginate({ endpoint: '/records', params: { total: ${total}, pad: ${pad} }, paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items', limit: ${page}, limitNameInRequest: 'limit' } })) {
            await svc.batchSave(items, 'Record');
          }
        }`),
      );
      const input: RunSyncInput = {
        definition: syncDefinition({ syncName: name, models: ['Record'], scriptHash }),
        connectionId: `big-${name}`,
        mode: 'incremental',
      };
      const started = Date.now();
      const result = await h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: h.taskQueue,
        workflowId: syncRunId({ ...input.definition, connectionId: input.connectionId }, randomUUID()),
        args: [input],
        workflowExecutionTimeout: '4 minutes',
        ...(taskTimeout ? { workflowTaskTimeout: taskTimeout } : {}),
      });
      console.log(`[big pages] ${name}: ${total} records at pages of ${page} in ${(Date.now() - started) / 1000} s`);
      return result;
    };
    const small = await sync('pages-of-1000', 50_000, 1000, 0);
    expect(small.models['Record']).toEqual({ added: 50_000, updated: 0, deleted: 0, unchanged: 0 });
    // Pages of ~100 KB: past the run's estimate of a claim (64 KiB of body), so they must leave the
    // history; inline, 40 of them would pass gRPC's 4 MiB in one task (a long task timeout lets the
    // task run that long before its heartbeat completes it).
    const middling = await sync('pages-of-100-kb', 60_000, 1000, 60, '60 seconds');
    expect(middling.models['Record']).toEqual({ added: 60_000, updated: 0, deleted: 0, unchanged: 0 });
    const large = await sync('kb-records', 20_000, 5000, 960);
    expect(large.models['Record']).toEqual({ added: 20_000, updated: 0, deleted: 0, unchanged: 0 });
    expect(large.recordCounts).toEqual({ Record: 20_000 });
  }, 300_000);
});
