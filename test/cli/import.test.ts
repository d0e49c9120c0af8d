/**
 * `service import` end to end, as a migrating user runs it: the fixture project written for the
 * de-facto product (test/fixtures/nango-integrations: `runs: every half hour`, scopes as one string,
 * `__extends: A,B`, `field: []`, a bare path endpoint, the `{ method, path, group }` form, a list and a
 * primitive as an action's input and output, `version:` keys, a sync without `sync_type`) is imported,
 * validated, compiled and deployed by the CLI to a real service (API, Postgres, Temporal, the fake
 * external API on loopback); its syncs run and store the records, its actions answer through their
 * generated endpoints, and the OpenAPI document shows the endpoints as the config declares them.
 */
import { cpSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { runLocalCli } from './localCli.js';
import { eventually } from '../helpers/eventually.js';
import { json } from '../kit/upstream.js';
import { PROVIDER } from '../kit/fixtures.js';

const FIXTURE = fileURLToPath(new URL('../fixtures/nango-integrations', import.meta.url));
const INTEGRATION = 'tracker';
const API_KEY = 'key-of-connection-t1-0123456789';
const connection = { connectionId: 't1', providerConfigKey: INTEGRATION };

let h: ApiHarness;
let work: string;
let root: string;
let imported: { code: number; out: string; err: string };
const closed: unknown[] = [];

const ticket = (id: number) => ({
  id,
  subject: `Ticket ${id}`,
  state: id % 2 === 0 ? 'pending' : 'open',
  tags: ['billing'],
  files: [{ name: `f${id}.pdf` }],
  custom: { plan: 'pro' },
  assignee: id === 1 ? { id: 7, name: 'Ada' } : null,
  created_at: '2026-01-01T00:00:00Z',
  updated_at: null,
});

beforeAll(async () => {
  h = await startApiHarness();
  work = mkdtempSync(join(tmpdir(), 'service-import-stack-'));
  cpSync(FIXTURE, join(work, 'nango-integrations'), { recursive: true });
  root = join(work, 'app');
  mkdirSync(root);
  h.fake.setHandler((request, response, body) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (request.headers.authorization !== `Bearer ${API_KEY}`) return json(response, 401, { error: 'no key' });
    if (request.method === 'GET' && url.pathname === '/api/tickets') {
      const page = Number(url.searchParams.get('page'));
      return json(response, 200, page === 1 ? [ticket(1), ticket(2)] : page === 2 ? [ticket(3)] : []);
    }
    if (request.method === 'GET' && url.pathname === '/api/agents') {
      return json(response, 200, [
        { id: 7, name: 'Ada', email: 'ada@example.com', team: 'support', since: '2025-05-01' },
      ]);
    }
    if (request.method === 'POST' && url.pathname === '/api/tickets/close') {
      const ids = (JSON.parse(body) as { ids: string[] }).ids;
      closed.push(...ids);
      return json(response, 200, { closed: ids.length });
    }
    const one = /^\/api\/tickets\/(\w+)$/.exec(url.pathname);
    if (request.method === 'GET' && one) {
      return json(response, 200, one[1] === '3' ? { id: 3, subject: 'Ticket 3' } : null);
    }
    return json(response, 404, { error: 'not found' });
  });
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  imported = await runLocalCli(h, root, ['import', '../nango-integrations']);
}, 180_000);
afterAll(() => rmSync(work, { recursive: true, force: true }));

