/**
 * The task cut (workflows/svc.ts TASK_RESULT_BYTES) ends a workflow task once the local-activity
 * results in it pass 1 MiB, so that the task's completion (all its markers, one gRPC message) stays
 * far below gRPC's 4 MiB. It weighed a response by its declared content-length, which a compressed
 * answer understates: pages of ~40 KiB (inline in their markers, below the claim check's 64 KiB) that
 * declare ~2 KiB of gzip piled up in one task past 4 MiB, and its completion failed on every retry
 * (a hostile review of d25c6b5). Here a sync run and an action fetch PAGES such pages one after the
 * other, in workflow tasks long enough (a 60 s task timeout: no task heartbeat completes them early)
 * to hold them all, and a sync entity of this version in its own (4 s) tasks: each fetches every page
 * once, ends right, no task's completion holds more than ~1.5 MiB of markers, and the histories replay.
 * The same for what a second review found the first fix left unweighed: failures carrying a 4xx's
 * body (60 KB of UTF-8 each) and answers with a 15 KB header. An action started without
 * `taskCutByBody` (older code) weighs as before and its history replays on this code too.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import proto from '@temporalio/proto';
import { beforeAll, describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import type { RunActionInput, RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import { rootActionId, syncRunId } from '../../src/temporal/runAuthority.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { actionDefinition, settledSync, syncDefinition, useRuntime, type RuntimeHarness } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { ENVIRONMENT, INTEGRATION } from '../kit/testConnections.js';
import { startFakeUpstream } from '../kit/upstream.js';

// 150 pages of ~40 KiB declaring ~2 KiB: the declared weight (~4.5 KiB each) reaches the cut's 1 MiB
// after ~230, so without the fix all of them (~6 MiB of markers) are one task's completion.
const PAGES = 150;
// An action started by older code: few enough pages (~2 MiB) that its one task completes.
const OLD_PAGES = 40;
const ITEMS = 280;
const MiB = 1024 * 1024;

/** Page `n`: ~40 KiB of JSON that gzip makes ~2 KiB of (a short random tag per item keeps some entropy). */
function page(n: number): string {
  const items = Array.from({ length: ITEMS }, (_, i) => ({
    id: `p${n}-${i}`,
    title: `record ${i} of page ${n}`,
    tag: randomBytes(2).toString('hex'),
    text: 'a compressible description of the record, the same for every one of them',
  }));
  return JSON.stringify({ page: n, items });
}

const FETCH = (pages: number) => `
  const counts = [];
  for (let i = 0; i < ${pages}; i++) {
    const answer = await svc.get({ endpoint: '/pages/' + i, decompress: true });
    counts.push({ id: 'page-' + answer.data.page, items: answer.data.items.length });
  }`;

/**
 * Per workflow task completion (by its event id), the bytes of the markers it recorded and of the child
 * workflows it started (their input travels in the same completion).
 */
function markerBytesPerTask(history: History): number[] {
  const perTask = new Map<string, number>();
  for (const event of history.events ?? []) {
    const command = event.markerRecordedEventAttributes ?? event.startChildWorkflowExecutionInitiatedEventAttributes;
    if (!command) continue;
    const task = String(command.workflowTaskCompletedEventId);
    const bytes = proto.temporal.api.history.v1.HistoryEvent.encode(event).finish().length;
    perTask.set(task, (perTask.get(task) ?? 0) + bytes);
  }
  return [...perTask.values()];
}

const mib = (bytes: number) => (bytes / MiB).toFixed(2);
// What the other answers weigh that a response's content-length never showed (the same review).
const EUROS = '€'.repeat(20_000);
const BIG_HEADER = 'h'.repeat(15_000);
const FAILURES = 150;
// Steps in flight at once: the gates keep a task's markers below 3 MiB (workflows/svc.ts GATE_BYTES).
const GATE_LIMIT = 3 * MiB;
const HEADERS = 300;

