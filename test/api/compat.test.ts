/**
 * Contract tests: the REST API answers the calls of the field's de-facto REST API as its published
 * Node client (0.71.x) sends them, in the documented wire formats. Each request below is built the way
 * that client builds it (method, path, query parameter names and encoding, body, headers, including
 * its flag headers and its empty `Base-Url-Override`); each answer is checked against a schema written
 * from the de-facto API reference (its OpenAPI document and published types). Where this service
 * differs by design, the schema says so and docs/api.md "Compatibility" gives the reason. Nothing of
 * the other product's code or packages is used.
 */
import { createHmac } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { deployRequest, INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

// ---- The documented wire formats ---------------------------------------------------------------

const isoInstant = z.string().refine((value) => !Number.isNaN(Date.parse(value)), 'an ISO 8601 instant');

/** The error envelope of every error answer (`StdError`): `{ error: { code, message?, errors? } }`, nothing else. */
const stdError = z
  .object({
    error: z
      .object({ code: z.string().min(1), message: z.string().optional(), errors: z.array(z.object({})).optional() })
      .strict(),
  })
  .strict();

const integration = z.object({
  unique_key: z.string(),
  display_name: z.string(),
  provider: z.string(),
  created_at: isoInstant,
  updated_at: isoInstant,
  logo: z.string().optional(),
  forward_webhooks: z.boolean().optional(),
});
const integrationFull = integration.extend({
  webhook_url: z.string().nullable().optional(),
  credentials: z
    .object({
      type: z.string(),
      client_id: z.string(),
      // Documented as a string; this service never returns the secret (null).
      client_secret: z.string().nullable(),
      scopes: z.string().nullable().optional(),
      webhook_secret: z.string().nullable().optional(),
    })
    .nullable()
    .optional(),
});

const tags = z.record(z.string(), z.string());
const connectionError = z.object({ type: z.enum(['auth', 'sync']), log_id: z.string() });
const endUser = z
  .object({
    id: z.string(),
    email: z.string().nullable().optional(),
    display_name: z.string().nullable().optional(),
    organization: z.object({ id: z.string(), display_name: z.string().nullable().optional() }).nullable().optional(),
  })
  .nullable()
  .optional();
const connectionListItem = z.object({
  id: z.number().int(),
  connection_id: z.string(),
  provider: z.string(),
  provider_config_key: z.string(),
  created: isoInstant,
  metadata: z.record(z.string(), z.unknown()).nullable(),
  tags,
  errors: z.array(connectionError),
  end_user: endUser,
});
const connectionFull = z.object({
  id: z.number().int(),
  connection_id: z.string(),
  provider_config_key: z.string(),
  provider: z.string(),
  errors: z.array(connectionError),
  end_user: endUser,
  metadata: z.record(z.string(), z.unknown()),
  connection_config: z.record(z.string(), z.unknown()),
  tags,
  created_at: isoInstant,
  updated_at: isoInstant,
  last_fetched_at: isoInstant.nullable(),
  credentials: z.object({ type: z.string() }).loose(),
});

/** The record metadata key is renamed (`_service_metadata`), one of the two documented renames. */
const recordsPage = z.object({
  records: z.array(
    z
      .object({
        _service_metadata: z.object({
          deleted_at: isoInstant.nullable(),
          last_action: z.enum(['ADDED', 'UPDATED', 'DELETED']),
          first_seen_at: isoInstant,
          last_modified_at: isoInstant,
          cursor: z.string(),
        }),
      })
      .loose(),
  ),
  next_cursor: z.string().nullable(),
});

const syncStatus = z.object({
  syncs: z.array(
    z.object({
      id: z.string(),
      connection_id: z.string(),
      name: z.string(),
      status: z.enum(['RUNNING', 'PAUSED', 'STOPPED', 'SUCCESS', 'ERROR']),
      type: z.enum(['INCREMENTAL', 'INITIAL']),
      // Documented as strings; null here when there is none (no finished run; paused).
      finishedAt: isoInstant.nullable(),
      nextScheduledSyncAt: isoInstant.nullable(),
      frequency: z.string(),
      latestResult: z
        .record(z.string(), z.object({ added: z.number(), updated: z.number(), deleted: z.number().optional() }))
        .nullable(),
      recordCount: z.record(z.string(), z.number()),
      checkpoint: z.record(z.string(), z.unknown()).nullable(),
    }),
  ),
});

const success = z.object({ success: z.literal(true) });
const metadataAnswer = z.object({
  connection_id: z.union([z.string(), z.array(z.string())]),
  provider_config_key: z.string(),
  metadata: z.record(z.string(), z.unknown()),
});

/** ActionError: the reference documents `{ error_type, payload }`; the de-facto server answers the envelope. */
const actionFailure = z.object({
  error_type: z.literal('action_script_failure'),
  payload: z.record(z.string(), z.unknown()),
  error: z.object({ code: z.literal('action_script_failure'), message: z.string(), payload: z.unknown() }),
});

const syncWebhookBase = z.object({
  from: z.string(),
  type: z.literal('sync'),
  connectionId: z.string(),
  providerConfigKey: z.string(),
  syncName: z.string(),
  syncVariant: z.string(),
  model: z.string(),
  syncType: z.enum(['INCREMENTAL', 'INITIAL', 'WEBHOOK']),
});
const syncWebhookSuccess = syncWebhookBase.extend({
  success: z.literal(true),
  modifiedAfter: isoInstant,
  responseResults: z.object({ added: z.number(), updated: z.number(), deleted: z.number().optional() }),
  queryTimeStamp: isoInstant.nullable(),
});

// ---- The client's requests -----------------------------------------------------------------------

let h: ApiHarness;
let app: Awaited<ReturnType<typeof startFakeUpstream>>;

/** The flag headers the client adds to every call (named after its product; a placeholder word here). */
const CLIENT_FLAGS = { 'Product-Is-Sync': 'false', 'Product-Is-Script': 'false', 'Product-Is-Dry-Run': 'false' };

/** Axios `params`: undefined dropped, everything else as a string. */
function params(query: Record<string, string | number | boolean | undefined>): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined) search.append(name, String(value));
  return search.toString();
}

