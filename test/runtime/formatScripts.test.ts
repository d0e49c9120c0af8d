/**
 * Scripts written the way the field's de-facto format writes them (issue 30), compiled by `service
 * compile` and run on the real stack against a fake API on loopback: relative helpers, mappers and
 * types, a zod schema in zod 3's syntax, `crypto` and `Buffer`, paginate configs in the format's
 * snake_case keys (cursor, link with `on_page`, offset by page, a POST walk with its parameters in the
 * body) and one relying on the provider's default pagination, `nango.ActionError`, `proxy`,
 * `zodValidateInput`, `getWebhookURL`, `getIntegration`, `provider`, `getFieldMapping`, `getToken`, the format's
 * `getConnection` and four-argument `triggerAction`. And a helper module that touches a global leaks
 * into no other run.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createHmac } from 'node:crypto';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileProject } from '../../src/cli/compile.js';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, executeSync, syncDefinition, useRuntime, type RuntimeHarness } from '../kit/runtime.js';
import { json, startFakeUpstream } from '../kit/upstream.js';
import { ENVIRONMENT, INTEGRATION } from '../kit/testConnections.js';

// Written out by the test: the scripts import the models.ts that `service compile` generates.
const PROJECT: Record<string, string> = {
  'service.yaml': `integrations:
  fake-api:
    syncs:
      contacts:
        description: Contacts, a cursor walk in the format's keys, mapped by a helper.
        output: Contact
        endpoint: GET /contacts
        sync_type: full
      deals:
        description: Deals, paged by the provider's default pagination.
        output: Deal
        endpoint: GET /deals
        sync_type: full
      tickets:
        description: Tickets, a Link-header walk with on_page, then a POST search paged in the body.
        output: Ticket
        endpoint: GET /tickets
        sync_type: full
      pages:
        description: Pages numbered from 1.
        output: Ticket
        endpoint: GET /pages
        sync_type: full
      counter:
        description: A helper module that keeps state and touches a global.
        output: Counter
        endpoint: GET /counters
        sync_type: full
    actions:
      create-contact:
        description: Creates a contact after checking its input with zod.
        input: CreateContact
        output: Contact
        endpoint: POST /contacts
      whoami:
        description: What the run knows of its connection and integration.
        output: WhoAmI
        endpoint: GET /whoami
models:
  Contact:
    id: string
    name: string
    email: string | null
    signature: string
  Deal:
    id: string
    amount: number
  Ticket:
    id: string
    subject: string
  Counter:
    id: string
    moduleCount: number
    globalCount: number
  CreateContact:
    name: string
    email: string
  WhoAmI:
    connection: string
    token: string
    webhook: string
    provider: string
    ownProvider: string
    mapping: string
    echoed: string
`,
  'fake-api/types.ts': `export interface ApiContact {
    id: number;
    properties: { firstname: string; lastname: string; email?: string };
}
`,
  'fake-api/helpers/sign.ts': `import crypto from 'crypto';

export function signature(text: string): string {
    return crypto.createHmac('sha256', 'shared-secret').update(text).digest('hex');
}

export function basic(user: string, password: string): string {
    return 'Basic ' + Buffer.from(user + ':' + password).toString('base64');
}
`,
  'fake-api/mappers/to-contact.ts': `import type { Contact } from '../../models';
import type { ApiContact } from '../types';
import { signature } from '../helpers/sign.js';

export function toContact(contact: ApiContact): Contact {
    const name = contact.properties.firstname + ' ' + contact.properties.lastname;
    return { id: String(contact.id), name, email: contact.properties.email ?? null, signature: signature(name) };
}
`,
  'fake-api/schema.zod.ts': `import { z } from 'zod';

export const createContactSchema = z.object({
    name: z.string().min(1),
    email: z.string().email(),
    extra: z.record(z.any()).optional()
});
`,
  'fake-api/helpers/state.ts': `let loaded = 0;
loaded++;
const world = globalThis as unknown as { seen?: number };
world.seen = (world.seen ?? 0) + 1;

export function counts(): { moduleCount: number; globalCount: number } {
    return { moduleCount: loaded, globalCount: world.seen ?? 0 };
}
`,
  'fake-api/syncs/contacts.ts': `import type { ServiceSync, ProxyConfiguration } from '../../models';
import { toContact } from '../mappers/to-contact.js';
import type { ApiContact } from '../types.js';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    const config: ProxyConfiguration = {
        endpoint: '/crm/contacts',
        params: { archived: 'false' },
        paginate: {
            type: 'cursor',
            cursor_name_in_request: 'after',
            cursor_path_in_response: 'paging.next.after',
            response_path: 'results',
            limit_name_in_request: 'limit',
            limit: 2
        }
    };
    for await (const page of nango.paginate<ApiContact>(config)) {
        await nango.batchSave(page.map(toContact), 'Contact');
    }
}
`,
  'fake-api/syncs/deals.ts': `import type { ServiceSync } from '../../models';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    // No type: the provider's default pagination, with this page size.
    for await (const deals of nango.paginate({ endpoint: '/deals', paginate: { limit: 2 } })) {
        await nango.batchSave(deals.map((deal: { id: number; amount: string }) => ({ id: String(deal.id), amount: Number(deal.amount) })), 'Deal');
    }
}
`,
  'fake-api/syncs/tickets.ts': `import type { ServiceSync } from '../../models';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    const seen: string[] = [];
    for await (const tickets of nango.paginate<{ id: string; subject: string }>({
        endpoint: '/tickets',
        paginate: {
            type: 'link',
            link_rel_in_response_header: 'next',
            response_path: 'tickets',
            on_page: async ({ nextPageParam, response }) => {
                seen.push(String(nextPageParam) + ' after ' + String(response.status));
            }
        }
    })) {
        await nango.batchSave(tickets, 'Ticket');
    }
    for await (const found of nango.paginate({
        endpoint: '/tickets/search',
        method: 'POST',
        data: { query: { status: 'open' } },
        paginate: { type: 'offset', offset_name_in_request: 'page.offset', limit_name_in_request: 'page.size', limit: 2, response_path: 'hits' }
    })) {
        await nango.batchSave(found, 'Ticket');
    }
    await nango.log('pages', { seen });
}
`,
  'fake-api/syncs/pages.ts': `import type { ServiceSync } from '../../models';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    for await (const tickets of nango.paginate({
        // The format's \`nango.provider\`, as a template picks its sandbox host with it.
        endpoint: nango.provider === 'fake-api' ? '/pages' : '/not-this-provider',
        paginate: { type: 'offset', offset_name_in_request: 'page', offset_start_value: 1, offset_calculation_method: 'per-page', response_path: 'data' }
    })) {
        await nango.batchSave(tickets, 'Ticket');
    }
}
`,
  'fake-api/syncs/counter.ts': `import type { ServiceSync } from '../../models';
import { counts } from '../helpers/state.js';

export default async function fetchData(nango: ServiceSync): Promise<void> {
    await nango.batchSave([{ id: nango.connectionId, ...counts() }], 'Counter');
}
`,
  'fake-api/actions/create-contact.ts': `import type { ServiceAction, Contact, CreateContact } from '../../models';
import { createContactSchema } from '../schema.zod.js';
import { toContact } from '../mappers/to-contact.js';
import { basic } from '../helpers/sign.js';

export default async function runAction(nango: ServiceAction, input: CreateContact): Promise<Contact> {
    const parsed = await nango.zodValidateInput({ zodSchema: createContactSchema, input });
    if (parsed.data.name === 'Locked') {
        throw new nango.ActionError({ message: 'this contact is locked', name: parsed.data.name });
    }
    const [firstname, lastname] = parsed.data.name.split(' ');
    const response = await nango.proxy({
        method: 'POST',
        endpoint: '/crm/contacts',
        headers: { 'x-basic': basic('bot', 'pw') },
        data: { properties: { firstname, lastname, email: parsed.data.email } }
    });
    if (response.status !== 201 || response.statusText !== 'Created') {
        throw new nango.ActionError({ message: \`unexpected \${response.status} \${response.statusText}\` });
    }
    return toContact(response.data);
}
`,
  'fake-api/actions/whoami.ts': `import type { ServiceAction, WhoAmI } from '../../models';

export default async function runAction(nango: ServiceAction): Promise<WhoAmI> {
    const connection = await nango.getConnection(nango.providerConfigKey, nango.connectionId, { refreshToken: false });
    const token = await nango.getToken();
    const integration = await nango.getIntegration();
    const mapping = await nango.getFieldMapping();
    const echoed = await nango.triggerAction<{ text: string }, { text: string }>(nango.providerConfigKey, nango.connectionId, 'echo', { text: 'hi' });
    return {
        connection: connection.connection_id,
        token: typeof token === 'string' ? token : JSON.stringify(token),
        webhook: String(await nango.getWebhookURL()),
        provider: integration.provider,
        ownProvider: String(nango.provider),
        mapping: JSON.stringify(mapping),
        echoed: echoed.text
    };
}
`,
};

const CONTACTS = [
  { id: 1, properties: { firstname: 'Ada', lastname: 'Lovelace', email: 'ada@example.com' } },
  { id: 2, properties: { firstname: 'Alan', lastname: 'Turing' } },
  { id: 3, properties: { firstname: 'Grace', lastname: 'Hopper', email: 'grace@example.com' } },
];
const TICKETS = ['t1', 't2', 't3'].map((id) => ({ id, subject: `subject ${id}` }));
const HITS = ['s1', 's2', 's3'].map((id) => ({ id, subject: `found ${id}` }));

const sign = (text: string): string => createHmac('sha256', 'shared-secret').update(text).digest('hex');

describe('scripts in the format of the field, compiled and run', () => {
  let h: RuntimeHarness;
  let root: string;
  const requests: { method: string; url: string; body: string; headers: Record<string, unknown> }[] = [];
  const built = new Map<string, string>();

  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'format-scripts-'));
    for (const [file, content] of Object.entries(PROJECT)) {
      const path = join(root, 'service-integrations', file);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, content);
    }
    const compiled = await compileProject({ root });
    expect(compiled.problems.filter((problem) => problem.severity === 'error')).toEqual([]);
    for (const script of compiled.manifest!.scripts) {
      built.set(
        `${script.kind}/${script.name}`,
        readFileSync(join(root, 'service-integrations', 'build', script.file), 'utf8'),
      );
    }

    h = await useRuntime();
    const api = await startFakeUpstream((request, response, body) => {
      requests.push({ method: request.method ?? '', url: request.url ?? '', body, headers: request.headers });
      const url = new URL(request.url ?? '/', 'http://x');
      const param = (name: string): string | null => url.searchParams.get(name);
      switch (`${request.method} ${url.pathname}`) {
        case 'GET /crm/contacts': {
          const start = param('after') === null ? 0 : Number(param('after'));
          const page = CONTACTS.slice(start, start + Number(param('limit')));
          const next = start + page.length < CONTACTS.length ? { next: { after: String(start + page.length) } } : {};
          return json(response, 200, { results: page, paging: next });
        }
        case 'POST /crm/contacts': {
          const created = JSON.parse(body) as { properties: object };
          return json(response, 201, { id: 99, properties: created.properties });
        }
        case 'GET /deals': {
          const cursor = Number(param('cursor') ?? '0');
          const deals = [
            { id: 1, amount: '10' },
            { id: 2, amount: '20' },
            { id: 3, amount: '30' },
          ].slice(cursor, cursor + Number(param('per_page')));
          return json(response, 200, { data: deals, meta: { next: cursor + 2 < 3 ? String(cursor + 2) : '' } });
        }
        case 'GET /tickets': {
          const page = Number(param('page') ?? '1');
          const link = page < 3 ? { link: `<${api.url}/tickets?page=${page + 1}>; rel="next"` } : {};
          return json(response, 200, { tickets: [TICKETS[page - 1]] }, link);
        }
        case 'POST /tickets/search': {
          const { page } = JSON.parse(body) as { page: { offset: number; size: number } };
          return json(response, 200, { hits: HITS.slice(page.offset, page.offset + page.size) });
        }
        case 'GET /pages': {
          const page = Number(param('page'));
          return json(response, 200, { data: page <= 2 ? [{ id: `p${page}`, subject: `page ${page}` }] : [] });
        }
        case 'GET /echo':
          return json(response, 200, { text: param('text') });
        default:
          return json(response, 404, { error: 'not found' });
      }
    });
    h.connections.setBaseUrl(api.url);
  }, 240_000);

  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const records = async (model: string, connectionId = 'format') => {
    const page = await createPostgresRecordStore({ db: h.pool }).listRecords({
      environmentId: ENVIRONMENT,
      integrationId: INTEGRATION,
      connectionId,
      model,
    });
    return page.records.map(({ _service_metadata: _metadata, ...record }) => record);
  };
  const sync = async (name: string, models: string[], connectionId = 'format') => {
    const scriptHash = await h.scripts.put(built.get(`sync/${name}`)!);
    return executeSync(h, {
      definition: syncDefinition({ syncName: name, models, scriptHash, syncType: 'full' }),
      connectionId,
      mode: 'incremental',
    });
  };
  const since = (): number => requests.length;

  it('a cursor walk in snake_case keys, mapped by a relative helper that signs with crypto', async () => {
    const from = since();
    const { result } = await sync('contacts', ['Contact']);
    expect(result.models['Contact']?.added).toBe(3);
    expect(requests.slice(from).map((r) => r.url)).toEqual([
      '/crm/contacts?archived=false&limit=2',
      '/crm/contacts?archived=false&limit=2&after=2',
    ]);
    expect(await records('Contact')).toEqual([
      { id: '1', name: 'Ada Lovelace', email: 'ada@example.com', signature: sign('Ada Lovelace') },
      { id: '2', name: 'Alan Turing', email: null, signature: sign('Alan Turing') },
      { id: '3', name: 'Grace Hopper', email: 'grace@example.com', signature: sign('Grace Hopper') },
    ]);
  }, 120_000);

  it("paginate without a type walks the provider's default pagination, the script's page size over it", async () => {
    h.connections.pagination = {
      type: 'cursor',
      cursor_name_in_request: 'cursor',
      cursor_path_in_response: 'meta.next',
      response_path: 'data',
      limit_name_in_request: 'per_page',
      limit: 100,
    };
    try {
      const from = since();
      const { result } = await sync('deals', ['Deal']);
      expect(result.models['Deal']?.added).toBe(3);
      expect(requests.slice(from).map((r) => r.url)).toEqual(['/deals?per_page=2', '/deals?per_page=2&cursor=2']);
    } finally {
      h.connections.pagination = undefined;
    }
    // Without a provider default, the same script is refused before any request, naming what is missing.
    const from = since();
    const failed = await sync('deals', ['Deal'], 'format-no-default').catch((error: unknown) => error);
    expect(String((failed as { cause?: { message?: string } }).cause?.message)).toMatch(
      /paginate\.type is missing and the provider of fake-api has no default pagination/,
    );
    expect((failed as { cause?: { type?: string } }).cause?.type).toBe('invalid_pagination');
    expect(requests).toHaveLength(from);
  }, 120_000);

  it('a Link-header walk calls on_page before each next page; a POST walk carries its offset in the body', async () => {
    const from = since();
    const { workflowId, result } = await sync('tickets', ['Ticket']);
    expect(result.models['Ticket']?.added).toBe(6);
    const sent = requests.slice(from);
    expect(sent.map((r) => `${r.method} ${r.url}`)).toEqual([
      'GET /tickets',
      'GET /tickets?page=2',
      'GET /tickets?page=3',
      'POST /tickets/search',
      'POST /tickets/search',
    ]);
    expect(sent.slice(3).map((r) => JSON.parse(r.body) as unknown)).toEqual([
      { query: { status: 'open' }, page: { size: 2, offset: 0 } },
      { query: { status: 'open' }, page: { size: 2, offset: 2 } },
    ]);
    const logs = await h.pool.query<{ message: string }>('SELECT message FROM script_logs WHERE run_id = $1', [
      workflowId,
    ]);
    const line = logs.rows.find((row) => row.message.startsWith('pages '))?.message ?? '';
    const seen = (JSON.parse(line.slice('pages '.length)) as { seen: string[] }).seen;
    expect(seen).toHaveLength(3);
    expect(seen[0]).toMatch(/\/tickets\?page=2 after 200$/);
    expect(seen[2]).toBe('undefined after 200');
  }, 120_000);

  it('offset by page from 1 (per-page) ends on an empty page', async () => {
    const from = since();
    const { result } = await sync('pages', ['Ticket'], 'format-pages');
    expect(result.models['Ticket']?.added).toBe(2);
    expect(requests.slice(from).map((r) => r.url)).toEqual(['/pages?page=1', '/pages?page=2', '/pages?page=3']);
  }, 120_000);

  it('an action: zodValidateInput (zod 3 syntax), nango.ActionError, proxy with a method and a Buffer header, statusText', async () => {
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const create = actionDefinition('create-contact', await h.scripts.put(built.get('action/create-contact')!));
    const from = since();
    expect(
      await control.runAction({
        definition: create,
        connectionId: 'format',
        input: { name: 'Ada Byron', email: 'ada@example.com' },
      }),
    ).toEqual({
      ok: true,
      output: { id: '99', name: 'Ada Byron', email: 'ada@example.com', signature: sign('Ada Byron') },
    });
    expect(requests.slice(from).map((r) => [r.method, r.url, r.headers['x-basic']])).toEqual([
      ['POST', '/crm/contacts', `Basic ${Buffer.from('bot:pw').toString('base64')}`],
    ]);
    expect(
      await control.runAction({
        definition: create,
        connectionId: 'format',
        input: { name: 'Locked', email: 'l@example.com' },
      }),
    ).toEqual({
      ok: false,
      body: { error_type: 'action_script_failure', payload: { message: 'this contact is locked', name: 'Locked' } },
    });
    // An input zod refuses: the format's answer, and the problem in the run's logs.
    expect(
      await control.runAction({
        definition: create,
        connectionId: 'format',
        input: { name: '', email: 'not an email' },
      }),
    ).toEqual({
      ok: false,
      body: { error_type: 'action_script_failure', payload: { message: 'Invalid input provided' } },
    });
    expect(requests).toHaveLength(from + 1);
  }, 120_000);

  it("the connection, token, integration, webhook URL and field mapping; triggerAction in the format's four-argument form", async () => {
    h.connections.metadata.set('format', { fieldMapping: { name: 'full_name' } });
    const echo = actionDefinition(
      'echo',
      await h.scripts.put(
        `"use strict";\nmodule.exports.default = async function (svc, input) { return (await svc.get({ endpoint: '/echo', params: { text: input.text } })).data; };\n`,
      ),
    );
    h.actions.set('echo', echo);
    const whoami = actionDefinition('whoami', await h.scripts.put(built.get('action/whoami')!));
    // Loaded by the run's own step, and by the API that hands small bundles over (not this one: it
    // reads `provider`, which its run's step looks up).
    for (const control of [
      createSyncControl({ client: h.client, taskQueue: h.taskQueue }),
      createSyncControl({ client: h.client, taskQueue: h.taskQueue, scripts: h.scripts }),
    ]) {
      expect(await control.runAction({ definition: whoami, connectionId: 'format', input: {} })).toEqual({
        ok: true,
        output: {
          connection: 'format',
          token: JSON.stringify({ type: 'API_KEY', apiKey: 'secret-key' }),
          webhook: `http://127.0.0.1:3003/webhook/${ENVIRONMENT}/${INTEGRATION}`,
          provider: 'fake-api',
          ownProvider: 'fake-api',
          mapping: JSON.stringify({ name: 'full_name' }),
          echoed: 'hi',
        },
      });
    }
  }, 120_000);

  it('a helper module that touches a global leaks into no other run, however many run', async () => {
    const runs = await Promise.all(['c1', 'c2', 'c3'].map((connection) => sync('counter', ['Counter'], connection)));
    expect(runs.map((run) => run.result.models['Counter']?.added)).toEqual([1, 1, 1]);
    await sync('counter', ['Counter'], 'c1');
    for (const connection of ['c1', 'c2', 'c3']) {
      expect(await records('Counter', connection)).toEqual([{ id: connection, moduleCount: 1, globalCount: 1 }]);
    }
  }, 120_000);
});
