/**
 * Runs one environment may have going at once (issue 29, finding 3): actions past the bound are a 429
 * `too_many_runs` with Retry-After, another environment's are not touched; a sync run past the bound
 * waits to begin until a slot frees. An MCP tools/call runs through the same slots (runActionFor), so
 * an agent is bounded as POST /action/trigger is. The bounds are tiny here (2 actions, 1 sync run) so
 * that a few held requests reach them.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { deployRequest, INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { connectionOf, startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';
import { json } from '../kit/upstream.js';

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
    // The action's output is an Issue as its model declares it (an MCP tool checks it against its outputSchema).
    if (request.method === 'POST') json(response, 200, { id: 'x', title: 'done' });
    else json(response, 200, { issues: [{ id: '1', title: 'one' }] });
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
const agents: Client[] = [];
afterAll(async () => {
  for (const client of agents) await client.close().catch(() => undefined);
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

/** An AI agent on POST /mcp (the MCP SDK's own client) for one connection of the fixture integration. */
async function agent(secretKey: string, connection: string): Promise<Client> {
  const client = new Client({ name: 'run-limits-agent', version: '1.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${h.baseUrl}/mcp`), {
      requestInit: {
        headers: {
          Authorization: `Bearer ${secretKey}`,
          'Connection-Id': connection,
          'Provider-Config-Key': INTEGRATION,
        },
      },
    }),
  );
  agents.push(client);
  return client;
}

// The SDK's client gives up on a request after 60 s by default; a held call waits longer on a loaded machine.
const callCreateIssue = (client: Client) =>
  client.callTool({ name: 'create-issue', arguments: { title: 'held' } }, CallToolResultSchema, { timeout: 170_000 });

const toolError = (result: unknown): { code?: string; retryable?: boolean } => {
  const [first] = ((result as { content?: unknown }).content ?? []) as { type: string; text?: string }[];
  return (JSON.parse(first?.text ?? '{}') as { error?: { code?: string; retryable?: boolean } }).error ?? {};
};

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

  it('an MCP tools/call takes the same slots: past the bound it is refused with too_many_runs, like POST /action/trigger', async () => {
    const [c1, c2, c3, b1] = await Promise.all([
      agent(h.envA.secretKey, 'c1'),
      agent(h.envA.secretKey, 'c2'),
      agent(h.envA.secretKey, 'c3'),
      agent(h.envB.secretKey, 'b1'),
    ]);
    hold('Bearer key-c1');
    hold('Bearer key-c2');
    const before = seen.length;
    const posted = (key: string) => seen.slice(before).filter((line) => line.startsWith(`${key} POST`)).length;
    // Two calls through MCP hold the environment's two slots.
    const first = callCreateIssue(c1);
    const second = callCreateIssue(c2);
    await eventually(
      async () => (posted('Bearer key-c1') + posted('Bearer key-c2') >= 2 ? true : undefined),
      60_000,
      'two tool calls under way',
    );
    const third = await callCreateIssue(c3);
    expect(third.isError).toBe(true);
    expect(toolError(third)).toMatchObject({ code: 'too_many_runs', retryable: true });
    // POST /action/trigger counts the calls of MCP sessions too.
    const rest = await createIssue(h.envA.secretKey, 'c3');
    expect(rest.status).toBe(429);
    expect(((await rest.json()) as { error: { code: string } }).error.code).toBe('too_many_runs');
    expect(posted('Bearer key-c3')).toBe(0);
    // Environment B's agent has slots of its own.
    const other = await callCreateIssue(b1);
    expect(other.isError, JSON.stringify(other)).toBeFalsy();
    expect(other.structuredContent).toEqual({ id: 'x', title: 'done' });
    held.get('Bearer key-c1')!();
    held.get('Bearer key-c2')!();
    expect((await first).isError).toBeFalsy();
    expect((await second).isError).toBeFalsy();
    // The calls that ended gave their slots back.
    const again = await callCreateIssue(c3);
    expect(again.isError, JSON.stringify(again)).toBeFalsy();
    expect(posted('Bearer key-c3')).toBe(1);
  }, 240_000);

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