/** One call as the client makes it: bearer key, its flag headers, JSON body; the answer as status and JSON. */
async function client(
  method: string,
  pathAndQuery: string,
  init: { body?: unknown; headers?: Record<string, string>; key?: string } = {},
): Promise<{ status: number; body: unknown; headers: Headers }> {
  const response = await fetch(`${h.baseUrl}${pathAndQuery}`, {
    method,
    headers: {
      'Content-Type': 'application/json',
      Authorization: `Bearer ${init.key ?? h.envA.secretKey}`,
      ...CLIENT_FLAGS,
      ...init.headers,
    },
    ...(init.body === undefined ? {} : { body: JSON.stringify(init.body) }),
  });
  const text = await response.text();
  return {
    status: response.status,
    body: text === '' ? undefined : (JSON.parse(text) as unknown),
    headers: response.headers,
  };
}

/** Fails unless the answer has the status and parses with the schema; returns the parsed body. */
function expectAnswer<T>(answer: { status: number; body: unknown }, status: number, schema: z.ZodType<T>): T {
  expect({ status: answer.status, body: answer.body }).toMatchObject({ status });
  const parsed = schema.safeParse(answer.body);
  if (!parsed.success) throw new Error(`answer does not fit the documented shape: ${z.prettifyError(parsed.error)}`);
  return parsed.data;
}

const connectionHeaders = (connectionId: string) => ({
  'Connection-Id': connectionId,
  'Provider-Config-Key': INTEGRATION,
});

