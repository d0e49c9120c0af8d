import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { syncWorkflowId } from '../../src/temporal/connection.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, syncDefinition, useRuntime } from '../kit/runtime.js';
import { superviseWorkers } from '../kit/processWorker.js';
import { bundle } from '../kit/scripts.js';

describe('runaway scripts fail their own run with a clear error', () => {
  it('a script that throws fails its run as script_error', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const thrower = await h.scripts.put(bundle(`async function () { throw new RangeError('bad range'); }`));
    await expect(
      control.runAction({ definition: actionDefinition('thrower', thrower), connectionId: 'c', input: {} }),
    ).rejects.toMatchObject({ code: 'script_error', message: 'script thrower failed: RangeError: bad range' });
  });

  // An endless loop is stopped inside its run by loop protection (workflows/scriptBudget.ts): no
  // worker dies. Memory exhaustion does take the worker process down; workers run under a supervisor
  // that restarts them, and the watchdog stops the run that was executing when they died.
  it('a sync script that never yields fails with script_timeout, no worker dies, and the sync reports it as failed', async () => {
    const h = await useRuntime({ worker: false });
    const supervisor = superviseWorkers(h);
    try {
      const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
      const spin = await h.scripts.put(bundle(`async function (svc) { await svc.getMetadata(); for (;;) {} }`));
      const definition = syncDefinition({ syncName: 'spinner', scriptHash: spin });
      const ref = { ...definition, connectionId: 'c' };
      await control.ensureSync(definition, 'c');
      const status = await eventually<SyncStatus>(
        async () => {
          const current = await control.status(ref).catch(() => undefined);
          return current?.latestError ? current : undefined;
        },
        60_000,
        'the runaway sync to fail',
      );
      console.log(
        `[runaway] endless loop: worker deaths ${JSON.stringify(supervisor.deaths)}, error ${JSON.stringify(status.latestError)}`,
      );
      expect(status.status).toBe('failed');
      expect(status.latestError?.code).toBe('script_timeout');
      expect(status.latestError?.message).toMatch(/ran for more than 1 s without awaiting a svc operation/);
      expect(supervisor.deaths).toEqual([]);
      expect(syncWorkflowId(ref)).toBe('sync:test:fake-api:c:spinner');
      await control.stop(ref, 'test over');
      const ok = await h.scripts.put(bundle(`async function (svc, input) { await svc.getMetadata(); return input; }`));
      await expect(
        control.runAction({ definition: actionDefinition('ok', ok), connectionId: 'c', input: { n: 1 } }),
      ).resolves.toEqual({ ok: true, output: { n: 1 } });
    } finally {
      await supervisor.stop();
    }
  }, 200_000);

  // One statement that never ends has no loop to protect: the isolate timeout interrupts it and its
  // workflow task fails again at every attempt. The run runs inside its sync entity (issue 31), so the
  // worker's run watch (src/temporal/runWatch.ts) finds that in the entity's history and sends the
  // entity its verdict, which stops the run there: the entity, and its schedule, go on.
  it('a sync script stuck in one statement is stopped with script_timeout by its worker, and its sync goes on', async () => {
    const h = await useRuntime({ worker: false });
    const supervisor = superviseWorkers(h);
    try {
      const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
      const backtracks = await h.scripts.put(
        bundle(`async function (svc) { await svc.getMetadata(); return /^(a+)+$/.test('a'.repeat(40) + '!'); }`),
      );
      const definition = syncDefinition({ syncName: 'backtracker', scriptHash: backtracks, runsMs: 3600_000 });
      const ref = { ...definition, connectionId: 'c' };
      await control.ensureSync(definition, 'c');
      const status = await eventually<SyncStatus>(
        async () => {
          const current = await control.status(ref).catch(() => undefined);
          return current?.latestError && current.status !== 'running' ? current : undefined;
        },
        150_000,
        'the stuck sync to fail',
      );
      console.log(
        `[runaway] one endless statement: worker deaths ${JSON.stringify(supervisor.deaths)}, error ${JSON.stringify(status.latestError)}`,
      );
      expect(status.latestError?.code).toMatch(/^script_(timeout|runaway)$/);
      expect(status.latestError?.message).toMatch(/in one statement|a statement that never ends/);
      // The entity goes on: idle (failed), its next run scheduled an interval after this one.
      expect(status.status).toBe('failed');
      expect(Date.parse(status.nextScheduledSyncAt ?? '')).toBeGreaterThan(Date.now() + 3000_000);
      // The run history has it once the entity's next execution recorded it (the stopped one ended at once).
      const recorded = await eventually(
        async () => {
          const { rows } = await h.pool.query<{ error_code: string }>(
            'SELECT error_code FROM sync_runs WHERE connection_id = $1 AND sync_name = $2',
            ['c', 'backtracker'],
          );
          return rows.length > 0 ? rows.map((row) => row.error_code) : undefined;
        },
        60_000,
        'the stopped run in the run history',
      );
      expect(recorded).toEqual([status.latestError?.code]);
      await control.stop(ref, 'test over');
    } finally {
      await supervisor.stop();
    }
  }, 200_000);

  it('a script that exhausts memory: the worker process dies (V8 heap limit), and after two deaths while it was executing the run is stopped', async () => {
    const h = await useRuntime({ worker: false });
    const supervisor = superviseWorkers(h, '--max-old-space-size=512');
    try {
      const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
      const hog = await h.scripts.put(
        bundle(
          `async function (svc) { const a = []; for (;;) { a.push(new Array(1e7).fill(a.length)); await svc.getMetadata(); } }`,
        ),
      );
      const outcome = await control
        .runAction({ definition: actionDefinition('hog', hog), connectionId: 'c', input: {} }, { timeoutMs: 170_000 })
        .catch((error: unknown) => error);
      console.log(`[runaway] memory: worker deaths ${JSON.stringify(supervisor.deaths)}`);
      expect(outcome).toMatchObject({
        code: 'script_out_of_memory',
        message: expect.stringMatching(/exhausting its memory/),
      });
      expect(supervisor.deaths.length).toBeGreaterThanOrEqual(2);
      expect(supervisor.deaths.every((death) => death.code === 134 || death.signal === 'SIGABRT')).toBe(true);
      const ok = await h.scripts.put(bundle(`async function (svc, input) { return input; }`));
      await expect(
        control.runAction({ definition: actionDefinition('ok', ok), connectionId: 'c', input: 7 }),
      ).resolves.toEqual({ ok: true, output: 7 });
    } finally {
      await supervisor.stop();
    }
  }, 200_000);
});
