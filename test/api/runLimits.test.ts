/**
 * Runs one environment may have going at once (issue 29, finding 3): actions past the bound are a 429
 * `too_many_runs` with Retry-After, another environment's are not touched; a sync run past the bound
 * waits to begin until a slot frees. The bounds are tiny here (2 actions, 1 sync run) so that a few
 * held requests reach them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { deployRequest, INTEGRATION, PROVIDER } from './fixtures.js';
import { connectionOf, eventually, json, startApiHarness, type ApiHarness } from './helpers/harness.js';

let h: ApiHarness;
// Requests to the fake API wait while their connection's key is held.
const held = new Map<string, () => void>();
const hold = (key: string): void => {
  let release = (): void => undefined;
  const released = new Promise<void>((resolve) => (release = resolve));
  held.set(key, release);
  waits.set(key, released);
};
const waits = new Map<string, Promise<void>>();
const seen: string[] = [];

beforeAll(async () => {
  h = await startApiHarness({
    settings: { ACTION_CONCURRENCY_PER_ENVIRONMENT: '2', SYNC_RUN_CONCURRENCY_PER_ENVIRONMENT: '1' },
  });
  h.fake.setHandler(async (request, response) => {
    const key = request.headers.authorization ?? '';
    seen.push(`${key} ${request.method} ${request.url}`);
    await waits.get(key);
    json(response, 200, { issues: [{ id: '1', title: 'one' }], id: 'x', title: 'done' });
  });
  for (const api of [h.api, h.apiB]) await api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.deploy(h.envA.id, deployRequest());
  await h.deploy(h.envB.id, deployRequest());
  for (const connection of ['c1', 'c2', 'c3']) {
    await h.api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: connection,
      credentials: { type: 'API_KEY', apiKey: `key-${connection}` },
    });
  }
  await h.apiB.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'b1',
    credentials: { type: 'API_KEY', apiKey: 'key-b1' },
  });
}, 120_000);

afterAll(() => {
  for (const release of held.values()) release();
});

const createIssue = (secretKey: string, connection: string) =>
  fetch(`${h.baseUrl}/action/trigger`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${secretKey}`,
      'content-type': 'application/json',
      'connection-id': connection,
      'provider-config-key': INTEGRATION,
    },
    body: JSON.stringify({ action_name: 'create-issue', input: { title: 'held' } }),
  });

const selection = (connection: string) => ({
  provider_config_key: INTEGRATION,
  connection_id: connection,
  syncs: ['issues'],
});

describe('runs per environment', () => {
  it('a third action of an environment whose two are running is a 429 too_many_runs; another environment’s runs', async () => {
    hold('Bearer key-c1');
    hold('Bearer key-c2');
    const first = createIssue(h.envA.secretKey, 'c1');
    const second = createIssue(h.envA.secretKey, 'c2');
    await eventually(
      async () => (seen.filter((line) => / POST /.test(line)).length >= 2 ? true : undefined),
      60_000,
      'two actions under way',
    );
    const third = await createIssue(h.envA.secretKey, 'c3');
    expect(third.status).toBe(429);
    expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(((await third.json()) as { error: { code: string } }).error.code).toBe('too_many_runs');
    // Environment B has slots of its own.
    expect((await createIssue(h.envB.secretKey, 'b1')).status).toBe(200);
    held.get('Bearer key-c1')!();
    held.get('Bearer key-c2')!();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    // The slots are given back.
    expect((await createIssue(h.envA.secretKey, 'c3')).status).toBe(200);
  }, 180_000);

  it('a sync run past the bound waits to begin until the running one ends', async () => {
    hold('Bearer key-c1');
    const before = seen.length;
    await h.api.syncs.trigger(selection('c1'));
    await eventually(
      async () => (seen.slice(before).some((line) => line.startsWith('Bearer key-c1 GET')) ? true : undefined),
      60_000,
      'c1’s run under way',
    );
    await h.api.syncs.trigger(selection('c2'));
    // c2's run cannot begin while c1's holds the environment's one slot.
    await new Promise((resolve) => setTimeout(resolve, 5000));
    expect(seen.slice(before).some((line) => line.startsWith('Bearer key-c2 GET'))).toBe(false);
    held.get('Bearer key-c1')!();
    const ref = { environmentId: h.envA.id, integrationId: INTEGRATION, connectionId: 'c2', syncName: 'issues' };
    const status = await eventually<SyncStatus>(
      async () => {
        const current = await h.deps.syncs.status(ref);
        return current.latestResult ? current : undefined;
      },
      120_000,
      'c2’s run to begin once c1’s ended',
    );
    expect(status.latestError).toBeNull();
    expect((await h.api.records.list({ ...connectionOf('c2'), model: 'Issue' })).records).toHaveLength(1);
  }, 240_000);

  it('a sync run whose connection is deleted mid-run gives its slot back at once', async () => {
    hold('Bearer key-c3');
    const before = seen.length;
    await h.api.syncs.trigger(selection('c3'));
    await eventually(
      async () => (seen.slice(before).some((line) => line.startsWith('Bearer key-c3 GET')) ? true : undefined),
      60_000,
      'c3’s run under way',
    );
    // The entity is stopped with its run, which never records itself: the slot goes with the entity.
    await h.api.connections.delete(connectionOf('c3'));
    await h.api.syncs.trigger(selection('c2'));
    await eventually(
      async () => (seen.slice(before).some((line) => line.startsWith('Bearer key-c2 GET')) ? true : undefined),
      60_000,
      'c2’s run to begin (the deleted connection’s slot given back)',
    );
    held.get('Bearer key-c3')!();
  }, 240_000);
});