// What the client's calls send (packages/node-client 0.71.x), one function per method used.
const calls = {
  listIntegrations: () => client('GET', '/integrations'),
  getIntegration: (key: string, include?: string) =>
    client('GET', `/integrations/${key}${include ? `?${params({ include })}` : ''}`),
  createIntegration: (body: unknown) => client('POST', '/integrations', { body }),
  updateIntegration: (key: string, body: unknown) => client('PATCH', `/integrations/${key}`, { body }),
  deleteIntegration: (key: string) => client('DELETE', `/integrations/${key}`),
  listConnections: (query: Record<string, string | undefined>) => client('GET', `/connections?${params(query)}`),
  getConnection: (key: string, connectionId: string, forceRefresh = false, refreshToken = false) =>
    client(
      'GET',
      `/connections/${connectionId}?${params({
        provider_config_key: key,
        force_refresh: forceRefresh,
        refresh_token: refreshToken,
        refresh_github_app_jwt_token: false,
      })}`,
    ),
  importConnection: (body: unknown) => client('POST', '/connections', { body }),
  patchConnection: (key: string, connectionId: string, body: unknown) =>
    client('PATCH', `/connections/${connectionId}?provider_config_key=${key}`, { body }),
  setMetadata: (key: string, connectionId: string | string[], metadata: unknown) =>
    client('POST', '/connections/metadata', {
      body: { metadata, connection_id: connectionId, provider_config_key: key },
    }),
  updateMetadata: (key: string, connectionId: string | string[], metadata: unknown) =>
    client('PATCH', '/connections/metadata', {
      body: { metadata, connection_id: connectionId, provider_config_key: key },
    }),
  deleteConnection: (key: string, connectionId: string) =>
    client('DELETE', `/connections/${connectionId}?provider_config_key=${key}`),
  listRecords: (
    connectionId: string,
    config: { model: string; modifiedAfter?: string; limit?: number; filter?: string; cursor?: string; ids?: string[] },
  ) => {
    const usp = new URLSearchParams({ model: config.model });
    if (config.modifiedAfter) usp.set('modified_after', config.modifiedAfter);
    if (config.limit) usp.set('limit', String(config.limit));
    if (config.filter) usp.set('filter', config.filter);
    if (config.cursor) usp.set('cursor', config.cursor);
    for (const id of config.ids ?? []) usp.append('ids', id);
    // The client writes `/records/?…`, with the slash.
    return client('GET', `/records/?${usp.toString()}`, { headers: connectionHeaders(connectionId) });
  },
  triggerSync: (key: string, syncs: unknown[], connectionId?: string, opts?: unknown) =>
    client('POST', '/sync/trigger', {
      body: { syncs, provider_config_key: key, connection_id: connectionId, opts },
    }),
  /** The deprecated signature: a sync mode string, or a boolean for a full resync. */
  triggerSyncLegacy: (key: string, syncs: unknown[], connectionId: string | undefined, mode: string | boolean) =>
    client('POST', '/sync/trigger', {
      body: {
        syncs,
        provider_config_key: key,
        connection_id: connectionId,
        sync_mode: typeof mode === 'boolean' ? (mode ? 'full_refresh' : 'incremental') : mode,
      },
    }),
  startSync: (key: string, syncs: unknown[], connectionId?: string) =>
    client('POST', '/sync/start', { body: { syncs, provider_config_key: key, connection_id: connectionId } }),
  pauseSync: (key: string, syncs: unknown[], connectionId?: string) =>
    client('POST', '/sync/pause', { body: { syncs, provider_config_key: key, connection_id: connectionId } }),
  syncStatus: (key: string, syncs: string, connectionId?: string) =>
    client('GET', `/sync/status?${params({ syncs, provider_config_key: key, connection_id: connectionId })}`),
  getEnvironmentVariables: () => client('GET', '/environment-variables'),
  triggerAction: (connectionId: string, actionName: string, input?: unknown, async = false) =>
    client('POST', '/action/trigger', {
      body: { action_name: actionName, input },
      headers: { ...connectionHeaders(connectionId), ...(async ? { 'X-Async': 'true' } : {}) },
    }),
  proxy: (
    connectionId: string,
    method: string,
    endpoint: string,
    init: { data?: unknown; baseUrlOverride?: string; retries?: number; headers?: Record<string, string> } = {},
  ) =>
    client(method, `/proxy${endpoint}`, {
      ...(init.data === undefined ? {} : { body: init.data }),
      headers: {
        ...connectionHeaders(connectionId),
        'Base-Url-Override': init.baseUrlOverride ?? '',
        'Product-Activity-Log-Id': '',
        ...(init.retries ? { Retries: String(init.retries) } : {}),
        ...init.headers,
      },
    }),
};

