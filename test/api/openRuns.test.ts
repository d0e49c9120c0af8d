/**
 * More sync runs open at once than the worker has activity slots. Each open run has a watchdog beside
 * it (`watchRun`, an activity as long as the run) and ends with an ordinary activity of its own
 * (`forgetSteps`). With the watchdogs on the main queue they took every slot once that many runs were
 * open, and no run could end: bench/load.ts stopped at 97 of 2,000 first runs. Here the main queue
 * has 2 activity slots and 6 runs are held open together; every one must finish.
 */
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, type ApiHarness } from '../kit/index.js';
import { deployRequest, INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { eventually } from '../helpers/eventually.js';
import { json } from '../kit/upstream.js';

/** The API whose worker has 2 activity slots on the main queue. */
const it = kit.extend<{ api: ApiHarness }>({
  api: [
    async ({ db, upstream }, use) =>
      withApiHarness(
        { database: db, upstream, overrides: { workerTuning: { maxConcurrentActivityTaskExecutions: 2 } } },
        use,
      ),
    { scope: 'file' },
  ],
});
const CONNECTIONS = ['o1', 'o2', 'o3', 'o4', 'o5', 'o6'];

describe('more open sync runs than activity slots', () => {
  it('every run finishes: the watchdogs do not take the slots the runs need', async ({ api: h }) => {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held = 0;
    h.fake.setHandler(async (request, response) => {
      if (request.url?.startsWith('/api/issues')) {
        held++;
        await released;
        return json(response, 200, { issues: [{ id: `i-${request.headers.authorization}`, title: 'held' }] });
      }
      return json(response, 404, { error: 'no handler' });
    });
    await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
    await h.deploy(h.envA.id, deployRequest());
    for (const id of CONNECTIONS) {
      await h.api.connections.import({
        provider_config_key: INTEGRATION,
        connection_id: id,
        credentials: { type: 'API_KEY', apiKey: id },
      });
      await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: id, syncs: ['issues'] });
    }
    // Every run is open (its request held), and so has its watchdog.
    await eventually(async () => (held >= CONNECTIONS.length ? true : undefined), 120_000, 'every run to be open');
    release();
    for (const id of CONNECTIONS) {
      const run = await eventually(
        async () => {
          const { runs } = await h.api.call<{ runs: { status: string }[] }>('GET', '/sync/runs', {
            query: { provider_config_key: INTEGRATION, connection_id: id },
          });
          return runs[0] && runs[0].status !== 'running' ? runs[0] : undefined;
        },
        180_000,
        `the run of ${id} to finish`,
      );
      expect(run.status, id).toBe('success');
    }
  }, 600_000);
});
