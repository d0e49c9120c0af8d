/**
 * Deleting a connection or an environment while one of its runs is in flight leaves nothing of it behind.
 * Each test checks what was left in the database, and failed before its fix:
 * - log lines of an action that outlived its connection's delete, stored with the key in clear
 *   (src/runtime/logStore.ts: not stored once the connection is gone);
 * - a record save in flight across its connection's delete, landing for the next connection of that id
 *   (src/records/postgresRecordStore.ts: the erase leaves the run row owned by no run).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { createClient } from '../../src/client/index.js';
import { environmentRows } from '../helpers/environmentRows.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';

let h: ApiHarness;
let slowArrived = 0;
let slowSyncArrived = 0;
let releaseSync: () => void = () => undefined;
const syncGate = new Promise<void>((resolve) => (releaseSync = resolve));
let releaseSlow: () => void = () => undefined;
const slowGate = new Promise<void>((resolve) => (releaseSlow = resolve));

const SLOW_ACTION_YAML = `
    actions:
      slowlog:
        description: Waits on the API, then logs
        output: Result
        endpoint: POST /slowlog
models:
  Result:
    ok: boolean
`;

const RACER_KEY = 'racer-api-key-8e2f61a9d3';
const LATE_SAVER = bundle(`async function (svc) {
  await svc.get({ endpoint: '/slow-sync' });
  await svc.batchSave([{ id: 'late-1', owner: 'the first owner of s1' }], 'Item');
}`);
const SLOW_LOGGER = bundle(`async function (svc) {
  const connection = await svc.getConnection();
  await svc.get({ endpoint: '/slow' });
  await svc.log('late line ' + connection.credentials.apiKey);
  return { ok: true };
}`);

beforeAll(async () => {
  h = await startApiHarness();
  h.fake.setHandler((req, res) => {
    const url = new URL(req.url ?? '/', h.fake.url);
    if (url.pathname.endsWith('/slow-sync')) {
      slowSyncArrived++;
      void syncGate.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"items":[]}'));
    } else if (url.pathname.endsWith('/slow')) {
      slowArrived++;
      void slowGate.then(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"slow":true}'));
    } else {
      res.writeHead(404).end();
    }
  });
  // Environment A holds the same integration, script and connection names as the environments the
  // tests delete from: none of its rows may go with them.
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.deploy(h.envA.id, {
    yaml: `integrations:\n  ${INTEGRATION}:\n${SLOW_ACTION_YAML}`,
    scripts: [{ integration: INTEGRATION, kind: 'action' as const, name: 'slowlog', code: SLOW_LOGGER }],
  });
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'r1',
    credentials: { type: 'API_KEY', apiKey: 'environment-a-key' },
  });
}, 180_000);

afterAll(() => {
  releaseSlow();
  releaseSync();
});

const rowsOf = (environmentId: string) => environmentRows(h.pool, environmentId);

/** A new environment with the fake API's integration, deployed with one script under `integration`'s YAML body. */
async function environmentWith(
  name: string,
  integrationYaml: string,
  script: { kind: 'action' | 'sync'; name: string; code: string },
) {
  const { environment, secret_key } = await h.admin.environments.create(name);
  const client = createClient({ baseUrl: h.baseUrl, secretKey: secret_key });
  await client.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.deploy(environment.id, {
    yaml: `integrations:\n  ${INTEGRATION}:\n${integrationYaml}`,
    scripts: [{ integration: INTEGRATION, ...script }],
  });
  return { environment, client };
}