beforeAll(async () => {
  h = await startApiHarness();
  app = await startFakeUpstream();
  h.fake.setHandler((request, response, body) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (url.pathname === '/api/issues' && request.method === 'GET') {
      return json(response, 200, {
        issues: [
          { id: '1', title: 'one' },
          { id: '2', title: 'two' },
          { id: '3', title: 'three' },
        ],
      });
    }
    if (url.pathname === '/api/issues' && request.method === 'POST') {
      return json(response, 201, { id: 'new', title: (JSON.parse(body) as { title: string }).title });
    }
    return json(response, 200, { method: request.method, url: request.url, headers: request.headers, body });
  });
  expectAnswer(
    await calls.createIntegration({ unique_key: INTEGRATION, provider: PROVIDER }),
    200,
    z.object({ data: integration }),
  );
  await h.deploy(h.envA.id, deployRequest());
  for (const [connectionId, email] of [
    ['alice', 'alice@example.com'],
    ['bob', 'bob@example.com'],
  ] as const) {
    const imported = await calls.importConnection({
      provider_config_key: INTEGRATION,
      connection_id: connectionId,
      credentials: { type: 'API_KEY', apiKey: `key-${connectionId}` },
      metadata: { owner: connectionId },
      end_user: { id: `user-${connectionId}`, email },
      tags: { Team: 'core' },
    });
    expect(expectAnswer(imported, 200, connectionFull)).toMatchObject({
      connection_id: connectionId,
      tags: { end_user_id: `user-${connectionId}`, end_user_email: email, team: 'core' },
      end_user: { id: `user-${connectionId}`, email },
    });
  }
});

describe('integrations', () => {
  it('listIntegrations, getIntegration with include, createIntegration, updateIntegration, deleteIntegration', async () => {
    const listed = expectAnswer(await calls.listIntegrations(), 200, z.object({ data: z.array(integration) }));
    expect(listed.data.map((i) => i.unique_key)).toEqual([INTEGRATION]);
    const one = expectAnswer(await calls.getIntegration(INTEGRATION), 200, z.object({ data: integrationFull }));
    expect(one.data).toMatchObject({ unique_key: INTEGRATION, provider: PROVIDER, display_name: 'Fake API' });
    const webhook = expectAnswer(
      await calls.getIntegration(INTEGRATION, 'webhook'),
      200,
      z.object({ data: integrationFull }),
    );
    expect(webhook.data.webhook_url).toMatch(new RegExp(`/webhook/${h.envA.name}/${INTEGRATION}$`));

    const created = await calls.createIntegration({
      unique_key: 'gh',
      provider: 'github',
      display_name: 'GitHub (team)',
      credentials: { type: 'OAUTH2', client_id: 'cid', client_secret: 'never-shown', scopes: 'repo,user' },
    });
    expect(expectAnswer(created, 200, z.object({ data: integration })).data.display_name).toBe('GitHub (team)');
    const withCredentials = expectAnswer(
      await calls.getIntegration('gh', 'credentials'),
      200,
      z.object({ data: integrationFull }),
    );
    expect(withCredentials.data.credentials).toMatchObject({ type: 'OAUTH2', client_id: 'cid', scopes: 'repo,user' });
    expect(JSON.stringify(withCredentials)).not.toContain('never-shown');
    const updated = await calls.updateIntegration('gh', { display_name: 'GitHub' });
    expect(expectAnswer(updated, 200, z.object({ data: integration })).data.display_name).toBe('GitHub');
    expectAnswer(await calls.deleteIntegration('gh'), 200, success);
    expectAnswer(await calls.getIntegration('gh'), 404, stdError);
    // What would change behaviour silently is refused, in the envelope.
    expectAnswer(
      await calls.createIntegration({ unique_key: 'x', provider: PROVIDER, forward_webhooks: true }),
      400,
      stdError,
    );
    expectAnswer(
      await calls.createIntegration({ unique_key: 'x', provider: PROVIDER, integration_config: { a: 'b' } }),
      400,
      stdError,
    );
  });
});

