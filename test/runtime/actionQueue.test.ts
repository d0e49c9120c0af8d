/**
 * Actions have a task queue of their own (docs/reliability.md, finding 4): a backlog of sync runs on
 * the main queue does not delay an action, and child actions of a sync run go to the action queue too.
 */
import { describe, expect } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { runExecution } from '../../src/temporal/decodedHistory.js';
import { rootActionId } from '../../src/temporal/runAuthority.js';
import { createSyncControl, type SyncControl, type SyncRef } from '../../src/temporal/syncControl.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { eventually } from '../helpers/eventually.js';
import { runtimeTestWith, type RuntimeHarness } from '../kit/index.js';
import { actionDefinition, syncDefinition } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json } from '../kit/upstream.js';

const SYNCS = 4;
// The blocked request is answered after this at the latest, so that a run on the old single queue
// (where the action waits for the backlog) fails the time bound below instead of hanging.
const BACKLOG_HOLD_MS = 20_000;
const ACTION_BOUND_MS = 10_000;

/** The sync's status once a run of it has finished. */
const finishedRun = (control: SyncControl, ref: SyncRef, what: string): Promise<SyncStatus> =>
  eventually(
    async () => {
      const status = await control.status(ref);
      return status.finishedAt !== null ? status : undefined;
    },
    30_000,
    what,
  );

/** The task queue of each child workflow the run started, from its history. */
async function childTaskQueues(h: RuntimeHarness, runId: string): Promise<string[]> {
  const history = await (await runExecution(h.client, runId)).handle.fetchHistory();
  return (history.events ?? [])
    .map((event) => event.startChildWorkflowExecutionInitiatedEventAttributes?.taskQueue?.name)
    .filter((name): name is string => typeof name === 'string');
}

let release: () => void = () => undefined;
const held = new Promise<void>((resolve) => (release = resolve));

/** The sync control of the runtime's task queue. */
const controlOf = (h: RuntimeHarness): SyncControl => createSyncControl({ client: h.client, taskQueue: h.taskQueue });

// One step (local activity, the default operation mode) at a time per worker: one blocked sync run
// holds the main queue's worker, every other run waits behind it. The action worker is a Worker of
// its own, with a slot of its own. The fake API holds each request to /slow until `release`.
const it = runtimeTestWith({
  tuning: { maxConcurrentLocalActivityExecutions: 1 },
  upstream: async (request, response) => {
    if (request.url?.startsWith('/slow')) await held;
    json(response, 200, { items: [{ id: 'i1' }] });
  },
});

describe('the action task queue', () => {
  it('an action completes in seconds while sync runs wait in a backlog on the main queue', async ({
    runtime: h,
    upstream: api,
  }) => {
    const control = controlOf(h);
    const timer = setTimeout(release, BACKLOG_HOLD_MS);
    try {
      const syncHash = await h.scripts.put(
        bundle(`async function (svc) {
          const res = await svc.get({ endpoint: '/slow' });
          await svc.batchSave(res.data.items, 'Item');
        }`),
      );
      const definition = syncDefinition({ syncName: 'slow', models: ['Item'], runsMs: 3600_000, scriptHash: syncHash });
      const refs: SyncRef[] = Array.from({ length: SYNCS }, (_, i) => ({ ...definition, connectionId: `c${i}` }));
      for (const ref of refs) await control.ensureSync(definition, ref.connectionId);
      // The first run's request is held by the API: the main worker's only step slot is taken.
      await eventually(
        () => Promise.resolve(api.hits.some((hit) => hit.startsWith('GET /slow')) ? true : undefined),
        30_000,
        'the first blocked request',
      );

      const echo = await h.scripts.put(bundle(`async function (svc, input) { return { echoed: input.n }; }`));
      const started = Date.now();
      const outcome = await control.runAction({
        definition: actionDefinition('echo', echo),
        connectionId: 'c0',
        input: { n: 7 },
      });
      const elapsed = Date.now() - started;
      expect(outcome).toEqual({ ok: true, output: { echoed: 7 } });
      expect(elapsed, `the action took ${elapsed} ms behind the sync backlog`).toBeLessThan(ACTION_BOUND_MS);

      // The backlog was real and is still there: no sync run has finished, and the runs that reached
      // the API at all are those holding the main worker (1, or 2 if a held request was retried).
      const statuses: SyncStatus[] = await Promise.all(refs.map((ref) => control.status(ref)));
      expect(statuses.map((status) => status.finishedAt)).toEqual(refs.map(() => null));
      expect(api.hits.filter((hit) => hit.startsWith('GET /slow')).length).toBeLessThan(SYNCS);

      // Once the API answers, the backlog drains: every sync completes its run.
      release();
      for (const ref of refs) {
        await finishedRun(control, ref, `the run of ${ref.connectionId}`);
      }
      const finished = await Promise.all(refs.map((ref) => control.status(ref)));
      expect(finished.map((status) => [status.latestError, status.recordCount])).toEqual(
        refs.map(() => [null, { Item: 1 }]),
      );
    } finally {
      clearTimeout(timer);
      release();
    }
  }, 60_000);

  it('child actions of a sync run, and of an action, run on the action queue', async ({ runtime: h }) => {
    const control = controlOf(h);
    const queue = actionTaskQueue(h.taskQueue);
    h.actions.set(
      'inner',
      actionDefinition(
        'inner',
        await h.scripts.put(bundle(`async function (svc, input) { return { n: input.n + 1 }; }`)),
      ),
    );
    const outerHash = await h.scripts.put(
      bundle(`async function (svc, input) { return svc.triggerAction('inner', { n: input.n }); }`),
    );
    const outerDefinition = actionDefinition('outer', outerHash);
    const workflowId = rootActionId({ ...outerDefinition, connectionId: 'c9' }, `${Date.now()}`);
    const outcome = await control.runAction(
      { definition: outerDefinition, connectionId: 'c9', input: { n: 1 } },
      { workflowId },
    );
    expect(outcome).toEqual({ ok: true, output: { n: 2 } });
    const outer = await h.client.workflow.getHandle(workflowId).describe();
    expect(outer.taskQueue).toBe(queue);
    expect(await childTaskQueues(h, workflowId)).toEqual([queue]);

    const syncHash = await h.scripts.put(
      bundle(`async function (svc) {
        const out = await svc.triggerAction('inner', { n: 41 });
        await svc.batchSave([{ id: String(out.n) }], 'Item');
      }`),
    );
    const definition = syncDefinition({ syncName: 'caller', models: ['Item'], runsMs: 3600_000, scriptHash: syncHash });
    const ref = { ...definition, connectionId: 'c9' };
    await control.ensureSync(definition, ref.connectionId);
    const status = await finishedRun(control, ref, 'the sync run that triggers an action');
    expect(status.latestError).toBeNull();
    expect(status.recordCount).toEqual({ Item: 1 });
    const runId = status.latestResult?.runId ?? '';
    const run = await (await runExecution(h.client, runId)).handle.describe();
    expect(run.taskQueue).toBe(h.taskQueue);
    expect(await childTaskQueues(h, runId)).toEqual([queue]);
  }, 60_000);
});
