/**
 * Runs recorded while a step's result weighed its declared content-length in the task cut
 * (workflows/svc.ts resultBytes) replay on the current code: gzip pages that declare a few KiB and hold
 * ~50 KiB each, 20 of them in one workflow task. The declared weight never reaches TASK_RESULT_BYTES
 * (1 MiB) there, the recorded bodies do after ~10 pages: a change that weighed these runs by their
 * recorded body would end the task where the recording did not, and fail the replay (TMPRL1100). Kept in
 * fixtures/compressedPageHistories, gzipped: a `runSync` of its own workflow, a sync entity execution of
 * version 5 (its run inline), and a `runAction` started with `ledgerCut` only (11 uncompressed pages
 * first, so that its task is cut once and its history holds the cut's patch marker; after them, 19 of the
 * gzip pages in one task). Not encrypted, and every payload below the claim check's threshold: a fresh
 * clone replays them without a key or stored blobs. With resultBytes forced to the recorded body for
 * every run, each of the three fails with TMPRL1100 (checked by hand).
 *
 * RECORD_COMPRESSED_PAGE_HISTORIES=1 records them again into the fixtures (done once, at c2746c5).
 */
import { randomUUID } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync, gzipSync } from 'node:zlib';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import type { RunActionInput, RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { rootActionId, syncRunId } from '../../src/temporal/runAuthority.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { useDatabase } from '../kit/db.js';
import { actionDefinition, settledSync, syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { startFakeUpstream } from '../kit/upstream.js';

const { temporal } = proto;

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'compressedPageHistories');
const RECORD = process.env['RECORD_COMPRESSED_PAGE_HISTORIES'] === '1';
const PAGES = 20;
// Uncompressed pages (their content-length true) an action fetches first: past 1 MiB, its task is cut
// there, by either weight, and its history has the task cut's patch marker. A run of its own workflow
// cuts only where that patch is marked (`patched()`): without the marker its replay never cuts at all.
const PLAIN_PAGES = 11;
const TASK_CUT_PATCH = 'step-ledger-task-end';
// workflows/svc.ts: TASK_RESULT_BYTES, CODEC_EXPANSION, DECLARED_CLAIM_BYTES, MARKER_BYTES.
const TASK_RESULT_BYTES = 1024 * 1024;
const weight = (body: number): number => (body * 2 > 128 * 1024 ? 400 : body * 2 + 400);

/** A page of ~50 KiB of JSON, compressible to a few KiB. */
function page(n: number): string {
  const items = Array.from({ length: 340 }, (_, i) => ({
    id: `p${n}-${i}`,
    title: `record ${i} of page ${n}`,
    tag: String(i % 97),
    text: 'a compressible description of the record, the same for every one of them',
  }));
  return JSON.stringify({ page: n, items });
}

const fetchPages = (end: string, before = '') =>
  bundle(`async function (svc) {
  const counts = [];${before}
  for (let i = 0; i < ${PAGES}; i++) {
    const answer = await svc.get({ endpoint: '/pages/' + i, decompress: true });
    counts.push({ id: 'page-' + answer.data.page, items: answer.data.items.length });
  }
  ${end}
}`);

type Recorded = { workflowId: string; history: History };

function readFixtures(): (Recorded & { file: string })[] {
  return readdirSync(FIXTURES)
    .filter((file) => file.endsWith('.json.gz'))
    .sort()
    .map((file) => {
      const saved = JSON.parse(gunzipSync(readFileSync(join(FIXTURES, file))).toString('utf8')) as {
        workflowId: string;
        history: string;
      };
      const history = temporal.api.history.v1.History.decode(Buffer.from(saved.history, 'base64'));
      return { file, workflowId: saved.workflowId, history };
    });
}

/** The first payload of a json/plain payload list, parsed. */
function plain(payloads: proto.temporal.api.common.v1.IPayloads | null | undefined): unknown {
  const payload = payloads?.payloads?.[0];
  expect(Buffer.from(payload?.metadata?.['encoding'] ?? []).toString()).toBe('json/plain');
  return JSON.parse(Buffer.from(payload!.data!).toString('utf8'));
}

/**
 * Per workflow task completion, the page answers its markers hold: what they weigh by their declared
 * content-length and by their recorded body.
 */
function pagesPerTask(history: History): { pages: number; declared: number; recorded: number }[] {
  const tasks = [{ pages: 0, declared: 0, recorded: 0 }];
  for (const event of history.events ?? []) {
    if (event.workflowTaskCompletedEventAttributes) tasks.push({ pages: 0, declared: 0, recorded: 0 });
    const result = event.markerRecordedEventAttributes?.details?.['result'];
    if (Buffer.from(result?.payloads?.[0]?.metadata?.['encoding'] ?? []).toString() !== 'json/plain') continue;
    // An answer as the httpRequest step records it (src/runtime/httpAnswer.ts): its body as a string.
    const answer = plain(result) as { body?: unknown; headers?: Record<string, string>; request?: { url?: string } };
    if (typeof answer?.body !== 'string' || !/\/pages\/\d+$/.test(answer.request?.url ?? '')) continue;
    const task = tasks.at(-1)!;
    task.pages++;
    task.declared += weight(Number(answer.headers?.['content-length']));
    task.recorded += weight(answer.body.length);
  }
  return tasks.filter((task) => task.pages > 0);
}

describe('runs recorded with the task cut by declared content-length', () => {
  // Registered only to record (on code that weighs the declared length, as c2746c5 did): recorded on
  // this code, the fixtures would no longer hold the old weight's cuts.
  if (RECORD)
    it('records a runSync, a version 5 sync entity and an action without taskCutByBody', async () => {
      const h = await useRuntime();
      const api = await startFakeUpstream((request, response) => {
        const path = new URL(request.url ?? '/', 'http://x').pathname;
        const plainPage = /\/plain\/(\d+)$/.exec(path)?.[1];
        if (plainPage !== undefined) {
          const body = page(Number(plainPage));
          const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)) };
          return void response.writeHead(200, headers).end(body);
        }
        const n = /\/pages\/(\d+)$/.exec(path)?.[1];
        if (n === undefined) return void response.writeHead(404).end();
        const gz = gzipSync(page(Number(n)));
        response
          .writeHead(200, {
            'content-type': 'application/json',
            'content-encoding': 'gzip',
            'content-length': String(gz.length),
          })
          .end(gz);
      });
      h.connections.setBaseUrl(api.url);
      const recorded: Recorded[] = [];
      // A long workflow task timeout: no heartbeat of the task ends it between the pages.
      const long = { workflowExecutionTimeout: '120 seconds', workflowTaskTimeout: '60 seconds' } as const;

      const sync: RunSyncInput = {
        definition: syncDefinition({
          syncName: 'pages',
          syncType: 'full',
          models: ['Page'],
          scriptHash: await h.scripts.put(fetchPages(`await svc.batchSave(counts, 'Page');`)),
        }),
        connectionId: 'compressed-sync',
        mode: 'incremental',
      };
      const syncId = syncRunId({ ...sync.definition, connectionId: sync.connectionId }, randomUUID());
      const result = await h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: h.taskQueue,
        workflowId: syncId,
        args: [sync],
        ...long,
      });
      expect(result.models['Page']?.added).toBe(PAGES);
      recorded.push({ workflowId: syncId, history: await h.client.workflow.getHandle(syncId).fetchHistory() });

      const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
      const definition = syncDefinition({
        syncName: 'entity-pages',
        syncType: 'full',
        models: ['Page'],
        scriptHash: await h.scripts.put(fetchPages(`await svc.batchSave(counts, 'Page');`)),
      });
      const ref = { ...definition, connectionId: 'compressed-entity' };
      const entityId = await control.ensureSync(definition, ref.connectionId);
      const status = await settledSync(control, ref, 1, 90_000);
      expect(status.latestError).toBeNull();
      const firstRunId = (await h.client.workflow.getHandle(entityId).describe()).raw.workflowExecutionInfo?.firstRunId;
      await control.stop(ref, 'recorded');
      recorded.push({
        workflowId: entityId,
        history: await h.client.workflow.getHandle(entityId, firstRunId ?? undefined).fetchHistory(),
      });

      const plainFirst = `
  for (let i = 0; i < ${PLAIN_PAGES}; i++) await svc.get({ endpoint: '/plain/' + i });`;
      const action = actionDefinition('pages', await h.scripts.put(fetchPages('return counts.length;', plainFirst)));
      const actionId = rootActionId({ ...action, connectionId: 'compressed-action' }, randomUUID());
      const input: RunActionInput = {
        definition: action,
        connectionId: 'compressed-action',
        input: {},
        ledgerCut: true,
      };
      expect(
        await h.client.workflow.execute('runAction', {
          taskQueue: actionTaskQueue(h.taskQueue),
          workflowId: actionId,
          args: [input],
          ...long,
        }),
      ).toBe(PAGES);
      recorded.push({ workflowId: actionId, history: await h.client.workflow.getHandle(actionId).fetchHistory() });

      rmSync(FIXTURES, { recursive: true, force: true });
      mkdirSync(FIXTURES, { recursive: true });
      recorded.forEach(({ workflowId, history }, index) => {
        const type = history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name ?? 'run';
        const encoded = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64');
        const name = `${String(index).padStart(2, '0')}-${type}.json.gz`;
        writeFileSync(join(FIXTURES, name), gzipSync(`${JSON.stringify({ workflowId, history: encoded }, null, 2)}\n`));
      });
    }, 300_000);

  it('replays them: all pages in one task by the declared weight, where the recorded bodies would have cut', async () => {
    const fixtures = readFixtures();
    expect(fixtures.map((f) => f.file)).toEqual([
      '00-runSync.json.gz',
      '01-manageSync.json.gz',
      '02-runAction.json.gz',
    ]);
    for (const { file, history } of fixtures) {
      const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
      const input = plain(started?.input) as { version?: number; ledgerCut?: boolean; taskCutByBody?: boolean };
      if (file.includes('manageSync')) expect(input.version, file).toBe(5);
      if (file.includes('runAction')) expect(input, file).toMatchObject({ ledgerCut: true });
      expect(input.taskCutByBody, file).toBeUndefined();
      const patches = (history.events ?? []).flatMap((event) => {
        const data = event.markerRecordedEventAttributes?.details?.['patch-data']?.payloads?.[0]?.data;
        return data ? [(JSON.parse(Buffer.from(data).toString('utf8')) as { id: string }).id] : [];
      });
      // The entity's run cuts by its version (no patch); the others where the patch is marked.
      if (!file.includes('manageSync')) expect(patches, file).toContain(TASK_CUT_PATCH);
      const tasks = pagesPerTask(history);
      expect(
        tasks.reduce((sum, task) => sum + task.pages, 0),
        file,
      ).toBe(PAGES);
      // The gzip pages in one completion (the action's first with the plain pages before its cut): the
      // declared weight stayed far below the cut, while the recorded bodies pass it (by them the task
      // would have ended after ~10 pages).
      const last = tasks.at(-1)!;
      expect(last.pages, file).toBeGreaterThanOrEqual(PAGES - 1);
      expect(last.declared, file).toBeLessThan(TASK_RESULT_BYTES / 4);
      expect(last.recorded, file).toBeGreaterThan(TASK_RESULT_BYTES * 1.5);
    }
    const db = await useDatabase();
    await expectReplays(db.pool, fixtures);
  }, 120_000);
});
