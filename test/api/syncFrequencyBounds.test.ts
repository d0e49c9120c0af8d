/**
 * A sync's frequency has a maximum as well as a minimum (10 years): longer ones were accepted and broke
 * later. Found by hand beyond schemathesis: PUT /sync/update-connection-frequency with `300000 years`
 * answered 200, and from then on every GET /sync/status of that sync answered 500 (its next run's date
 * is past what a Date holds); `9999999999 years` answered 500 itself (the stored bigint overflowed); a
 * deploy with `runs: 300000 years` was applied. Now each is a 400 (or the deploy's 422) that names the
 * maximum, and the sync's status still answers.
 */
import { describe, expect } from 'vitest';
import { test as kit, withApiHarness, type ApiHarness } from '../kit/index.js';
import { deployRequest, INTEGRATION, SERVICE_YAML } from '../kit/fixtures.js';
import { apiFailure, deployWithConnection } from '../kit/api.js';

/** The API with the fixture deployment, connection c1 and its sync started. */
const it = kit.extend<{ api: ApiHarness }>({
  api: [
    async ({ db, upstream }, use) =>
      withApiHarness({ database: db, upstream }, use, async (h) => {
        await deployWithConnection(h, 'k1', 'c1');
        await h.api.syncs.start({ provider_config_key: INTEGRATION, syncs: ['people'] });
      }),
    { scope: 'file' },
  ],
});

describe('the longest sync frequency', () => {
  it('a frequency past 10 years is a 400 naming the maximum, and the sync status still answers', async ({ api: h }) => {
    for (const frequency of ['11 years', '300000 years', '9999999999 years', `${'9'.repeat(90)} years`]) {
      const refused = await apiFailure(
        h.api.syncs.setConnectionFrequency({
          provider_config_key: INTEGRATION,
          connection_id: 'c1',
          sync_name: 'people',
          frequency,
        }),
      );
      expect({ frequency, ...refused }).toEqual({ frequency, status: 400, code: 'invalid_frequency' });
      const status = await fetch(`${h.baseUrl}/sync/status?provider_config_key=${INTEGRATION}&syncs=people`, {
        headers: { authorization: `Bearer ${h.envA.secretKey}` },
      });
      expect(status.status).toBe(200);
    }
    const longest = await h.api.syncs.setConnectionFrequency({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      sync_name: 'people',
      frequency: '10 years',
    });
    expect(longest).toMatchObject({ frequency: '10 years', overridden: true });
  }, 120_000);

  it('a deploy with runs past 10 years is refused with the field', async ({ api: h }) => {
    const yaml = SERVICE_YAML.replace('runs: 1h', 'runs: 300000 years');
    const refused = await apiFailure(h.api.deploy.apply(deployRequest({ yaml })));
    expect(refused).toEqual({ status: 422, code: 'invalid_config' });
  }, 120_000);
});
