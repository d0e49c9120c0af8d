/**
 * Misbehaving scripts beside healthy ones: exceptions, an endless loop, unbounded memory, and attempts
 * to reach `process`, `require`, the file system or the network without `svc`. Each fails its own
 * sync with a clear, coded error while 20 healthy syncs on the same (supervised, restarted) worker
 * process run to completion. test/runtime/runaway.test.ts covers each runaway case alone; this is the
 * crowd.
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { stack } from '../kit/stack.js';
import { syncDefinition, useRuntime } from '../kit/runtime.js';
import { recordFigures, size } from './lib/figures.js';
import { superviseWorkers } from '../kit/ownStack.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const HEALTHY = 20;
const PAGES = size(5, 20);
const PER_PAGE = 20;

const healthy = bundle(`async function sync(svc) {
  for await (const page of svc.paginate({ endpoint: '/items', retries: 3, paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items' } })) {
    await svc.batchSave(page, 'Item');
  }
}`);

/** Each misbehaving script, and what its run's error must say. */
const MISBEHAVING: { name: string; body: string; code: RegExp; message: RegExp }[] = [
  {
    name: 'throws',
    body: `await svc.getMetadata(); throw new RangeError('bad range');`,
    code: /^script_error$/,
    message: /RangeError: bad range/,
  },
  {
    // Loop protection stops it after 1 s; on a thread starved of CPU time its look at the clock sees
    // pauses it takes for waiting, and the isolate timeout stops it instead (seen at load 9).
    name: 'loops',
    body: `await svc.getMetadata(); for (;;) {}`,
    code: /^script_timeout$/,
    message: /ran for more than 1 s without awaiting a svc operation|in one statement/,
  },
  {
    // One statement that never ends (catastrophic backtracking): no loop to protect. The isolate
    // timeout interrupts it, and the watchdog finds that in the run's history (script_timeout); when
    // the interruption aborted the worker before the failure was recorded, the worker processes
    // blame the run that was executing (script_runaway).
    name: 'backtracks',
    body: `await svc.getMetadata(); return /^(a+)+$/.test('a'.repeat(40) + '!');`,
    code: /^script_(timeout|runaway)$/,
    message: /in one statement|a statement that never ends/,
  },
  {
    // Its worker dies twice (script_out_of_memory), unless one of its statements (filling 10^7 slots
    // while the heap nears its limit: garbage collection after garbage collection) outlasts the
    // isolate timeout first, as it did at load 9: then it is a statement past its budget.
    name: 'hogs-memory',
    body: `const a = []; for (;;) { a.push(new Array(1e7).fill(a.length)); await svc.getMetadata(); }`,
    code: /^script_(out_of_memory|timeout)$/,
    message: /exhausting its memory|in one statement/,
  },
  {
    name: 'host-escape',
    body: `URL.constructor('return process')().exit(1);`,
    code: /^script_error$/,
    message: /Code generation from strings disallowed/,
  },
  { name: 'reads-process', body: `return process.env;`, code: /^script_error$/, message: /process|undefined/ },
  {
    name: 'global-process',
    body: `globalThis.process.exit(1);`,
    code: /^script_error$/,
    message: /undefined|process/,
  },
  {
    name: 'function-escape',
    body: `const p = (function () {}).constructor('return process')(); p.mainModule.require('fs').writeFileSync('/tmp/escaped', 'x');`,
    code: /^script_error$/,
    message: /Code generation from strings disallowed/,
  },
  {
    name: 'requires-fs',
    body: `const fs = require('fs'); fs.readFileSync('/etc/passwd');`,
    code: /^(invalid_script|script_error)$/,
    message: /requires "fs": scripts cannot import modules/,
  },
  {
    name: 'imports-fs',
    body: `const fs = await import('node:fs'); fs.readFileSync('/etc/passwd');`,
    code: /^(invalid_script|script_error)$/,
    message: /./,
  },
  {
    name: 'fetches',
    body: `await fetch(API + '/escape');`,
    code: /^script_error$/,
    message: /fetch/,
  },
  {
    name: 'opens-socket',
    body: `const http = require('http'); http.get(API + '/escape');`,
    code: /^(invalid_script|script_error)$/,
    message: /requires "http"/,
  },
];

