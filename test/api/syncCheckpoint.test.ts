/**
 * Checkpoints through the API (issue 32): GET /sync/checkpoint shows what a sync's script saved with
 * svc.saveCheckpoint, DELETE /sync/checkpoint resets it (the next run's getCheckpoint answers null), a
 * full resync clears it, and unknown syncs and connections are 404s.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { bundle, deployRequest, INTEGRATION } from './fixtures.js';
import { apiFailure, deployWithConnection, eventually, startApiHarness, type ApiHarness } from './helpers/harness.js';

// Counts its runs in its checkpoint: each run reads the last one and saves one more.
const COUNTING = bundle(`async function (svc) {
  const checkpoint = await svc.getCheckpoint();
  await svc.saveCheckpoint({ runs: (checkpoint ? checkpoint.runs : 0) + 1, at: 'page-' + ((checkpoint ? checkpoint.runs : 0) + 1), done: false });
}`);

let h: ApiHarness;
const query = { provider_config_key: INTEGRATION, connection_id: 'c1', sync: 'issues' };

async function runOnce(mode?: 'full_refresh'): Promise<void> {
  const before = (await h.api.syncs.runs({ provider_config_key: INTEGRATION, syncs: 'issues' })).runs.length;
  await h.api.syncs.trigger({
    provider_config_key: INTEGRATION,
    syncs: ['issues'],
    ...(mode ? { sync_mode: mode } : {}),
  });
  await eventually(
    async () => {
      const { runs } = await h.api.syncs.runs({ provider_config_key: INTEGRATION, syncs: 'issues' });
      return runs.length > before ? runs : undefined;
    },
    90_000,
    'the triggered run',
  );
}

beforeAll(async () => {
  h = await startApiHarness();
  const request = deployRequest();
  await deployWithConnection(h, 'k1', 'c1');
  await h.deploy(h.envA.id, {
    ...request,
    scripts: request.scripts.map((script) => (script.name === 'issues' ? { ...script, code: COUNTING } : script)),
  });
});

describe('GET and DELETE /sync/checkpoint', () => {
  it('shows the saved checkpoint, resets it, and a full resync clears it', async () => {
    expect(await h.api.syncs.checkpoint(query)).toEqual({
      checkpoint: null,
      version: null,
      updated_at: null,
      run_id: null,
    });

    await runOnce();
    const first = await h.api.syncs.checkpoint(query);
    expect(first).toMatchObject({ checkpoint: { runs: 1, at: 'page-1', done: false }, version: 1 });
    const [run] = (await h.api.syncs.runs({ provider_config_key: INTEGRATION, syncs: 'issues' })).runs;
    expect(first.run_id).toBe(run?.run_id);
    expect(run?.executions).toEqual([run?.run_id]);

    await runOnce();
    expect(await h.api.syncs.checkpoint(query)).toMatchObject({ checkpoint: { runs: 2 }, version: 2 });

    expect(await h.api.syncs.resetCheckpoint(query)).toEqual({ deleted: true });
    expect(await h.api.syncs.resetCheckpoint(query)).toEqual({ deleted: false });
    expect((await h.api.syncs.checkpoint(query)).checkpoint).toBeNull();
    await runOnce();
    expect((await h.api.syncs.checkpoint(query)).checkpoint).toEqual({ runs: 1, at: 'page-1', done: false });

    await runOnce();
    expect((await h.api.syncs.checkpoint(query)).checkpoint).toMatchObject({ runs: 2 });
    // A full resync starts from the beginning: the script's getCheckpoint answered null.
    await runOnce('full_refresh');
    expect((await h.api.syncs.checkpoint(query)).checkpoint).toMatchObject({ runs: 1 });
  });

  it('404s for an unknown sync or connection, 400 for another variant, 401 without a key; another environment sees none', async () => {
    expect(await apiFailure(h.api.syncs.checkpoint({ ...query, sync: 'nope' }))).toMatchObject({
      status: 404,
      code: 'unknown_sync',
    });
    expect(await apiFailure(h.api.syncs.checkpoint({ ...query, connection_id: 'nope' }))).toMatchObject({
      status: 404,
      code: 'unknown_connection',
    });
    expect(await apiFailure(h.api.syncs.resetCheckpoint({ ...query, variant: 'v2' as 'base' }))).toMatchObject({
      status: 400,
    });
    expect(await apiFailure(h.anonymous.syncs.checkpoint(query))).toMatchObject({ status: 401 });
    expect((await apiFailure(h.apiB.syncs.checkpoint(query))).status).toBe(404);
  });
});
