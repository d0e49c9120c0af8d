/** The sync entity workflow: auto_start, trigger, pause, resume, status, full and incremental, track_deletes, webhooks. */
import { beforeAll, describe, expect, it } from 'vitest';
import type { SyncDefinition, SyncStatus } from '../../src/runtime/definitions.js';
import { createSyncControl, type SyncControl, type SyncRef } from '../../src/temporal/syncControl.js';
import { syncDefinition, useRuntime, type RuntimeHarness } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

async function until(
  control: SyncControl,
  ref: SyncRef,
  what: string,
  test: (status: SyncStatus) => boolean,
): Promise<SyncStatus> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await control.status(ref);
    if (test(status)) return status;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(status)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

const script = bundle(`async function (svc) {
  const meta = await svc.getMetadata();
  await svc.updateMetadata({ runs: [...(meta.runs || []), svc.webhook ? 'webhook' : svc.lastSyncDate ? 'since' : 'all'] });
  if (svc.webhook) { await svc.batchSave([svc.webhook.payload], 'Item'); return; }
  const res = await svc.get({ endpoint: '/items' });
  await svc.batchSave(res.data.items, 'Item');
  if (res.data.fail) throw new Error('upstream broke after the first page');
}`);

describe('sync entity workflow', () => {
  let h: RuntimeHarness;
  let control: SyncControl;
  let items = [1, 2, 3, 4, 5].map((n) => ({ id: `i${n}`, n }));
  let fail = false;

  beforeAll(async () => {
    h = await useRuntime();
    control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const api = await startFakeUpstream((_request, response) => json(response, 200, { items, fail }));
    h.connections.setBaseUrl(api.url);
  });

  const define = async (overrides: Partial<SyncDefinition>): Promise<{ definition: SyncDefinition; ref: SyncRef }> => {
    const definition = syncDefinition({
      models: ['Item'],
      runsMs: 3600_000,
      scriptHash: await h.scripts.put(script),
      ...overrides,
    });
    return { definition, ref: { ...definition, connectionId: overrides.syncName ?? 'x' } };
  };

  it('auto_start false starts paused; trigger runs once while paused; resume runs and schedules; continue-as-new per execution', async () => {
    const { definition, ref } = await define({ syncName: 'paused-start', autoStart: false });
    const workflowId = await control.ensureSync(definition, ref.connectionId);
    const initial = await control.status(ref);
    expect(initial).toMatchObject({
      status: 'paused',
      paused: true,
      executions: 0,
      nextScheduledSyncAt: null,
      latestResult: null,
    });

    await control.trigger(ref);
    const triggered = await until(
      control,
      ref,
      'the triggered run',
      (s) => s.executions === 1 && s.status !== 'running' && s.finishedAt !== null,
    );
    expect(triggered.status).toBe('paused');
    expect(triggered.latestResult?.models['Item']).toEqual({ added: 5, updated: 0, deleted: 0, unchanged: 0 });
    expect(triggered.recordCount).toEqual({ Item: 5 });

    await control.resume(ref);
    const resumed = await until(control, ref, 'the resumed run', (s) => s.executions === 2 && s.status === 'idle');
    expect(resumed.latestResult?.models['Item']).toEqual({ added: 0, updated: 0, deleted: 0, unchanged: 5 });
    const next = Date.parse(resumed.nextScheduledSyncAt ?? '') - Date.parse(resumed.finishedAt ?? '');
    expect(Math.abs(next - 3600_000)).toBeLessThan(1000);
    // Incremental: the second run got lastSyncDate.
    expect(h.connections.metadata.get(ref.connectionId)).toEqual({ runs: ['all', 'since'] });

    await control.pause(ref);
    expect(await control.status(ref)).toMatchObject({ status: 'paused', nextScheduledSyncAt: null });
    const description = await h.client.workflow.getHandle(workflowId).describe();
    expect(description.historyLength).toBeLessThan(40); // continued as new after each execution
    await control.stop(ref, 'test over');
  });

  it('full sync with track_deletes: unseen records are deleted after a successful run only', async () => {
    items = [1, 2, 3, 4, 5].map((n) => ({ id: `i${n}`, n }));
    const { definition, ref } = await define({ syncName: 'full-deletes', syncType: 'full', trackDeletes: true });
    await control.ensureSync(definition, ref.connectionId);
    await until(control, ref, 'the first run', (s) => s.executions === 1 && s.status === 'idle');

    items = items.slice(0, 3);
    fail = true;
    await control.trigger(ref);
    const failed = await until(control, ref, 'the failing run', (s) => s.executions === 2 && s.status === 'failed');
    expect(failed.latestError).toEqual({
      code: 'script_error',
      message: 'script full-deletes failed: Error: upstream broke after the first page',
    });
    expect(await countLive(ref.connectionId)).toBe(5); // a failed run deletes nothing

    fail = false;
    await control.trigger(ref, 'full_refresh');
    const ok = await until(control, ref, 'the successful run', (s) => s.executions === 3 && s.status === 'idle');
    expect(ok.latestResult?.models['Item']).toEqual({ added: 0, updated: 0, deleted: 2, unchanged: 3 });
    expect(ok.recordCount).toEqual({ Item: 3 });
    expect(h.connections.metadata.get(ref.connectionId)).toEqual({ runs: ['all', 'all', 'all'] }); // full: never lastSyncDate

    await control.trigger(ref, 'full_refresh_and_clear_cache');
    const cleared = await until(control, ref, 'the clearing run', (s) => s.executions === 4 && s.status === 'idle');
    expect(cleared.latestResult?.models['Item']).toEqual({ added: 3, updated: 0, deleted: 0, unchanged: 0 });
    await control.stop(ref, 'test over');
  });

  it('webhooks of a subscribed type run the sync with svc.webhook; others are ignored; short runs intervals repeat', async () => {
    items = [{ id: 'base', n: 0 }];
    const { definition, ref } = await define({
      syncName: 'hooks',
      webhookSubscriptions: ['item.created'],
      // Longer than the step from a run's end to the next choice (continue-as-new) takes on a loaded
      // machine: with 500 ms the schedule was due again at every choice and went first, and the queued
      // webhook waited (the shortest `runs` a service.yaml may set is 30 s).
      runsMs: 1500,
    });
    await control.ensureSync(definition, ref.connectionId);
    await until(control, ref, 'the first run', (s) => s.executions >= 1 && s.status === 'idle');
    await control.pause(ref);
    await control.deliverWebhook(ref, {
      type: 'other.type',
      payload: { id: 'nope' },
      receivedAt: new Date().toISOString(),
    });
    await control.deliverWebhook(ref, {
      type: 'item.created',
      payload: { id: 'hooked', n: 9 },
      receivedAt: new Date().toISOString(),
    });
    const before = (await control.status(ref)).executions;
    await control.resume(ref);
    await until(control, ref, 'the webhook run and scheduled runs', (s) => s.executions >= before + 3);
    const runs = (h.connections.metadata.get(ref.connectionId)?.['runs'] ?? []) as string[];
    expect(runs.filter((run) => run === 'webhook')).toHaveLength(1);
    expect(await countLive(ref.connectionId)).toBe(2);
    await control.stop(ref, 'test over');
  });

  it('a webhook queued while paused does not take the place of the due scheduled run: both run, the schedule keeps its interval', async () => {
    items = [{ id: 'base', n: 0 }];
    const { definition, ref } = await define({
      syncName: 'hook-and-schedule',
      webhookSubscriptions: ['item.created'],
      autoStart: false,
    });
    await control.ensureSync(definition, ref.connectionId);
    await control.deliverWebhook(ref, {
      type: 'item.created',
      payload: { id: 'hooked', n: 9 },
      receivedAt: new Date().toISOString(),
    });
    // /sync/start of a sync that never ran: its scheduled run is due at once, and a webhook waits.
    await control.resume(ref);
    const done = await until(control, ref, 'both runs', (s) => s.executions >= 2 && s.status === 'idle');
    expect(done.executions).toBe(2);
    const runs = (h.connections.metadata.get(ref.connectionId)?.['runs'] ?? []) as string[];
    expect([...runs].sort()).toEqual(['all', 'webhook']);
    expect(await countLive(ref.connectionId)).toBe(2);
    // The next scheduled run is one interval after the scheduled run, not after the webhook run too.
    const next = Date.parse(done.nextScheduledSyncAt ?? '');
    expect(next).toBeLessThanOrEqual(Date.parse(done.finishedAt ?? '') + 3600_000);
    expect(next).toBeGreaterThan(Date.now() + 3500_000);
    await control.stop(ref, 'test over');
  });

  it('svc.lastSyncDate is the start of the last successful run, not its end (docs/scripts.md)', async () => {
    const seeing = bundle(`async function (svc) {
      const meta = await svc.getMetadata();
      const seen = svc.lastSyncDate ? svc.lastSyncDate.toISOString() : 'none';
      await svc.updateMetadata({ seen: [...(meta.seen || []), seen] });
      await svc.batchSave([{ id: 'one', n: 1 }], 'Item');
    }`);
    const { definition, ref } = await define({ syncName: 'last-sync-date', scriptHash: await h.scripts.put(seeing) });
    await control.ensureSync(definition, ref.connectionId);
    const first = await until(control, ref, 'the first run', (s) => s.executions === 1 && s.status === 'idle');
    const startedAt = first.latestResult?.startedAt ?? '';
    expect(Date.parse(startedAt)).toBeLessThan(Date.parse(first.finishedAt ?? ''));

    await control.trigger(ref);
    await until(control, ref, 'the second run', (s) => s.executions === 2 && s.status === 'idle');
    expect(h.connections.metadata.get(ref.connectionId)?.['seen']).toEqual(['none', startedAt]);
    await control.stop(ref, 'test over');
  });

  async function countLive(connectionId: string): Promise<number> {
    const result = await h.pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM records r JOIN record_scopes s USING (scope_id) WHERE s.connection_id = $1 AND r.deleted_at IS NULL`,
      [connectionId],
    );
    return Number(result.rows[0]!.n);
  }

  it('a run loads its script in its beginRun step; a script that step cannot load fails the run as its own loadScript step does', async () => {
    // Run model version 4 (issue 31): the script comes with beginRun's answer, no loadScript step.
    const { definition, ref } = await define({ syncName: 'script-in-begin' });
    const workflowId = await control.ensureSync(definition, ref.connectionId);
    await control.trigger(ref);
    const done = await until(control, ref, 'the run', (s) => s.executions === 1 && s.finishedAt !== null);
    expect(done.latestError).toBeNull();
    expect(done.latestResult?.models['Item']?.added).toBe(items.length);
    const activities = async (id: string): Promise<string[]> => {
      const executions: string[] = [];
      for await (const execution of h.client.workflow.list({ query: `WorkflowId = '${id}'` })) {
        executions.push(execution.runId);
      }
      const types: string[] = [];
      for (const runId of executions) {
        const history = await h.client.workflow.getHandle(id, runId).fetchHistory();
        for (const event of history.events ?? []) {
          const data = event.markerRecordedEventAttributes?.details?.['data']?.payloads?.[0]?.data;
          if (data)
            types.push((JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type: string }).activity_type);
        }
      }
      return types;
    };
    const steps = await activities(workflowId);
    expect(steps).toContain('beginRun');
    expect(steps).toContain('httpRequest');
    expect(steps).not.toContain('loadScript');

    // A bundle that is not in the store: beginRun answers without it, and the run's own loadScript step
    // fails the run with the loader's error, as before version 4.
    const missing = await define({ syncName: 'script-missing', scriptHash: 'f'.repeat(64) });
    const missingId = await control.ensureSync(missing.definition, missing.ref.connectionId);
    await control.trigger(missing.ref);
    const failed = await until(
      control,
      missing.ref,
      'the failed run',
      (s) => s.executions === 1 && s.finishedAt !== null,
    );
    expect(failed.latestError?.code).toBe('script_not_found');
    expect(await activities(missingId)).toEqual(expect.arrayContaining(['beginRun', 'loadScript']));
    await control.stop(ref, 'test over');
    await control.stop(missing.ref, 'test over');
  });
});