describe('connections', () => {
  it('listConnections with the legacy and the object signature, filters and the item shape', async () => {
    const all = expectAnswer(
      await calls.listConnections({}),
      200,
      z.object({ connections: z.array(connectionListItem) }),
    );
    expect(all.connections.map((c) => c.connection_id)).toEqual(['alice', 'bob']);
    expect(all.connections[0]).toMatchObject({ metadata: { owner: 'alice' }, errors: [], provider: PROVIDER });
    // Legacy: listConnections(connectionId, search).
    const byId = expectAnswer(
      await calls.listConnections({ connectionId: 'alice' }),
      200,
      z.object({ connections: z.array(connectionListItem) }),
    );
    expect(byId.connections.map((c) => c.connection_id)).toEqual(['alice']);
    const searched = expectAnswer(
      await calls.listConnections({ search: 'BOB@example' }),
      200,
      z.object({ connections: z.array(connectionListItem) }),
    );
    expect(searched.connections.map((c) => c.connection_id)).toEqual(['bob']);
    // Object: { connectionId, userId, integrationId, tags, limit, page }.
    const filtered = new URLSearchParams({
      integrationId: `${INTEGRATION},other`,
      endUserId: 'user-bob',
      limit: '1',
      page: '0',
    });
    filtered.append('tags[team]', 'core');
    const answer = await client('GET', `/connections?${filtered.toString()}`);
    expect(
      expectAnswer(answer, 200, z.object({ connections: z.array(connectionListItem) })).connections.map(
        (c) => c.connection_id,
      ),
    ).toEqual(['bob']);
    const page1 = await calls.listConnections({ limit: '1', page: '1' });
    expect(
      expectAnswer(page1, 200, z.object({ connections: z.array(connectionListItem) })).connections.map(
        (c) => c.connection_id,
      ),
    ).toEqual(['bob']);
    expectAnswer(await calls.listConnections({ tags: 'x' }), 400, stdError);
  });

  it('getConnection, getToken and getMetadata send every flag; the answer is the full record', async () => {
    const record = expectAnswer(await calls.getConnection(INTEGRATION, 'alice'), 200, connectionFull);
    expect(record).toMatchObject({
      credentials: { type: 'API_KEY', apiKey: 'key-alice' },
      metadata: { owner: 'alice' },
    });
    expectAnswer(await calls.getConnection(INTEGRATION, 'alice', true, true), 200, connectionFull);
    expectAnswer(await calls.getConnection(INTEGRATION, 'nobody'), 404, stdError);
    expectAnswer(await calls.getConnection(INTEGRATION, 'alice', 'maybe' as unknown as boolean), 400, stdError);
  });

  it('setMetadata and updateMetadata, for one connection and for several at once (all or none)', async () => {
    const set = expectAnswer(
      await calls.setMetadata(INTEGRATION, 'alice', { owner: 'alice', plan: 'pro' }),
      201,
      metadataAnswer,
    );
    expect(set).toEqual({
      metadata: { owner: 'alice', plan: 'pro' },
      connection_id: 'alice',
      provider_config_key: INTEGRATION,
    });
    expectAnswer(await calls.updateMetadata(INTEGRATION, ['alice', 'bob'], { region: 'eu' }), 200, metadataAnswer);
    const read = async (id: string) =>
      expectAnswer(await calls.getConnection(INTEGRATION, id), 200, connectionFull).metadata;
    expect(await read('alice')).toEqual({ owner: 'alice', plan: 'pro', region: 'eu' });
    expect(await read('bob')).toEqual({ owner: 'bob', region: 'eu' });
    // One unknown id: nothing changes anywhere.
    expectAnswer(await calls.setMetadata(INTEGRATION, ['alice', 'nobody'], { wiped: true }), 404, stdError);
    expect(await read('alice')).toEqual({ owner: 'alice', plan: 'pro', region: 'eu' });
  });

  it('patchConnection changes the tags; importConnection without an id gets one; deleteConnection answers success', async () => {
    expectAnswer(await calls.patchConnection(INTEGRATION, 'bob', { tags: { Team: 'platform' } }), 200, success);
    const bob = expectAnswer(await calls.getConnection(INTEGRATION, 'bob'), 200, connectionFull);
    expect(bob.tags).toEqual({ team: 'platform' });
    expect(bob.end_user).toBeNull();
    expectAnswer(
      await calls.patchConnection(INTEGRATION, 'bob', { webhook_url_override: 'https://elsewhere.example' }),
      400,
      stdError,
    );

    const anonymous = expectAnswer(
      await calls.importConnection({ provider_config_key: INTEGRATION, credentials: { type: 'API_KEY', apiKey: 'k' } }),
      200,
      connectionFull,
    );
    expect(anonymous.connection_id).toMatch(/^[0-9a-f-]{36}$/);
    expectAnswer(await calls.deleteConnection(INTEGRATION, anonymous.connection_id), 200, success);
    expectAnswer(await calls.deleteConnection(INTEGRATION, anonymous.connection_id), 404, stdError);
  });
});