describe('deleting a connection or an environment while its run is in flight', () => {
  it('an action still running when its connection and environment are deleted leaves no row (and no credential) of the environment behind', async () => {
    const { environment, client: racer } = await environmentWith('racer', SLOW_ACTION_YAML, {
      kind: 'action',
      name: 'slowlog',
      code: SLOW_LOGGER,
    });
    await racer.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 'r1',
      credentials: { type: 'API_KEY', apiKey: RACER_KEY },
    });
    const action = racer
      .raw('POST', '/slowlog', { headers: { 'connection-id': 'r1', 'provider-config-key': INTEGRATION }, body: {} })
      .then(
        (response) => response.status,
        (error: unknown) => String(error),
      );
    await eventually(async () => (slowArrived > 0 ? true : undefined), 60_000, 'the action to reach the API');

    // Environment A holds the same integration and connection names; its rows must all survive.
    const othersBefore = await rowsOf(h.envA.id);
    expect(othersBefore['connections']).toBe(1);

    // The operator deletes the connection, then the environment: both are accepted.
    await racer.connections.delete({ connectionId: 'r1', providerConfigKey: INTEGRATION });
    const deleted = await eventually(
      () => h.admin.environments.delete(environment.id),
      60_000,
      'the environment delete to be accepted',
    );
    expect(deleted).toMatchObject({ deleted: true });
    expect(await rowsOf(environment.id)).toEqual({});
    expect(await rowsOf(h.envA.id)).toEqual(othersBefore);

    // The action's API call answers now; the run goes on to its end.
    releaseSlow();
    const status = await action;
    expect(status).toBe(200);

    // Outcome: nothing of the deleted environment is left, least of all its connection's key in clear.
    const leaked = await h.pool.query<{ message: string }>('SELECT message FROM script_logs WHERE message LIKE $1', [
      `%${RACER_KEY}%`,
    ]);
    expect({ rows: await rowsOf(environment.id), keyInClear: leaked.rows.map((row) => row.message) }).toEqual({
      rows: {},
      keyInClear: [],
    });
  }, 180_000);

  it('a sync save still in flight when its connection is deleted leaves no record for a new connection of the same id', async () => {
    const { environment, client: syncer } = await environmentWith(
      'syncer',
      `
    syncs:
      items:
        description: Items, saved after a slow call
        output: Item
        endpoint: GET /items
        sync_type: full
        runs: 1h
        auto_start: true
models:
  Item:
    id: string
    owner: string
`,
      { kind: 'sync', name: 'items', code: LATE_SAVER },
    );
    const ref = { connectionId: 's1', providerConfigKey: INTEGRATION };
    await syncer.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 's1',
      credentials: { type: 'API_KEY', apiKey: 'first-owner-key' },
    });
    await eventually(async () => (slowSyncArrived > 0 ? true : undefined), 60_000, 'the sync to reach the API');

    // Holds the save inside its activity, after the workflow scheduled it: a record write's first act
    // is its step-ledger row (no outcome; a request's row has one), which waits here on a lock the test
    // holds. No part of the connection delete writes that table.
    await h.pool.query(`CREATE OR REPLACE FUNCTION hold_record_save() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_advisory_xact_lock_shared(2727); RETURN NEW; END $$`);
    await h.pool.query(`CREATE TRIGGER hold_record_save BEFORE INSERT ON script_steps
      FOR EACH ROW WHEN (NEW.outcome IS NULL) EXECUTE FUNCTION hold_record_save()`);
    const locker = await h.pool.connect();
    try {
      await locker.query('SELECT pg_advisory_lock(2727)');
      releaseSync();
      await eventually(
        async () => {
          const { rows } = await h.pool.query<{ n: string }>(
            `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE '%records_save%'`,
          );
          return Number(rows[0]?.n) > 0 ? true : undefined;
        },
        60_000,
        'the save to wait',
      );
      // The end user disconnects: the delete stops the sync and erases its records.
      await syncer.connections.delete(ref);
    } finally {
      await locker.query('SELECT pg_advisory_unlock(2727)');
      locker.release();
      await h.pool.query('DROP TRIGGER IF EXISTS hold_record_save ON script_steps');
    }
    await eventually(
      async () => {
        const { rows } = await h.pool.query<{ n: string }>(
          `SELECT count(*) AS n FROM pg_stat_activity WHERE query ILIKE '%records_save%' AND state <> 'idle' AND pid <> pg_backend_pid()`,
        );
        return Number(rows[0]?.n) === 0 ? true : undefined;
      },
      60_000,
      'the held save to end',
    );

    // Another end user connects under the same id: none of the first one's data is theirs to read.
    await syncer.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 's1',
      credentials: { type: 'API_KEY', apiKey: 'second-owner-key' },
    });
    const page = await syncer.records.list({ ...ref, model: 'Item' });
    const scopes = await h.pool.query<{ n: string }>(
      'SELECT count(*) AS n FROM record_scopes WHERE environment_id = $1',
      [environment.id],
    );
    expect({ records: page.records.map((r) => r.id), scopes: Number(scopes.rows[0]?.n) }).toEqual({
      records: [],
      scopes: 0,
    });
  }, 180_000);
});
