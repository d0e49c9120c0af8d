/**
 * `service deploy` on the real stack: every row of SPEC.md "Effects of deploying a configuration", and
 * the deploy's own promises (atomic, versioned, serialised, re-deployable, readable back). The steps
 * build on each other, in order, over one environment.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import type { DeployRequest } from '../../src/deploy/deployments.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { json } from '../kit/upstream.js';

const ENDPOINT_PROBLEMS = fileURLToPath(new URL('../fixtures/configs/endpoint-problems.yaml', import.meta.url));

interface Ticket {
  id: string;
  title: string;
  version: string;
}

// The fake API: tickets and contacts that a test changes between runs.
const source = {
  tickets: [
    { id: 't1', title: 'first' },
    { id: 't2', title: 'second' },
  ],
  contacts: [
    { id: 'c1', name: 'Ada' },
    { id: 'c2', name: 'Grace' },
  ],
};

const yaml = (options: { runs?: string; withContacts?: boolean; withPing?: boolean; integration?: string } = {}) => `
integrations:
  ${options.integration ?? INTEGRATION}:
    syncs:
      tickets:
        description: Tickets, incrementally
        output: Ticket
        endpoint: GET /tickets
        sync_type: incremental
        runs: ${options.runs ?? '1h'}
${
  options.withContacts === false
    ? ''
    : `      contacts:
        description: Contacts, fully each run
        output: Contact
        endpoint: GET /contacts
        sync_type: full
        track_deletes: true
        auto_start: false
`
}${
  options.withPing === false
    ? ''
    : `    actions:
      ping:
        description: Answers pong
        output: Pong
        endpoint: POST /ping
`
}models:
  Ticket:
    id: string
    title: string
    version: string
  Contact:
    id: string
    name: string
    version: string
  Pong:
    pong: boolean
`;

const ticketsScript = (version: string) =>
  bundle(`async function (svc) {
  const res = await svc.get({ endpoint: '/tickets' });
  await svc.batchSave(res.data.map((t) => ({ ...t, version: '${version}' })), 'Ticket');
}`);
const contactsScript = (version: string) =>
  bundle(`async function (svc) {
  const res = await svc.get({ endpoint: '/contacts' });
  await svc.batchSave(res.data.map((c) => ({ ...c, version: '${version}' })), 'Contact');
}`);
const pingScript = bundle(`async function () { return { pong: true }; }`);

function request(
  options: Parameters<typeof yaml>[0] & { ticketsVersion?: string; contactsVersion?: string } = {},
): DeployRequest {
  const integration = options.integration ?? INTEGRATION;
  return {
    yaml: yaml(options),
    scripts: [
      {
        integration,
        kind: 'sync',
        name: 'tickets',
        code: ticketsScript(options.ticketsVersion ?? 'v1'),
        source: '// tickets.ts',
      },
      ...(options.withContacts === false
        ? []
        : [
            {
              integration,
              kind: 'sync' as const,
              name: 'contacts',
              code: contactsScript(options.contactsVersion ?? 'v1'),
              source: '// contacts.ts',
            },
          ]),
      ...(options.withPing === false
        ? []
        : [{ integration, kind: 'action' as const, name: 'ping', code: pingScript, source: '// ping.ts' }]),
    ],
  };
}

let h: ApiHarness;
const alice = { connectionId: 'alice', providerConfigKey: INTEGRATION };
const bob = { connectionId: 'bob', providerConfigKey: INTEGRATION };

async function tickets(connection = alice): Promise<Ticket[]> {
  const page = await h.api.records.list({ ...connection, model: 'Ticket' });
  return page.records as unknown as Ticket[];
}

async function status(sync: string, connection = alice) {
  const { syncs } = await h.api.syncs.status({
    provider_config_key: INTEGRATION,
    connection_id: connection.connectionId,
    syncs: [sync],
  });
  return syncs[0];
}

async function version(): Promise<number> {
  const { deployments } = await h.api.call<{ deployments: { version: number; status: string }[] }>(
    'GET',
    '/deployments',
  );
  return deployments.find((deployment) => deployment.status === 'active')?.version ?? 0;
}

beforeAll(async () => {
  h = await startApiHarness();
  h.fake.setHandler((req, res) => {
    if (req.url?.startsWith('/api/tickets')) return json(res, 200, source.tickets);
    if (req.url?.startsWith('/api/contacts')) return json(res, 200, source.contacts);
    return json(res, 404, { error: 'not found' });
  });
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.api.connections.import({
    connection_id: 'alice',
    provider_config_key: INTEGRATION,
    credentials: { type: 'API_KEY', apiKey: 'key-alice' },
  });
});

describe('service deploy: the effects of a deploy (SPEC.md)', () => {
  it('a sync added with auto_start starts for every connection; auto_start: false creates it paused', async () => {
    const { version: v1 } = await h.api.call<{ version: number }>('POST', '/deploy', { body: request() });
    expect(v1).toBe(1);
    const rows = await eventually(
      async () => ((await tickets()).length === 2 ? tickets() : undefined),
      60_000,
      'the tickets sync to run',
    );
    expect(rows.map((row) => [row.id, row.version])).toEqual([
      ['t1', 'v1'],
      ['t2', 'v1'],
    ]);
    expect((await status('contacts'))?.status).toBe('PAUSED');
  });

  it('a connection created after the deploy gets the auto-start syncs', async () => {
    await h.api.connections.import({
      connection_id: 'bob',
      provider_config_key: INTEGRATION,
      credentials: { type: 'API_KEY', apiKey: 'key-bob' },
    });
    const rows = await eventually(
      async () => ((await tickets(bob)).length === 2 ? tickets(bob) : undefined),
      60_000,
      'bob’s tickets',
    );
    expect(rows).toHaveLength(2);
  });

  it('a changed `runs` moves the schedule and keeps the sync and its records', async () => {
    const plan = await h.api.deploy.preview(request({ runs: '2h' }));
    expect(plan.changes.map((change) => change.description)).toEqual([
      expect.stringMatching(/~ sync fake-api\/tickets \(runs\)/),
    ]);
    await h.api.call('POST', '/deploy', { body: request({ runs: '2h' }) });
    await eventually(
      async () => ((await status('tickets'))?.frequency === '2h' ? true : undefined),
      30_000,
      'the new frequency',
    );
    expect(await tickets()).toHaveLength(2);
  });

  it('a changed script on an incremental sync: older records keep their content until a full resync refetches them', async () => {
    await h.api.call('POST', '/deploy', { body: request({ runs: '2h', ticketsVersion: 'v2' }) });
    // The API no longer lists t1 but lists a new t3: an incremental run upserts what it fetches, so
    // t1, fetched only by the old script, keeps its old content and stays readable.
    source.tickets = [
      { id: 't2', title: 'second' },
      { id: 't3', title: 'third' },
    ];
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'alice', syncs: ['tickets'] });
    await eventually(
      async () => ((await tickets()).filter((t) => t.version === 'v2').length === 2 ? true : undefined),
      60_000,
      'the incremental run with the new script',
    );
    expect((await tickets()).find((t) => t.id === 't1')?.version).toBe('v1');

    await h.api.syncs.trigger({
      provider_config_key: INTEGRATION,
      connection_id: 'alice',
      syncs: ['tickets'],
      sync_mode: 'full_refresh_and_clear_cache',
    });
    const after = await eventually(
      async () => {
        const rows = await tickets();
        return rows.length === 2 && rows.every((t) => t.version === 'v2') ? rows : undefined;
      },
      60_000,
      'the full resync',
    );
    expect(after.map((t) => t.id)).toEqual(['t2', 't3']);
  });

  it('a changed script on a full sync applies to all records from the next run', async () => {
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'alice', syncs: ['contacts'] });
    const contacts = async () =>
      (await h.api.records.list({ ...alice, model: 'Contact' })).records as unknown as Ticket[];
    await eventually(async () => ((await contacts()).length === 2 ? true : undefined), 60_000, 'the contacts run');
    await h.api.call('POST', '/deploy', { body: request({ runs: '2h', ticketsVersion: 'v2', contactsVersion: 'v2' }) });
    await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'alice', syncs: ['contacts'] });
    const rows = await eventually(
      async () => {
        const all = await contacts();
        return all.length === 2 && all.every((c) => c.version === 'v2') ? all : undefined;
      },
      60_000,
      'contacts rewritten by the new script',
    );
    expect(rows).toHaveLength(2);
  });

  it('removing an action needs consent; afterwards any request that triggers it fails', async () => {
    expect((await h.api.actions.trigger(alice, { action_name: 'ping', input: {} })).ok).toBe(true);
    const before = await version();
    const refused = await h.api.raw('POST', '/deploy', {
      body: request({ runs: '2h', ticketsVersion: 'v2', contactsVersion: 'v2', withPing: false }),
    });
    expect(refused.status).toBe(409);
    expect((refused.json as { error: { code: string } }).error.code).toBe('destructive_change_not_confirmed');
    expect(await version()).toBe(before);
    expect((await h.api.actions.trigger(alice, { action_name: 'ping', input: {} })).ok).toBe(true);

    await h.api.call('POST', '/deploy', {
      body: request({ runs: '2h', ticketsVersion: 'v2', contactsVersion: 'v2', withPing: false }),
      query: { allow_destructive: true },
    });
    const gone = await h.api.raw('POST', '/action/trigger', {
      connection: alice,
      body: { action_name: 'ping', input: {} },
    });
    expect(gone.status).toBe(404);
    expect((gone.json as { error: { code: string; message: string } }).error).toMatchObject({
      code: 'action_not_found',
    });
  });

  it('removing a sync stops it and erases all its cached records, for every connection', async () => {
    const plan = await h.api.deploy.preview(
      request({ runs: '2h', ticketsVersion: 'v2', withPing: false, withContacts: false }),
    );
    expect(plan.destructive).toBe(true);
    expect(plan.changes[0]).toMatchObject({ recordsErased: 2, connections: 2 });
    await h.api.call('POST', '/deploy', {
      body: request({ runs: '2h', ticketsVersion: 'v2', withPing: false, withContacts: false }),
      query: { allow_destructive: true },
    });
    // The model is no longer served, and its records are gone from the cache, not only hidden.
    const served = await h.api.raw('GET', '/records', { connection: alice, query: { model: 'Contact' } });
    expect(served.status).toBe(404);
    expect(
      await h.deps.records.countRecords({
        environmentId: h.envA.id,
        integrationId: INTEGRATION,
        connectionId: 'alice',
        model: 'Contact',
        includeDeleted: true,
      }),
    ).toBe(0);
    const removed = await h.api.raw('GET', '/sync/status', {
      query: { provider_config_key: INTEGRATION, connection_id: 'alice', syncs: 'contacts' },
    });
    expect(removed.status).toBe(404);
    expect(await tickets()).toHaveLength(2);
  });

  it('a changed integration id removes the syncs of the old id, with their records', async () => {
    const renamed = request({ integration: 'fake-api-v2', withPing: false, withContacts: false });
    const plan = await h.api.deploy.preview(renamed);
    expect(plan.changes.map((planned) => planned.change['kind'])).toEqual(['sync_added', 'sync_removed']);
    await h.api.call('POST', '/deploy', { body: renamed, query: { allow_destructive: true } });
    for (const connectionId of ['alice', 'bob']) {
      const count = await h.deps.records.countRecords({
        environmentId: h.envA.id,
        integrationId: INTEGRATION,
        connectionId,
        model: 'Ticket',
        includeDeleted: true,
      });
      expect(count).toBe(0);
    }
  });

  it('a failed deploy changes nothing, and says what is wrong and where', async () => {
    const before = await version();
    const broken = await h.api.raw('POST', '/deploy', {
      body: { yaml: 'integrations:\n  x:\n    syncs:\n      s:\n        output: Nope\n', scripts: [] },
    });
    expect(broken.status).toBe(422);
    const error = (broken.json as { error: { code: string; message: string } }).error;
    expect(error.code).toBe('invalid_config');
    expect(error.message).toMatch(/service\.yaml:\d+:\d+/);
    // Generated endpoints that collide are problems of the file too, placed like the others.
    const shadowed = await h.api.raw('POST', '/deploy', {
      body: { yaml: readFileSync(ENDPOINT_PROBLEMS, 'utf8'), scripts: [] },
    });
    expect(shadowed.status).toBe(422);
    const shadowedMessage = (shadowed.json as { error: { message: string } }).error.message;
    expect(shadowedMessage).toContain('service.yaml:13:19 error generated_endpoint_shadows_builtin');
    expect(shadowedMessage).toContain('service.yaml:19:19 error generated_endpoint_conflict');
    const mismatched = await h.api.raw('POST', '/deploy', { body: { ...request(), scripts: [] } });
    expect(mismatched.status).toBe(422);
    expect((mismatched.json as { error: { message: string } }).error.message).toMatch(/missing; run `service compile`/);
    expect(await version()).toBe(before);
  });

  it('deploys at once are serialised: each gets its own version, in order', async () => {
    const before = await version();
    const results = await Promise.all(
      [1, 2, 3].map(() =>
        h.api.call<{ version: number }>('POST', '/deploy', { body: request(), query: { allow_destructive: true } }),
      ),
    );
    expect(results.map((result) => result.version).sort((x, y) => x - y)).toEqual([before + 1, before + 2, before + 3]);
    expect(await version()).toBe(before + 3);
  });

  it('an earlier version can be deployed again, and the deployed source of every script read back', async () => {
    const current = await version();
    const { version: again } = await h.api.call<{ version: number }>('POST', '/deployments/1/redeploy', {
      query: { allow_destructive: true },
    });
    expect(again).toBe(current + 1);
    const deployed = await h.api.call<{
      redeployOf: number;
      yaml: string;
      scripts: { name: string; source: string; hash: string }[];
    }>('GET', `/deployments/${again}`);
    expect(deployed.redeployOf).toBe(1);
    expect(deployed.yaml).toBe(request().yaml);
    expect(deployed.scripts.map((script) => [script.name, script.source])).toEqual([
      ['tickets', '// tickets.ts'],
      ['contacts', '// contacts.ts'],
      ['ping', '// ping.ts'],
    ]);
  });
});