describe('syncs and records', () => {
  it('triggerSync (opts and the deprecated modes), syncStatus, listRecords with every parameter', async () => {
    // `syncs: []` means every sync of the integration.
    expectAnswer(await calls.triggerSync(INTEGRATION, [], 'alice'), 200, success);
    const status = await eventually(
      async () => {
        const answer = expectAnswer(await calls.syncStatus(INTEGRATION, '*', 'alice'), 200, syncStatus);
        return answer.syncs.every((s) => s.finishedAt !== null && s.status !== 'RUNNING') ? answer : undefined;
      },
      45_000,
      'both syncs of alice to run',
    );
    expect(status.syncs.map((s) => [s.name, s.status]).sort()).toEqual([
      // auto_start: false in the fixture: triggered runs leave the schedule paused.
      ['issues', 'PAUSED'],
      ['people', 'PAUSED'],
    ]);
    expect(status.syncs.find((s) => s.name === 'issues')).toMatchObject({
      type: 'INCREMENTAL',
      recordCount: { Issue: 3 },
      checkpoint: null,
    });
    expect(status.syncs.find((s) => s.name === 'people')?.type).toBe('INITIAL');
    const named = expectAnswer(await calls.syncStatus(INTEGRATION, 'issues::base', 'alice'), 200, syncStatus);
    expect(named.syncs.map((s) => s.name)).toEqual(['issues']);
    const never = expectAnswer(await calls.syncStatus(INTEGRATION, 'issues', 'bob'), 200, syncStatus);
    expect(never.syncs[0]?.status).toBe('PAUSED');

    const first = expectAnswer(await calls.listRecords('alice', { model: 'Issue', limit: 2 }), 200, recordsPage);
    expect(first.records.map((r) => r['id'])).toEqual(['1', '2']);
    const rest = expectAnswer(
      await calls.listRecords('alice', { model: 'Issue', cursor: first.next_cursor ?? '' }),
      200,
      recordsPage,
    );
    expect(rest.records.map((r) => r['id'])).toEqual(['3']);
    expect(rest.next_cursor).toBeNull();
    const some = expectAnswer(
      await calls.listRecords('alice', { model: 'Issue', ids: ['3', '1'], filter: 'ADDED,UPDATED', limit: 5000 }),
      200,
      recordsPage,
    );
    expect(some.records.map((r) => r['id']).sort()).toEqual(['1', '3']);
    const since = new Date(Date.now() + 60_000).toISOString();
    expect(
      expectAnswer(await calls.listRecords('alice', { model: 'Issue', modifiedAfter: since }), 200, recordsPage)
        .records,
    ).toEqual([]);
    expectAnswer(await calls.listRecords('alice', { model: 'Issue', filter: 'sideways' }), 400, stdError);
    expectAnswer(
      await client('GET', '/records/?model=Issue&variant=custom', { headers: connectionHeaders('alice') }),
      400,
      stdError,
    );

    // A full resync that empties the cache first: the records come back, added again.
    expectAnswer(
      await calls.triggerSync(INTEGRATION, ['issues'], 'alice', { reset: true, emptyCache: true }),
      200,
      success,
    );
    await eventually(
      async () => {
        const page = expectAnswer(await calls.listRecords('alice', { model: 'Issue' }), 200, recordsPage);
        const fresh =
          page.records.length === 3 &&
          Date.parse(page.records[0]!._service_metadata.first_seen_at) >
            Date.parse(first.records[0]!._service_metadata.first_seen_at);
        return fresh ? true : undefined;
      },
      45_000,
      'the records to be refetched after the cache was emptied',
    );
    expectAnswer(
      await calls.triggerSync(INTEGRATION, [{ name: 'issues', variant: 'base' }], 'alice', { reset: true }),
      200,
      success,
    );
    expectAnswer(await calls.triggerSyncLegacy(INTEGRATION, ['issues'], 'alice', 'full_refresh'), 200, success);
    expectAnswer(await calls.triggerSyncLegacy(INTEGRATION, ['issues'], 'alice', true), 200, success);
    // Strict where ignoring would be wrong.
    expectAnswer(await calls.triggerSync(INTEGRATION, ['issues'], 'alice', { emptyCache: true }), 400, stdError);
    expectAnswer(await calls.triggerSync(INTEGRATION, [{ name: 'issues', variant: 'custom' }], 'alice'), 400, stdError);
    expectAnswer(
      await client('POST', '/sync/trigger', {
        body: { syncs: ['issues'], provider_config_key: INTEGRATION, opts: { reset: true }, sync_mode: 'incremental' },
      }),
      400,
      stdError,
    );
    // provider_config_key and connection_id may come as headers.
    expectAnswer(
      await client('POST', '/sync/trigger', { body: { syncs: ['issues'] }, headers: connectionHeaders('alice') }),
      200,
      success,
    );
  });

  it('pauseSync and startSync answer success and move the status', async () => {
    const statusOfPeople = (wanted: string) => async () => {
      const answer = expectAnswer(await calls.syncStatus(INTEGRATION, 'people', 'bob'), 200, syncStatus);
      return answer.syncs[0]?.status === wanted ? true : undefined;
    };
    expectAnswer(await calls.startSync(INTEGRATION, ['people'], 'bob'), 200, success);
    await eventually(statusOfPeople('SUCCESS'), 45_000, 'the started sync to finish its run');
    expectAnswer(await calls.pauseSync(INTEGRATION, ['people'], 'bob'), 200, success);
    await eventually(statusOfPeople('PAUSED'), 45_000, 'the sync to be paused');
    expectAnswer(await calls.pauseSync(INTEGRATION, ['nope'], 'bob'), 404, stdError);
  });
});