describe('a project of the de-facto format, imported, deployed and run', () => {
  it('imports with every change printed and nothing left unconverted', () => {
    expect(imported.err).toBe('');
    expect(imported.code).toBe(0);
    expect(imported.out).toContain("tracker/syncs/agents: added 'sync_type: full'");
    expect(imported.out).toContain('tracker/syncs/tickets.ts: NangoSync → ServiceSync');
    expect(imported.out).toContain('4 script(s) compile.');
  });

  it('validates and deploys with the CLI; the syncs run and store the records of the extended models', async () => {
    const validated = await runLocalCli(h, root, ['validate']);
    expect(validated.code).toBe(0);
    expect(validated.out).toContain('1 integration(s), 2 sync(s), 2 action(s), 5 model(s)');
    const deployed = await runLocalCli(h, root, ['deploy', '--yes']);
    expect(deployed.err).toBe('');
    expect(deployed.code).toBe(0);
    await h.api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: connection.connectionId,
      credentials: { type: 'API_KEY', apiKey: API_KEY },
    });

    const tickets = await eventually(
      async () => {
        const page = await h.api.records.list({ ...connection, model: 'Ticket' });
        if (page.records.length < 3) throw new Error(`${page.records.length} ticket(s) so far`);
        return page.records;
      },
      90_000,
      "the sync's records",
    );
    const first = tickets.find((record) => record['id'] === '1');
    expect(first).toMatchObject({
      id: '1',
      subject: 'Ticket 1',
      status: 'open',
      labels: ['billing'],
      attachments: [{ name: 'f1.pdf' }],
      extra: { plan: 'pro' },
      created_at: '2026-01-01T00:00:00Z',
      updated_at: null,
      assignee: { id: '7', name: 'Ada', team: { name: 'support' } },
    });
    const agents = await eventually(
      async () => {
        const page = await h.api.records.list({ ...connection, model: 'Agent' });
        if (page.records.length < 1) throw new Error('no agent yet');
        return page.records;
      },
      90_000,
      "the sync's records",
    );
    expect(agents[0]).toMatchObject({ id: '7', name: 'Ada', email: 'ada@example.com', team: { name: 'support' } });

    // The sync's generated endpoint (the mapping form) serves the same records.
    const generated = await h.api.generated.records(connection, 'GET', '/tickets');
    expect(generated.records.map((record) => record['id']).sort()).toEqual(['1', '2', '3']);
    // `every half hour` and the sync_type import added.
    const { syncs } = await h.api.syncs.status({
      provider_config_key: INTEGRATION,
      connection_id: connection.connectionId,
      syncs: '*',
    });
    expect(syncs.map((s) => [s.name, s.sync_type, s.frequency, s.frequencyMs]).sort()).toEqual([
      ['agents', 'full', 'every day', 86_400_000],
      ['tickets', 'incremental', 'every half hour', 1_800_000],
    ]);
  }, 180_000);

  it('runs the actions through their generated endpoints: a list in, a boolean out; a model or null out', async () => {
    const headers = {
      authorization: `Bearer ${h.envA.secretKey}`,
      'content-type': 'application/json',
      'connection-id': connection.connectionId,
      'provider-config-key': INTEGRATION,
    };
    // `endpoint: /tickets/close` without a method: POST, as the format reads it.
    const close = await fetch(`${h.baseUrl}/tickets/close`, {
      method: 'POST',
      headers,
      body: JSON.stringify([{ id: '1' }, { id: '2' }]),
    });
    expect(close.status).toBe(200);
    expect(await close.json()).toBe(true);
    expect(closed).toEqual(['1', '2']);
    // ActionError of the script: the error body of SPEC's Errors part.
    const empty = await fetch(`${h.baseUrl}/tickets/close`, { method: 'POST', headers, body: '[]' });
    expect(await empty.json()).toMatchObject({
      error_type: 'action_script_failure',
      payload: { message: 'give at least one ticket' },
    });
    // `{ path, group }` without a method: POST.
    const found = await h.api.generated.action(connection, 'POST', '/tickets/find', { id: '3' });
    expect(found).toMatchObject({ ok: true, output: { id: '3', subject: 'Ticket 3', status: 'open' } });
    expect(await h.api.generated.action(connection, 'POST', '/tickets/find', { id: '9' })).toEqual({
      ok: true,
      output: null,
    });
  }, 120_000);

  it('documents the generated endpoints in OpenAPI with their groups, input and output types', async () => {
    const document = (await h.api.openapi()) as {
      paths: Record<string, Record<string, Record<string, unknown>>>;
    };
    const tickets = document.paths['/tickets']?.['get'];
    expect(tickets?.['tags']).toEqual(['Tickets']);
    const close = document.paths['/tickets/close']?.['post'];
    expect(close?.['tags']).toEqual(['generated']);
    expect(JSON.stringify(close?.['requestBody'])).toContain(
      '{"type":"array","items":{"$ref":"#/components/schemas/TicketRef"}}',
    );
    expect(JSON.stringify(close?.['responses'])).toContain('"schema":{"type":"boolean"}');
    const find = document.paths['/tickets/find']?.['post'];
    expect(find?.['tags']).toEqual(['Tickets']);
    expect(JSON.stringify(find?.['responses'])).toContain(
      '"schema":{"anyOf":[{"$ref":"#/components/schemas/Ticket"},{"type":"null"}]}',
    );
  });
});
