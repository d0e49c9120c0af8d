/**
 * Per-connection sync frequency on the real stack (docs/api.md "Per-connection frequency"): PUT
 * /sync/update-connection-frequency overrides `runs` for one connection's sync; that connection's sync
 * entity takes the new interval and runs on it, other connections keep the integration's; a redeploy
 * keeps the override; null clears it.
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { syncWorkflowId } from '../../src/temporal/connection.js';
import { deployRequest, INTEGRATION } from '../kit/fixtures.js';
import { apiFailure, deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';

let h: ApiHarness;
const ref = (connectionId: string) => ({
  environmentId: h.envA.id,
  integrationId: INTEGRATION,
  connectionId,
  syncName: 'people',
});

const failure = apiFailure;

const executionsOf = async (connectionId: string, atLeast: number) =>
  eventually(
    async () => {
      const status = await h.deps.syncs.status(ref(connectionId)).catch(() => undefined);
      return status && status.executions >= atLeast && status.status !== 'running' ? status : undefined;
    },
    90_000,
    `${atLeast} run(s) of people for ${connectionId}`,
  );

beforeAll(async () => {
  h = await startApiHarness();
  await deployWithConnection(h, 'k1', 'c1');
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'c2',
    credentials: { type: 'API_KEY', apiKey: 'k2' },
  });
  // `people` has runs: 1h and auto_start: false; starting it runs it now and then every hour.
  await h.api.syncs.start({ provider_config_key: INTEGRATION, syncs: ['people'] });
  await executionsOf('c1', 1);
  await executionsOf('c2', 1);
});

describe('per-connection sync frequency', () => {
  it('moves one connection’s sync entity to the new interval, which it then runs on; the others keep runs', async () => {
    const answer = await h.api.syncs.setConnectionFrequency({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      sync_name: 'people',
      frequency: '30s',
    });
    expect(answer).toEqual({ frequency: '30s', frequency_ms: 30_000, overridden: true });

    // The entity itself holds the new interval, and its next run is its last finish plus 30 s.
    const c1 = await eventually(
      async () => {
        const status = await h.deps.syncs.status(ref('c1'));
        return status.frequencyMs === 30_000 ? status : undefined;
      },
      30_000,
      'the entity of c1 to take 30 s',
    );
    expect(Date.parse(c1.nextScheduledSyncAt!) - Date.parse(c1.finishedAt!)).toBe(30_000);
    const c2 = await h.deps.syncs.status(ref('c2'));
    expect(c2.frequencyMs).toBe(3_600_000);
    expect(Date.parse(c2.nextScheduledSyncAt!) - Date.parse(c2.finishedAt!)).toBeGreaterThanOrEqual(3_590_000);

    // It runs on it: the entity's wait for its next run was re-armed, its hour's timer cancelled and a
    // timer set for the new run time (or, on a machine so slow that the 30 s had already passed, a run
    // started at once). That a fired timer starts a run is shown at short intervals by
    // test/runtime/syncEntity.test.ts, the schedule's arithmetic by workflows/syncEntity.test.ts: this
    // test no longer waits the 30 s out.
    const rearmed = await eventually(
      async () => {
        const { events } = await h.temporal.workflow.getHandle(syncWorkflowId(ref('c1'))).fetchHistory();
        const list = events ?? [];
        const signalled = list.findIndex(
          (e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'reconfigure',
        );
        // The entity's status already shows 30 s. When this run has no reconfigure signal, the previous
        // run took it just before it continued as new (a loaded machine can be that slow to close a
        // run): this run started with the new interval, and its first wait is the new one.
        const after = signalled < 0 ? list : list.slice(signalled);
        if (signalled >= 0 && !after.some((e) => e.timerCanceledEventAttributes)) return undefined;
        if (after.some((e) => e.startChildWorkflowExecutionInitiatedEventAttributes)) return { ranAtOnce: true };
        const timer = after.find((e) => e.timerStartedEventAttributes)?.timerStartedEventAttributes;
        return timer ? { timerMs: Number(String(timer.startToFireTimeout?.seconds ?? 0)) * 1000 } : undefined;
      },
      30_000,
      'the entity of c1 to wait for its new run time',
    );
    if ('timerMs' in rearmed) {
      expect(rearmed.timerMs).toBeGreaterThanOrEqual(0);
      expect(rearmed.timerMs).toBeLessThanOrEqual(30_000);
    } else {
      expect(Date.now() - Date.parse(c1.finishedAt!)).toBeGreaterThanOrEqual(30_000);
    }
    expect((await h.deps.syncs.status(ref('c2'))).executions).toBe(1);

    const { syncs } = await h.api.syncs.status({ provider_config_key: INTEGRATION, syncs: ['people'] });
    const byConnection = Object.fromEntries(syncs.map((s) => [s.connection_id, s]));
    expect(byConnection['c1']).toMatchObject({ frequency: '30s', frequencyMs: 30_000, frequency_overridden: true });
    expect(byConnection['c2']).toMatchObject({ frequency: '1h', frequencyMs: 3_600_000, frequency_overridden: false });
  }, 150_000);

  it('survives a redeploy that changes runs, and null goes back to runs', async () => {
    await h.deploy(h.envA.id, deployRequest({ yaml: deployRequest().yaml.replaceAll('runs: 1h', 'runs: 2h') }));
    await eventually(
      async () => ((await h.deps.syncs.status(ref('c2'))).frequencyMs === 7_200_000 ? true : undefined),
      30_000,
      'c2 to take the redeployed runs',
    );
    expect((await h.deps.syncs.status(ref('c1'))).frequencyMs).toBe(30_000);

    const cleared = await h.api.syncs.setConnectionFrequency({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      sync_name: 'people',
      frequency: null,
    });
    expect(cleared).toEqual({ frequency: '2h', frequency_ms: 7_200_000, overridden: false });
    await eventually(
      async () => ((await h.deps.syncs.status(ref('c1'))).frequencyMs === 7_200_000 ? true : undefined),
      30_000,
      'c1 back on runs',
    );
  });

  it('refuses bad input with a clear error and reaches no other environment’s connection', async () => {
    const body = { provider_config_key: INTEGRATION, connection_id: 'c1', sync_name: 'people' };
    expect(await failure(h.api.syncs.setConnectionFrequency({ ...body, frequency: '10s' }))).toEqual({
      status: 400,
      code: 'invalid_frequency',
    });
    expect(await failure(h.api.syncs.setConnectionFrequency({ ...body, frequency: 'soon' }))).toEqual({
      status: 400,
      code: 'invalid_frequency',
    });
    expect(await failure(h.api.syncs.setConnectionFrequency({ ...body, sync_name: 'nope', frequency: '1h' }))).toEqual({
      status: 404,
      code: 'unknown_sync',
    });
    expect(
      await failure(h.api.syncs.setConnectionFrequency({ ...body, connection_id: 'nobody', frequency: '1h' })),
    ).toEqual({ status: 404, code: 'unknown_connection' });
    // Environment B has no such integration or connection: its key cannot touch A's.
    expect(await failure(h.apiB.syncs.setConnectionFrequency({ ...body, frequency: '1m' }))).toMatchObject({
      status: 404,
    });
    expect((await h.deps.syncs.status(ref('c1'))).frequencyMs).toBe(7_200_000);
    const { rows } = await h.pool.query('SELECT * FROM connection_sync_frequencies');
    expect(rows).toEqual([]);
  });

  it('goes with its connection', async () => {
    await h.api.syncs.setConnectionFrequency({
      provider_config_key: INTEGRATION,
      connection_id: 'c2',
      sync_name: 'people',
      frequency: 'every 2 minutes',
    });
    expect((await h.pool.query('SELECT frequency_ms FROM connection_sync_frequencies')).rows).toEqual([
      { frequency_ms: '120000' },
    ]);
    await h.api.connections.delete({ connectionId: 'c2', providerConfigKey: INTEGRATION });
    expect((await h.pool.query('SELECT * FROM connection_sync_frequencies')).rows).toEqual([]);
  });
});