describe('actions, environment variables, proxy', () => {
  it('triggerAction answers the output, the ActionError in both documented shapes, and refuses X-Async', async () => {
    const ok = await calls.triggerAction('alice', 'create-issue', { title: 'hello' });
    expect([ok.status, ok.body]).toEqual([200, { id: 'new', title: 'hello' }]);
    const refused = expectAnswer(await calls.triggerAction('alice', 'create-issue', {}), 422, actionFailure);
    expect(refused.payload).toEqual({ message: 'title is required', field: 'title' });
    expect(refused.error.payload).toEqual(refused.payload);
    expectAnswer(await calls.triggerAction('alice', 'create-issue', { title: 'x' }, true), 400, stdError);
    expectAnswer(await calls.triggerAction('alice', 'no-such-action'), 404, stdError);
  });

  it('getEnvironmentVariables answers the bare array', async () => {
    await h.api.environmentVariables.set({ variables: [{ name: 'REGION', value: 'eu' }] });
    const answer = expectAnswer(
      await calls.getEnvironmentVariables(),
      200,
      z.array(z.object({ name: z.string(), value: z.string() })),
    );
    expect(answer).toEqual([{ name: 'REGION', value: 'eu' }]);
  });

  it('proxy: the empty Base-Url-Override and activity-log headers mean absent; a set override is used', async () => {
    const answer = await calls.proxy('alice', 'POST', '/echo?x=1', { data: { hello: 'world' }, retries: 1 });
    expect(answer.status).toBe(200);
    const echoed = answer.body as { url: string; headers: Record<string, string>; body: string };
    expect(echoed.url).toBe('/api/echo?x=1');
    expect(echoed.headers['authorization']).toBe('Bearer key-alice');
    expect(echoed.headers).not.toHaveProperty('base-url-override');
    expect(echoed.headers).not.toHaveProperty('product-activity-log-id');
    expect(JSON.parse(echoed.body)).toEqual({ hello: 'world' });
    const overridden = await calls.proxy('alice', 'GET', '/other', { baseUrlOverride: `${h.fake.url}/elsewhere` });
    expect((overridden.body as { url: string }).url).toBe('/elsewhere/other');
    const bad = await calls.proxy('alice', 'GET', '/x', { baseUrlOverride: 'not a url' });
    expectAnswer(bad, 400, stdError);
  });

  it("proxy: the client's custom headers arrive without their prefix; its own flags do not arrive", async () => {
    const answer = await calls.proxy('alice', 'GET', '/echo', {
      headers: {
        'Product-Proxy-X-Custom': 'kept',
        'Product-Proxy-Authorization': 'Bearer forged',
        'Product-Is-Sync': 'true',
        'Product-Is-Dry-Run': 'false',
        Decompress: 'false',
      },
    });
    expect(answer.status).toBe(200);
    const echoed = answer.body as { headers: Record<string, string> };
    expect(echoed.headers['x-custom']).toBe('kept');
    expect(echoed.headers).not.toHaveProperty('product-proxy-x-custom');
    // A prefixed header cannot replace what the service sets: the connection's credentials stay.
    expect(echoed.headers['authorization']).toBe('Bearer key-alice');
    for (const flag of ['product-is-sync', 'product-is-dry-run', 'decompress'])
      expect(echoed.headers).not.toHaveProperty(flag);
  });
});

