/**
 * Checkpoints through the API (issue 32): GET /sync/checkpoint shows what a sync's script saved with
 * svc.saveCheckpoint, DELETE /sync/checkpoint resets it (the next run's getCheckpoint answers null), a
 * full resync clears it, and unknown syncs and connections are 404s. The server's
 * SYNC_EXECUTION_TIME_LIMIT cuts a run that checkpoints into executions of one run.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { ServiceApiError } from '../../src/client/index.js';
import { deployRequest, INTEGRATION } from '../kit/fixtures.js';
import { apiFailure, deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';

// Counts its runs in its checkpoint: each run reads the last one and saves one more.
const COUNTING = bundle(`async function (svc) {
  const checkpoint = await svc.getCheckpoint();
  await svc.saveCheckpoint({ runs: (checkpoint ? checkpoint.runs : 0) + 1, at: 'page-' + ((checkpoint ? checkpoint.runs : 0) + 1), done: false });
}`);

// Twelve pages, a second apart, each saved and checkpointed: about 13 s, past a 10 s limit per execution.
const PAGES = 12;
const SLOW = bundle(`async function (svc) {
  const checkpoint = await svc.getCheckpoint();
  let page = checkpoint ? checkpoint.page : 0;
  while (page < ${PAGES}) {
    await new Promise((resolve) => setTimeout(resolve, 1000));
    page++;
    await svc.batchSave([{ id: 'p' + page, title: 'page ' + page }], 'Issue');
    await svc.saveCheckpoint({ page });
  }
  await svc.clearCheckpoint();
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
  // The shortest limit the setting takes: the slow sync's run is cut once (SYNC_EXECUTION_TIME_LIMIT).
  h = await startApiHarness({ settings: { SYNC_EXECUTION_TIME_LIMIT: '10s' } });
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
    // GET /sync/status shows the same checkpoint (it said null whatever was saved).
    const { syncs } = await h.api.syncs.status({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      syncs: ['issues'],
    });
    expect(syncs[0]?.checkpoint).toEqual({ runs: 2, at: 'page-2', done: false });

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
    // One sync only: a wildcard or a list is a 400 naming the field (a wildcard answered 200 with nulls).
    for (const sync of ['*', 'issues,other']) {
      for (const call of [h.api.syncs.checkpoint, h.api.syncs.resetCheckpoint]) {
        const error = await call({ ...query, sync }).catch((e: unknown) => e);
        expect(error, sync).toBeInstanceOf(ServiceApiError);
        expect((error as ServiceApiError).status, sync).toBe(400);
        expect((error as ServiceApiError).message, sync).toMatch(/sync.*no wildcard/);
      }
    }
    expect(await apiFailure(h.anonymous.syncs.checkpoint(query))).toMatchObject({ status: 401 });
    expect((await apiFailure(h.apiB.syncs.checkpoint(query))).status).toBe(404);
  });

  it('a run past SYNC_EXECUTION_TIME_LIMIT continues in a next execution: one run, each record once', async () => {
    const request = deployRequest();
    await h.deploy(h.envA.id, {
      ...request,
      scripts: request.scripts.map((script) => (script.name === 'issues' ? { ...script, code: SLOW } : script)),
    });
    await runOnce('full_refresh');
    const [run] = (await h.api.syncs.runs({ provider_config_key: INTEGRATION, syncs: 'issues' })).runs;
    expect(run).toMatchObject({ status: 'success' });
    // Cut by the server's setting, not by the history budget (a dozen pages are far from it).
    expect(run?.executions.length).toBeGreaterThanOrEqual(2);
    const page = await h.api.records.list({
      connectionId: 'c1',
      providerConfigKey: INTEGRATION,
      model: 'Issue',
      limit: 100,
    });
    expect(page.records.map((record) => record.id).sort()).toEqual(
      Array.from({ length: PAGES }, (_, i) => `p${i + 1}`).sort(),
    );
    expect((await h.api.syncs.checkpoint(query)).checkpoint).toBeNull();
  });
});