const ONLY_EXCLUDE = (process.env['CHAOS_EXCLUDE'] ?? '').split(',');
MISBEHAVING.splice(0, MISBEHAVING.length, ...MISBEHAVING.filter((m) => !ONLY_EXCLUDE.includes(m.name)));
describe('misbehaving scripts among healthy syncs', () => {
  it(`${MISBEHAVING.length} misbehaving syncs fail alone, ${HEALTHY} healthy ones complete`, async () => {
    const h = await useRuntime({ worker: false });
    const escapes: string[] = [];
    const api = await startFakeUpstream(async (request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      if (url.pathname === '/escape') {
        escapes.push(request.url ?? '');
        return json(response, 200, {});
      }
      const start = Number(url.searchParams.get('cursor') ?? '0');
      await new Promise((resolve) => setTimeout(resolve, 100));
      const total = PAGES * PER_PAGE;
      const items = Array.from({ length: Math.min(PER_PAGE, total - start) }, (_, i) => ({ id: `i${start + i}` }));
      json(response, 200, { items, next: start + PER_PAGE < total ? String(start + PER_PAGE) : null });
    });
    const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
    const workers = superviseWorkers(
      { databaseUrl: h.dbUrl, temporalAddress, namespace: temporalNamespace, workflowBundlePath },
      {
        taskQueue: h.taskQueue,
        apiBaseUrl: api.url,
        nodeOptions: '--max-old-space-size=512',
        env: { WORKER_REUSE_V8: process.env['WORKER_REUSE_V8'] ?? '1' },
      },
    );
    const started = Date.now();
    try {
      await workers.ready();
      const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
      const healthyHash = await h.scripts.put(healthy);
      const refs: { name: string; ref: Parameters<typeof control.status>[0]; bad?: (typeof MISBEHAVING)[number] }[] =
        [];
      for (const bad of MISBEHAVING) {
        const hash = await h.scripts.put(
          bundle(`async function sync(svc) { const API = ${JSON.stringify(api.url)}; ${bad.body} }`),
        );
        const definition = syncDefinition({ syncName: bad.name, scriptHash: hash, models: ['Item'] });
        await control.ensureSync(definition, 'c');
        refs.push({ name: bad.name, ref: { ...definition, connectionId: 'c' }, bad });
      }
      for (let i = 0; i < HEALTHY; i++) {
        const definition = syncDefinition({ syncName: `healthy-${i}`, scriptHash: healthyHash, models: ['Item'] });
        await control.ensureSync(definition, 'c');
        refs.push({ name: definition.syncName, ref: { ...definition, connectionId: 'c' } });
      }
      const outcomes = await Promise.all(
        refs.map(async ({ name, ref, bad }) => {
          const status = await eventually<SyncStatus>(
            async () => {
              const current = await control.status(ref);
              return current.latestError || current.latestResult ? current : undefined;
            },
            // The healthy syncs share the misbehaving ones' environment, which the runaways make hot:
            // they run on its penalty thread, one workflow task at a time (141-273 s at load 9).
            420_000,
            `sync ${name} to finish`,
          );
          return { name, bad, status, seconds: (Date.now() - started) / 1000 };
        }),
      );
      const failedAlone = outcomes
        .filter((o) => o.bad)
        .map((o) => `${o.name}: ${o.status.latestError?.code} ${o.status.latestError?.message}`);
      const healthyDone = outcomes.filter(
        (o) => !o.bad && o.status.status !== 'failed' && o.status.recordCount['Item'] === PAGES * PER_PAGE,
      );
      recordFigures('scripts', {
        misbehaving: MISBEHAVING.length,
        healthy: HEALTHY,
        healthyCompleted: healthyDone.length,
        workerDeaths: workers.deaths.length,
        slowestHealthyS: Math.round(Math.max(...outcomes.filter((o) => !o.bad).map((o) => o.seconds))),
        networkEscapes: escapes.length,
      });
      for (const line of failedAlone) process.stdout.write(`[chaos:scripts] ${line}\n`);
      for (const { name, bad, status } of outcomes) {
        if (bad) {
          expect(status.status, name).toBe('failed');
          expect(status.latestError?.code, `${name}: ${status.latestError?.message}`).toMatch(bad.code);
          expect(status.latestError?.message, name).toMatch(bad.message);
        } else {
          expect(status.latestError, name).toBeNull();
          expect(status.recordCount, name).toEqual({ Item: PAGES * PER_PAGE });
        }
      }
      expect(escapes).toEqual([]);
      for (const { ref } of refs) await control.stop(ref, 'test over').catch(() => undefined);
    } finally {
      await workers.stop();
    }
  }, 540_000);
});