describe('the OpenAPI document', () => {
  it('describes the de-facto shapes and the headers the routes read', async () => {
    const document = (await h.api.openapi()) as {
      paths: Record<
        string,
        Record<string, { parameters: { name: string; in: string }[]; responses: Record<string, unknown> }>
      >;
    };
    const headers = (path: string, method: string) =>
      document.paths[path]?.[method]?.parameters.filter((p) => p.in === 'header').map((p) => p.name);
    expect(headers('/action/trigger', 'post')).toEqual(['Connection-Id', 'Provider-Config-Key', 'X-Async']);
    expect(headers('/sync/trigger', 'post')).toEqual(['Provider-Config-Key', 'Connection-Id']);
    expect(JSON.stringify(document.paths['/integrations']?.['get']?.responses['200'])).toContain('"unique_key"');
    expect(Object.keys(document.paths['/connections/metadata']?.['post']?.responses ?? {})).toContain('201');
    expect(JSON.stringify(document.paths['/sync/status']?.['get']?.responses['200'])).toContain('"SUCCESS"');
  });
});

describe('what is not built', () => {
  it('answers 404 route_not_found in the envelope', async () => {
    for (const [method, path] of [
      ['GET', '/providers'],
      ['GET', '/action/35f461d4-e681-4957-ab14-c0ae1609431d'],
      ['PATCH', '/records/prune'],
    ] as const) {
      const answer = expectAnswer(await client(method, path), 404, stdError);
      expect(answer.error.code).toBe('route_not_found');
    }
  });
});

describe('the sync webhook', () => {
  it('is the documented camelCase body, signed so that the client’s check (with the renamed header) accepts it', async () => {
    const { generated_secret: secret = '' } = await h.api.webhooks.setSettings({ url: `${app.url}/hooks` });
    app.setHandler((_request, response) => json(response, 200, {}));
    // A model with changes: the users of the fixture's `people` sync for a new connection.
    await calls.importConnection({
      provider_config_key: INTEGRATION,
      connection_id: 'carol',
      credentials: { type: 'API_KEY', apiKey: 'kc' },
    });
    expectAnswer(await calls.triggerSync(INTEGRATION, ['people'], 'carol'), 200, success);
    const delivery = await eventually(
      async () =>
        app.requests.find((request) => {
          if (request.url !== '/hooks') return false;
          const sent = JSON.parse(request.body) as { connectionId?: string; model?: string };
          return sent.connectionId === 'carol' && sent.model === 'User';
        }),
      45_000,
      'the webhook of carol’s people run',
    );
    const body = syncWebhookSuccess.parse(JSON.parse(delivery.body));
    expect(body).toMatchObject({
      connectionId: 'carol',
      providerConfigKey: INTEGRATION,
      syncName: 'people',
      model: 'User',
      syncType: 'INITIAL',
      responseResults: { added: 2, updated: 0, deleted: 0 },
    });
    // verifyIncomingWebhookRequest: hex HMAC-SHA256 of the raw body with the signing key, compared with the header.
    const header = Object.keys(delivery.headers).find((name) => name.toLowerCase() === 'x-service-hmac-sha256');
    expect(header).toBeDefined();
    expect(delivery.headers[header!]).toBe(createHmac('sha256', secret).update(delivery.body).digest('hex'));
  });
});