describe('compressed answers in one workflow task', () => {
  let h: RuntimeHarness;
  const fetched = new Map<string, number>();
  const others = new Map<string, number>();
  const fanned = new Map<string, number>();
  let declared = 0;
  let held = 0;

  async function historyOf(workflowId: string): Promise<History> {
    return h.client.workflow.getHandle(workflowId).fetchHistory();
  }

  async function expectBoundedAndReplaying(name: string, workflowId: string, limit = 1.5 * MiB): Promise<void> {
    const history = await historyOf(workflowId);
    const perTask = markerBytesPerTask(history);
    const largest = Math.max(...perTask);
    console.log(
      `[compressedPages] ${name}: ${perTask.length} tasks with markers, largest ${mib(largest)} MiB, total ${mib(perTask.reduce((a, b) => a + b, 0))} MiB`,
    );
    expect(largest).toBeLessThan(limit);
    await expectReplays(h.pool, [{ workflowId, history }], h.client.options.dataConverter);
  }

  function expectEachPageOnce(pages: number): void {
    expect([...fetched.keys()].length).toBe(pages);
    for (let i = 0; i < pages; i++) expect(fetched.get(String(i)), `page ${i}`).toBe(1);
    fetched.clear();
  }

  beforeAll(async () => {
    h = await useRuntime({ encryptor: new Encryptor([randomBytes(32)]) });
    const api = await startFakeUpstream((request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      const fan = /^\/fan\/([abc])\/(\d+)$/.exec(path);
      if (fan) {
        // Uneven latencies, so that results reach the live run in other groups than a replay's.
        const id = Number(fan[2]);
        const delay = fan[1] === 'a' ? (id * 37) % 200 : 50 + ((id * 53 + (fan[1] === 'b' ? 0 : 90)) % 300);
        fanned.set(path, (fanned.get(path) ?? 0) + 1);
        setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end(page(id)), delay);
        return;
      }
      const clocked = /^\/clock\/(\w+)\/(\d+)$/.exec(path);
      if (clocked) {
        // Answers 40 ms apart: a branch that reads the clock after its answer sees them apart, live.
        const delay = clocked[1] === 'a' ? 40 * Number(clocked[2]) : 0;
        setTimeout(() => response.writeHead(200, { 'content-type': 'application/json' }).end('{}'), delay);
        return;
      }
      const other = /^\/(missing|headers)\/(\d+)$/.exec(path);
      if (other) {
        others.set(path, (others.get(path) ?? 0) + 1);
        // A 4xx whose body (60 KB of UTF-8 in 20,000 characters) its failure's details carry.
        if (other[1] === 'missing') return void response.writeHead(404, { 'content-type': 'text/plain' }).end(EUROS);
        return void response.writeHead(200, { 'content-type': 'application/json', 'x-big': BIG_HEADER }).end('{}');
      }
      const n = /\/pages\/(\d+)$/.exec(path)?.[1];
      if (n === undefined) return void response.writeHead(404).end();
      fetched.set(n, (fetched.get(n) ?? 0) + 1);
      const body = page(Number(n));
      const gzipped = gzipSync(body);
      declared = gzipped.length;
      held = body.length;
      response
        .writeHead(200, {
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'content-length': String(gzipped.length),
        })
        .end(gzipped);
    });
    h.connections.setBaseUrl(api.url);
  }, 120_000);

  it('a sync run cuts its tasks by the bodies it recorded, fetches each page once and saves every page', async () => {
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {${FETCH(PAGES)}
        await svc.batchSave(counts, 'Page');
      }`),
    );
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: 'pages', syncType: 'full', models: ['Page'], scriptHash }),
      connectionId: 'compressed',
      mode: 'incremental',
    };
    const workflowId = syncRunId({ ...input.definition, connectionId: input.connectionId }, randomUUID());
    const started = Date.now();
    const result = await h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
      taskQueue: h.taskQueue,
      workflowId,
      args: [input],
      // Bounded: a completion past gRPC's 4 MiB fails on every retry, and the run would never end.
      workflowExecutionTimeout: '90 seconds',
      workflowTaskTimeout: '60 seconds',
    });
    console.log(
      `[compressedPages] sync: ${PAGES} pages declaring ${declared} B, holding ${held} B, in ${(Date.now() - started) / 1000} s`,
    );
    expect(held).toBeGreaterThan(35 * 1024);
    expect(declared).toBeLessThan(4 * 1024);
    expect(result.models['Page']).toEqual({ added: PAGES, updated: 0, deleted: 0, unchanged: 0 });
    const saved = await createPostgresRecordStore({ db: h.pool }).listRecords({
      environmentId: ENVIRONMENT,
      integrationId: INTEGRATION,
      connectionId: 'compressed',
      model: 'Page',
      limit: 1000,
    });
    expect(saved.records.map((record) => `${String(record['id'])}:${String(record['items'])}`).sort()).toEqual(
      Array.from({ length: PAGES }, (_, i) => `page-${i}:${ITEMS}`).sort(),
    );
    expectEachPageOnce(PAGES);
    await expectBoundedAndReplaying('sync', workflowId);
  }, 120_000);

  it('a sync entity (this version) cuts the same way in its own execution', async () => {
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {${FETCH(PAGES)}
        await svc.batchSave(counts, 'Page');
      }`),
    );
    const definition = syncDefinition({ syncName: 'entity-pages', syncType: 'full', models: ['Page'], scriptHash });
    const ref = { ...definition, connectionId: 'compressed-entity' };
    const workflowId = await control.ensureSync(definition, ref.connectionId);
    const status = await settledSync(control, ref, 1, 90_000);
    expect({ error: status.latestError, saved: status.latestResult?.models['Page'] }).toEqual({
      error: null,
      saved: { added: PAGES, updated: 0, deleted: 0, unchanged: 0 },
    });
    expectEachPageOnce(PAGES);
    // The run is in the entity's first execution, which continued as new once it ended.
    const first = await h.client.workflow.getHandle(workflowId).describe();
    const firstRunId = first.raw.workflowExecutionInfo?.firstRunId ?? undefined;
    expect(firstRunId).toBeTruthy();
    const history = await h.client.workflow.getHandle(workflowId, firstRunId).fetchHistory();
    const perTask = markerBytesPerTask(history);
    console.log(
      `[compressedPages] entity: ${perTask.length} tasks with markers, largest ${mib(Math.max(...perTask))} MiB`,
    );
    expect(Math.max(...perTask)).toBeLessThan(1.5 * MiB);
    await expectReplays(h.pool, [{ workflowId, history }], h.client.options.dataConverter);
    await control.stop(ref, 'test over');
  }, 120_000);

  /** Runs `script` as an action of the `compressed` connection; its id and output. */
  async function runScript(
    name: string,
    script: string,
    input: Partial<RunActionInput>,
  ): Promise<{ workflowId: string; output: unknown }> {
    const definition = actionDefinition(name, await h.scripts.put(bundle(script)));
    const workflowId = rootActionId({ ...definition, connectionId: 'compressed' }, randomUUID());
    const output = await h.client.workflow.execute<(i: RunActionInput) => Promise<unknown>>('runAction', {
      taskQueue: actionTaskQueue(h.taskQueue),
      workflowId,
      args: [{ definition, connectionId: 'compressed', input: {}, ...input }],
      workflowExecutionTimeout: '90 seconds',
      workflowTaskTimeout: '60 seconds',
    });
    return { workflowId, output };
  }

  async function action(pages: number, input: Partial<RunActionInput>): Promise<string> {
    const { workflowId, output } = await runScript(
      'pages',
      `async function (svc) {${FETCH(pages)}
      return counts;
    }`,
      input,
    );
    expect(output).toEqual(Array.from({ length: pages }, (_, i) => ({ id: `page-${i}`, items: ITEMS })));
    expectEachPageOnce(pages);
    return workflowId;
  }

  it('an action of this version weighs failures (a 4xx with its body) and large headers too', async () => {
    const { workflowId, output } = await runScript(
      'others',
      `async function (svc) {
        let failed = 0;
        for (let i = 0; i < ${FAILURES}; i++) {
          try { await svc.get({ endpoint: '/missing/' + i }); } catch (error) { failed++; }
        }
        let answered = 0;
        for (let i = 0; i < ${HEADERS}; i++) {
          const answer = await svc.get({ endpoint: '/headers/' + i });
          if (answer.headers['x-big'].length === ${BIG_HEADER.length}) answered++;
        }
        return { failed, answered };
      }`,
      { ledgerCut: true, taskCutByBody: true },
    );
    expect(output).toEqual({ failed: FAILURES, answered: HEADERS });
    expect(others.size).toBe(FAILURES + HEADERS);
    for (const [path, count] of others) expect(count, path).toBe(1);
    await expectBoundedAndReplaying('failures and headers', workflowId);
  }, 120_000);

  it('an action started with taskCutByBody cuts the same way; one started without it weighs as before and replays', async () => {
    await expectBoundedAndReplaying('action', await action(PAGES, { ledgerCut: true, taskCutByBody: true }));
    // As older code started it: the declared weight, so its ~2 MiB of markers are one task's, where
    // this code's cut would have ended a task every ~13 pages; it replays as recorded.
    const old = await action(OLD_PAGES, { ledgerCut: true });
    const history = await historyOf(old);
    const perTask = markerBytesPerTask(history);
    console.log(`[compressedPages] action without the flag: largest task ${mib(Math.max(...perTask))} MiB`);
    expect(Math.max(...perTask)).toBeGreaterThan(1.5 * MiB);
    await expectReplays(h.pool, [{ workflowId: old, history }], h.client.options.dataConverter);
  }, 120_000);

  // Steps in flight at once (SvcContext.cutAtGates): the weights a cut reads used to grow as results
  // arrived, which a replay groups otherwise than the live run, and nothing bounded what the steps in
  // flight at once added to one task.
  const GATES = { ledgerCut: true, taskCutByBody: true, cutAtGates: true, gatedChildrenAndClock: true } as const;

  it('an action fanning out (each answer asking two more at once) cuts where its replay does', async () => {
    const IDS = 30;
    const { workflowId, output } = await runScript(
      'fan',
      `async function (svc) {
        const ids = Array.from({ length: ${IDS} }, (_, i) => i);
        const items = await Promise.all(ids.map(async (id) => {
          const a = await svc.get({ endpoint: '/fan/a/' + id });
          const [b, c] = await Promise.all([svc.get({ endpoint: '/fan/b/' + id }), svc.get({ endpoint: '/fan/c/' + id })]);
          return a.data.items.length + b.data.items.length + c.data.items.length;
        }));
        return items.reduce((sum, n) => sum + n, 0);
      }`,
      GATES,
    );
    expect(output).toBe(IDS * 3 * ITEMS);
    expect(fanned.size).toBe(IDS * 3);
    for (const [path, count] of fanned) expect(count, path).toBe(1);
    // Before the gates: "TMPRL1100 Activity id of scheduled event does not match", 3 runs of 3.
    await expectBoundedAndReplaying('fan-out', workflowId, GATE_LIMIT);
  }, 120_000);

  it('an action asking for 150 pages at once keeps each task far below gRPC 4 MiB, and replays', async () => {
    const { workflowId, output } = await runScript(
      'wide',
      `async function (svc) {
        const ids = Array.from({ length: ${PAGES} }, (_, i) => i);
        const answers = await Promise.all(ids.map((i) => svc.get({ endpoint: '/pages/' + i, decompress: true })));
        return answers.map((answer) => answer.data.items.length);
      }`,
      GATES,
    );
    expect(output).toEqual(Array.from({ length: PAGES }, () => ITEMS));
    expectEachPageOnce(PAGES);
    // Before the gates: one completion of 6.59 MB, refused by gRPC on every retry until the run timed out.
    await expectBoundedAndReplaying('150 pages at once', workflowId, GATE_LIMIT);
  }, 120_000);

  it('a script that reads the clock between answers in flight at once takes the same path on replay', async () => {
    // Each branch asks for one more page when its answer came more than 200 ms after the start: the
    // branches of answers 240-440 ms live. A replay gets the answers the history holds together, and
    // the core's clock is then at the latest from the first; the script's clock stands still while steps
    // are in flight, at the time the first was asked, so no branch asks for one (the last to end
    // reads the clock with none in flight, the same both ways).
    const { workflowId, output } = await runScript(
      'clocked',
      `async function (svc) {
        const started = Date.now();
        const late = await Promise.all(Array.from({ length: 12 }, async (_, i) => {
          await svc.get({ endpoint: '/clock/a/' + i });
          if (Date.now() - started <= 200) return false;
          await svc.get({ endpoint: '/clock/late/' + i });
          return true;
        }));
        return late.filter(Boolean).length;
      }`,
      GATES,
    );
    expect(output).toBeLessThanOrEqual(1);
    await expectBoundedAndReplaying('the clock read between answers', workflowId, GATE_LIMIT);
  }, 120_000);

  it("a script's Intl.DateTimeFormat without a date formats the workflow's time, the same on replay", async () => {
    // A review: it formatted the process's real clock, so a branch on it took another path on replay.
    const { workflowId, output } = await runScript(
      'intl',
      `async function (svc) {
        const options = { timeZone: 'UTC', hour12: false, minute: '2-digit', second: '2-digit', fractionalSecondDigits: 3 };
        const same = [];
        for (let i = 0; i < 6; i++) {
          const format = new Intl.DateTimeFormat('en', options);
          const seconds = Number(format.formatToParts().find((part) => part.type === 'second').value);
          if (seconds % 2 === 1) await svc.get({ endpoint: '/clock/late/' + i });
          same.push(format.format() === format.format(new Date()));
          await svc.get({ endpoint: '/clock/a/17' });
        }
        // A second review: a script that replaced Function.prototype.call got the original getter and
        // formatToParts as its \`this\`, and with them the real clock. Whatever it catches now formats
        // the workflow's time, or nothing.
        const caught = [];
        const call = Function.prototype.call;
        Function.prototype.call = function (self, ...args) { caught.push(this); return Reflect.apply(this, self, args); };
        const format = new Intl.DateTimeFormat('en', options);
        format.format();
        format.formatToParts();
        Function.prototype.call = call;
        const expected = format.format(new Date());
        const leaks = caught.filter((fn) => {
          try {
            const out = Reflect.apply(fn, format, []);
            const text = typeof out === 'function' ? out() : Array.isArray(out) ? out.map((part) => part.value).join('') : out;
            return typeof text === 'string' && text !== expected;
          } catch {
            return false;
          }
        });
        return { same, leaks: leaks.length };
      }`,
      GATES,
    );
    expect(output).toEqual({ same: [true, true, true, true, true, true], leaks: 0 });
    await expectBoundedAndReplaying('Intl without a date', workflowId, GATE_LIMIT);
  }, 120_000);

  it('an action that sleeps between its pages is cut no more often than one that does not', async () => {
    const { workflowId, output } = await runScript(
      'sleepy',
      `async function (svc) {
        const counts = [];
        for (let i = 0; i < ${PAGES}; i++) {
          const answer = await svc.get({ endpoint: '/pages/' + i, decompress: true });
          counts.push(answer.data.items.length);
          if (i % 10 === 9) await new Promise((resolve) => setTimeout(resolve, 10));
        }
        return counts;
      }`,
      GATES,
    );
    expect(output).toEqual(Array.from({ length: PAGES }, () => ITEMS));
    expectEachPageOnce(PAGES);
    // The weights start again after each timer (version 8): each task holds ~400 KB of markers, so the one
    // cut left is the step ledger's (150 answers pass its 8 MiB). Version 7 weighed on across the timers'
    // tasks: 6 cuts for the same action.
    const history = await historyOf(workflowId);
    const cutsMade = (history.events ?? []).filter(
      (event) => event.activityTaskScheduledEventAttributes?.activityType?.name === 'forgetSteps',
    ).length;
    console.log(`[compressedPages] sleepy: ${cutsMade} cuts`);
    expect(cutsMade).toBeLessThanOrEqual(1);
    await expectBoundedAndReplaying('pages with sleeps', workflowId, GATE_LIMIT);
  }, 120_000);

  it('an action starting 100 child actions at once, each with 60 KB of input, keeps each task below 3 MiB', async () => {
    const CHILDREN = 100;
    h.actions.set(
      'child',
      actionDefinition(
        'child',
        await h.scripts.put(bundle(`async function (svc, input) { return input.pad.length; }`)),
      ),
    );
    const { workflowId, output } = await runScript(
      'parent',
      `async function (svc) {
        const ids = Array.from({ length: ${CHILDREN} }, (_, i) => i);
        const lengths = await Promise.all(ids.map((i) => svc.triggerAction('child', { i, pad: String(i).padEnd(60000, '.') })));
        return lengths.reduce((sum, n) => sum + n, 0);
      }`,
      GATES,
    );
    expect(output).toBe(CHILDREN * 60_000);
    // Version 7 (cutAtGates alone) did not weigh the starts: ~6 MB of child inputs in one completion,
    // which gRPC refuses on every retry.
    await expectBoundedAndReplaying('100 child actions at once', workflowId, GATE_LIMIT);
  }, 180_000);
});
