/**
 * POST /mcp (issue 34) on the real stack, driven by the Model Context Protocol's own TypeScript client
 * (`Client` + `StreamableHTTPClientTransport` of @modelcontextprotocol/sdk): the tools of a connection,
 * a call, a failing call, a call with bad arguments, a redeploy changing the list, the keys and
 * connections that must be refused, malformed protocol input, and the attacks of docs/api.md
 * ("Actions as tools for AI agents").
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ErrorCode, McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMcpSessionRegistry } from '../../src/api/mcp/sessions.js';
import type { DeployRequest } from '../../src/deploy/deployments.js';
import { PROVIDER } from '../kit/fixtures.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { rejection } from '../helpers/rejection.js';
import { bundle } from '../kit/scripts.js';
import { eventually } from '../helpers/eventually.js';
import { json } from '../kit/upstream.js';

const TRACKER = 'tracker';
const CRM = 'crm';
const SESSIONS_PER_ENVIRONMENT = 6;

const yaml = (trackerExtra = '', exposed = '[create-issue, close-issue, echo, broken]') => `
integrations:
  ${TRACKER}:
    actions:
      create-issue:
        description: Creates an issue in the tracker and returns it
        input: IssueInput
        output: Issue
        endpoint: POST /issues
      close-issue:
        description: Closes an issue; refuses one that is already closed
        input: IssueRef
        output: Issue
        endpoint: POST /issues/close
      echo:
        description: Answers with the connection it ran for and the input it got
        input: Anything
        output: Echo
        endpoint: POST /echo
      broken:
        description: Returns something that is not an Issue
        output: Issue
        endpoint: GET /broken
      purge:
        description: Deletes every issue (not for agents)
        output: Issue
        endpoint: DELETE /issues
${trackerExtra}    mcp_tools: ${exposed}
  ${CRM}:
    actions:
      ping:
        description: Answers pong
        output: Pong
        endpoint: GET /ping
models:
  IssueInput:
    title: string
    labels?: string[]
    due?: date
    priority?: 1 | 2 | 3
  IssueRef:
    id: string
  Issue:
    id: string
    title: string
    state: open | closed
    labels: Label[]
  Label:
    name: string
  Anything:
    __string: any
  Echo:
    connection: string
    caller: string
    input: object
  Pong:
    pong: boolean
`;

const SCRIPTS: Record<string, string> = {
  'create-issue': bundle(`async function (svc, input) {
    const res = await svc.post({ endpoint: '/issues', data: input });
    return res.data;
  }`),
  'close-issue': bundle(`async function (svc, input) {
    const res = await svc.post({ endpoint: '/issues/' + input.id + '/close' });
    if (res.data.already) {
      const connection = await svc.getConnection();
      throw new ActionError({ message: 'issue ' + input.id + ' is already closed', seen_with: connection.credentials.apiKey });
    }
    return res.data;
  }`),
  echo: bundle(`async function (svc, input) {
    const res = await svc.get({ endpoint: '/whoami' });
    return { connection: svc.connectionId, caller: res.data.caller, input };
  }`),
  broken: bundle(`async function () { return { id: 5 }; }`),
  purge: bundle(
    `async function (svc) { await svc.delete({ endpoint: '/issues' }); return { id: 'x', title: 'x', state: 'closed', labels: [] }; }`,
  ),
  'list-labels': bundle(
    `async function () { return { id: 'l', title: 'labels', state: 'open', labels: [{ name: 'bug' }] }; }`,
  ),
  ping: bundle(`async function () { return { pong: true }; }`),
};

function request(text: string): DeployRequest {
  const scripts: DeployRequest['scripts'] = [];
  for (const [integration, names] of [
    [TRACKER, ['create-issue', 'close-issue', 'echo', 'broken', 'purge', 'list-labels']],
    [CRM, ['ping']],
  ] as const) {
    for (const name of names) {
      if (!text.includes(`      ${name}:`)) continue;
      scripts.push({ integration, kind: 'action', name, code: SCRIPTS[name] ?? '' });
    }
  }
  return { yaml: text, scripts };
}

let h: ApiHarness;
const registry = createMcpSessionRegistry({ perEnvironment: SESSIONS_PER_ENVIRONMENT, pollMs: 250 });
afterAll(() => registry.closeAll());
const open: Client[] = [];
afterAll(async () => {
  for (const client of open) await client.close().catch(() => undefined);
});

/** An agent: the SDK's client on POST /mcp with a key and a connection's headers. */
async function agent(
  options: { key?: string; connectionId?: string; integration?: string; onListChanged?: () => void } = {},
): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
  const client = new Client({ name: 'test-agent', version: '1.0.0' });
  if (options.onListChanged) {
    const notify = options.onListChanged;
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => notify());
  }
  const transport = new StreamableHTTPClientTransport(new URL(`${h.baseUrl}/mcp`), {
    requestInit: {
      headers: {
        Authorization: `Bearer ${options.key ?? h.envA.secretKey}`,
        'Connection-Id': options.connectionId ?? 'c1',
        'Provider-Config-Key': options.integration ?? TRACKER,
      },
    },
  });
  await client.connect(transport);
  open.push(client);
  return { client, transport };
}

/** The HTTP status a connect fails with (the SDK's StreamableHTTPError), and its body's JSON-RPC error. */
const refused = (connecting: Promise<unknown>): Promise<{ status: number | undefined; body: string }> =>
  rejection(
    connecting,
    (error) => (error instanceof StreamableHTTPError ? { status: error.code, body: error.message } : undefined),
    'a refusal',
  );

/** The headers of a JSON request of environment A for connection c1. */
const c1JsonHeaders = (): Record<string, string> => ({
  Authorization: `Bearer ${h.envA.secretKey}`,
  'Connection-Id': 'c1',
  'Provider-Config-Key': TRACKER,
  'Content-Type': 'application/json',
});

/** One raw POST /mcp (for what the SDK's client never sends), with environment A's key and c1's headers. */
async function post(body: string | Buffer, headers: Record<string, string> = {}) {
  const response = await fetch(`${h.baseUrl}/mcp`, {
    method: 'POST',
    headers: {
      ...c1JsonHeaders(),
      Accept: 'application/json, text/event-stream',
      ...headers,
    },
    body,
  });
  const text = await response.text();
  let parsed: { jsonrpc?: string; id?: unknown; error?: { code: number; message: string; data?: { code?: string } } };
  try {
    parsed = JSON.parse(text) as typeof parsed;
  } catch {
    throw new Error(`POST /mcp answered ${response.status} with a body that is not JSON: ${text.slice(0, 200)}`);
  }
  return { status: response.status, body: parsed, headers: response.headers };
}

const textOf = (result: unknown): string => {
  const [first] = ((result as { content?: unknown }).content ?? []) as { type: string; text?: string }[];
  return first?.type === 'text' ? (first.text ?? '') : '';
};

const fakeRequests = (path: string) => h.fake.requests.filter((r) => new URL(r.url, 'http://x').pathname === path);

beforeAll(async () => {
  h = await startApiHarness({ mcpSessions: registry });
  h.fake.setHandler((req, res, body) => {
    const path = new URL(req.url ?? '/', 'http://x').pathname;
    const caller =
      req.headers.authorization === 'Bearer key-c1'
        ? 'c1'
        : req.headers.authorization === 'Bearer key-c2'
          ? 'c2'
          : 'other';
    if (path === '/api/issues' && req.method === 'POST') {
      const input = JSON.parse(body || '{}') as { title?: string; labels?: string[] };
      return json(res, 201, {
        id: 'i-1',
        title: input.title ?? '',
        state: 'open',
        labels: (input.labels ?? []).map((name) => ({ name })),
      });
    }
    if (path === '/api/issues/closed-1/close') return json(res, 200, { already: true });
    if (path.startsWith('/api/issues/') && path.endsWith('/close')) {
      return json(res, 200, { id: path.split('/')[3], title: 'closed', state: 'closed', labels: [] });
    }
    if (path === '/api/whoami') return json(res, 200, { caller });
    return json(res, 404, { error: 'no such route' });
  });
  for (const integration of [TRACKER, CRM]) {
    await h.api.integrations.create({ unique_key: integration, provider: PROVIDER });
  }
  await h.deploy(h.envA.id, request(yaml()));
  for (const [integration, connectionId] of [
    [TRACKER, 'c1'],
    [TRACKER, 'c2'],
    [CRM, 'crm-1'],
  ] as const) {
    await h.api.connections.import({
      provider_config_key: integration,
      connection_id: connectionId,
      credentials: { type: 'API_KEY', apiKey: `key-${connectionId}` },
    });
  }
  // Environment B has a connection of the same id in an integration of the same id, and deploys nothing.
  await h.apiB.integrations.create({ unique_key: TRACKER, provider: PROVIDER });
  await h.apiB.connections.import({
    provider_config_key: TRACKER,
    connection_id: 'c1',
    credentials: { type: 'API_KEY', apiKey: 'key-b-c1' },
  });
}, 240_000);

describe('tools/list', () => {
  it('lists one tool per exposed action, with its description and the OpenAPI document’s schemas', async () => {
    const { client } = await agent();
    const { tools } = await client.listTools();
    // `purge` is deployed but not in mcp_tools; crm's `ping` belongs to another integration.
    expect(tools.map((tool) => tool.name)).toEqual(['create-issue', 'close-issue', 'echo', 'broken']);
    const create = tools.find((tool) => tool.name === 'create-issue');
    expect(create?.description).toBe('Creates an issue in the tracker and returns it');

    // The same schemas as the generated endpoint POST /issues, its model refs moved into $defs.
    const openapi = (await h.api.openapi()) as {
      components: { schemas: Record<string, unknown> };
      paths: Record<string, Record<string, { tags?: string[] }>>;
    };
    // POST, GET and DELETE /mcp are in the OpenAPI document like every route.
    expect(Object.keys(openapi.paths['/mcp'] ?? {}).sort()).toEqual(['delete', 'get', 'post']);
    expect(openapi.paths['/mcp']?.['post']?.tags).toEqual(['mcp']);
    const schemas = openapi.components.schemas;
    expect(create?.inputSchema).toEqual(schemas['IssueInput']);
    const { $defs, ...output }: Record<string, unknown> = create?.outputSchema ?? {};
    const relocated = JSON.parse(JSON.stringify(schemas['Issue']).replaceAll('#/components/schemas/', '#/$defs/'));
    expect(output).toEqual(relocated);
    expect($defs).toEqual({ Label: schemas['Label'] });
    expect(create?.inputSchema).toMatchObject({
      type: 'object',
      required: ['title'],
      properties: {
        title: { type: 'string' },
        labels: { type: 'array', items: { type: 'string' } },
        due: { type: 'string', format: 'date-time' },
        priority: { anyOf: [{ const: 1 }, { const: 2 }, { const: 3 }] },
      },
    });
  });

  it('lists the tools of the connection’s own integration', async () => {
    const { client } = await agent({ connectionId: 'crm-1', integration: CRM });
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['ping']);
  });
});

describe('tools/call', () => {
  it('runs the action for the session’s connection, with its credentials, and answers its output', async () => {
    const { client } = await agent();
    const before = fakeRequests('/api/issues').length;
    const result = await client.callTool({
      name: 'create-issue',
      arguments: { title: 'Printer on fire', labels: ['urgent'], priority: 1, due: '2026-01-31T12:00:00Z' },
    });
    const issue = { id: 'i-1', title: 'Printer on fire', state: 'open', labels: [{ name: 'urgent' }] };
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual(issue);
    expect(JSON.parse(textOf(result))).toEqual(issue);
    const sent = fakeRequests('/api/issues').slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]?.headers.authorization).toBe('Bearer key-c1');
    // What POST /action/trigger answers for the same input.
    const rest = await h.api.actions.trigger(
      { connectionId: 'c1', providerConfigKey: TRACKER },
      {
        action_name: 'create-issue',
        input: { title: 'Printer on fire', labels: ['urgent'], priority: 1, due: '2026-01-31T12:00:00Z' },
      },
    );
    expect(rest).toEqual({ ok: true, output: issue });
  });

  it('answers an ActionError as a result with isError and the payload, redacted of the connection’s credentials', async () => {
    const { client } = await agent();
    const result = await client.callTool({ name: 'close-issue', arguments: { id: 'closed-1' } });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toBeUndefined();
    const body = JSON.parse(textOf(result)) as { error_type: string; payload: { message: string; seen_with: string } };
    expect(body.error_type).toBe('action_script_failure');
    expect(body.payload.message).toBe('issue closed-1 is already closed');
    expect(JSON.stringify(body)).not.toContain('key-c1');
    expect(body.payload.seen_with).not.toBe('key-c1');
  });

  it('refuses invalid arguments with every problem named, before a run starts', async () => {
    const { client } = await agent();
    const before = fakeRequests('/api/issues').length;
    const result = await client.callTool({
      name: 'create-issue',
      arguments: { title: 5, labels: ['ok', 7], priority: 4, titel: 'typo' },
    });
    expect(result.isError).toBe(true);
    const body = JSON.parse(textOf(result)) as { error: { code: string; message: string; errors: { path: string }[] } };
    expect(body.error.code).toBe('invalid_arguments');
    expect(body.error.errors.map((problem) => problem.path).sort()).toEqual(
      ['labels[1]', 'priority', 'title', 'titel'].sort(),
    );
    expect(body.error.message).toContain('title: expected string, got 5');
    expect(body.error.message).toContain('titel: is not a field of the model');
    // A missing required argument, and arguments for a tool that takes none.
    const missing = await client.callTool({ name: 'create-issue', arguments: {} });
    expect(textOf(missing)).toContain('title: expected string, got nothing (the field is missing)');
    const none = await client.callTool({ name: 'broken', arguments: { anything: 1 } });
    expect(textOf(none)).toContain('anything: is not an argument: this tool takes no arguments');
    expect(fakeRequests('/api/issues').length).toBe(before);
  });

  it('answers an output that breaks the tool’s outputSchema as an error that carries the output', async () => {
    const { client } = await agent();
    const result = await client.callTool({ name: 'broken', arguments: {} });
    expect(result.isError).toBe(true);
    const body = JSON.parse(textOf(result)) as { error: { code: string; message: string; output: unknown } };
    expect(body.error.code).toBe('action_output_invalid');
    expect(body.error.output).toEqual({ id: 5 });
    expect(body.error.message).toContain('Do not run the tool again');
  });

  it('refuses a tool that is not exposed (deployed but not in mcp_tools) or does not exist, as a protocol error', async () => {
    const { client } = await agent();
    for (const name of ['purge', 'ping', 'no-such-tool']) {
      const error = await client.callTool({ name, arguments: {} }).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(McpError);
      expect((error as McpError).code).toBe(ErrorCode.InvalidParams);
      expect((error as McpError).message).toContain(`Unknown tool '${name}'`);
    }
    expect(h.fake.requests.some((r) => r.method === 'DELETE')).toBe(false);
  });
});

describe('scope: keys and connections', () => {
  it('refuses a key of no environment (401) and another environment’s key for a connection only A has (404)', async () => {
    const wrong = await refused(agent({ key: 'not-a-key' }));
    expect(wrong.status).toBe(401);
    expect(wrong.body).toContain('"code":"invalid_secret_key"');
    expect(wrong.body).toContain('"jsonrpc":"2.0"');
    const other = await refused(agent({ key: h.envB.secretKey, connectionId: 'c2' }));
    expect(other.status).toBe(404);
    expect(other.body).toContain('"code":"unknown_connection"');
  });

  it('refuses a connection of another integration, and a connection that does not exist', async () => {
    const crossed = await refused(agent({ connectionId: 'crm-1', integration: TRACKER }));
    expect(crossed.status).toBe(404);
    expect(crossed.body).toContain('unknown_connection');
    const crossedBack = await refused(agent({ connectionId: 'c1', integration: CRM }));
    expect(crossedBack.status).toBe(404);
    expect((await refused(agent({ connectionId: 'nobody' }))).status).toBe(404);
  });

  it('never lets a session id carry a request to another connection or environment', async () => {
    const { transport } = await agent();
    const sessionId = transport.sessionId ?? '';
    expect(sessionId).not.toBe('');
    const list = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' });
    const headers = { 'Mcp-Session-Id': sessionId, 'Mcp-Protocol-Version': '2025-11-25' };
    // The session's own connection: answered.
    expect((await post(list, headers)).status).toBe(200);
    // The same session id with another connection of the environment, or with environment B's key
    // (and a connection B has): not found, never served as c1.
    const otherConnection = await post(list, { ...headers, 'Connection-Id': 'c2' });
    expect(otherConnection.status).toBe(404);
    expect(otherConnection.body.error?.data?.code).toBe('mcp_session_not_found');
    const otherEnvironment = await post(list, { ...headers, Authorization: `Bearer ${h.envB.secretKey}` });
    expect(otherEnvironment.status).toBe(404);
    expect(otherEnvironment.body.error?.data?.code).toBe('mcp_session_not_found');
    // Environment B's own c1 sees environment B's deployment (nothing deployed: no tools), never A's.
    const { client: clientB } = await agent({ key: h.envB.secretKey });
    expect((await clientB.listTools()).tools).toEqual([]);
  });

  it('takes the connection from the headers only: a Connection-Id among the arguments is data', async () => {
    const { client } = await agent();
    const smuggled = { 'Connection-Id': 'c2', connectionId: 'c2', connection_id: 'c2', provider_config_key: CRM };
    const result = await client.callTool({ name: 'echo', arguments: smuggled });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toEqual({ connection: 'c1', caller: 'c1', input: smuggled });
    // And `_meta` of the request is not read either.
    const meta = await client.callTool({ name: 'echo', arguments: {}, _meta: { 'Connection-Id': 'c2' } });
    expect(meta.structuredContent).toMatchObject({ connection: 'c1', caller: 'c1' });
  });
});

describe('a redeploy', () => {
  it('changes the list, and tells open sessions with notifications/tools/list_changed', async () => {
    let notified = 0;
    const { client } = await agent({ onListChanged: () => (notified += 1) });
    expect((await client.listTools()).tools.map((tool) => tool.name)).not.toContain('list-labels');
    const added = `      list-labels:
        description: Lists the labels of the tracker
        output: Issue
        endpoint: GET /labels
`;
    await h.deploy(h.envA.id, request(yaml(added, '[create-issue, close-issue, echo, broken, list-labels]')));
    await eventually(async () => (notified >= 1 ? true : undefined), 30_000, 'notifications/tools/list_changed');
    expect((await client.listTools()).tools.map((tool) => tool.name)).toContain('list-labels');
    const result = await client.callTool({ name: 'list-labels', arguments: {} });
    expect(result.structuredContent).toEqual({ id: 'l', title: 'labels', state: 'open', labels: [{ name: 'bug' }] });

    // Only mcp_tools changes: the list changes all the same.
    const seen = notified;
    await h.deploy(h.envA.id, request(yaml(added, '[create-issue]')), true);
    await eventually(async () => (notified > seen ? true : undefined), 30_000, 'a second list_changed');
    expect((await client.listTools()).tools.map((tool) => tool.name)).toEqual(['create-issue']);
    const hidden = await client.callTool({ name: 'echo', arguments: {} }).catch((caught: unknown) => caught);
    expect((hidden as McpError).code).toBe(ErrorCode.InvalidParams);

    // Back to the file the other tests use.
    await h.deploy(h.envA.id, request(yaml()), true);
    await eventually(
      async () => ((await client.listTools()).tools.length === 4 ? true : undefined),
      30_000,
      'the list back',
    );
  });
});

describe('malformed protocol input', () => {
  it('answers each with a JSON-RPC error, and the API carries on', async () => {
    const badJson = await post('{"jsonrpc": "2.0", "method": ');
    expect(badJson.status).toBe(400);
    expect(badJson.body).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32700 } });

    const batch = await post(JSON.stringify([{ jsonrpc: '2.0', id: 1, method: 'tools/list' }]));
    expect(batch.status).toBe(400);
    expect(batch.body.error).toMatchObject({ code: -32600 });
    expect(batch.body.error?.message).toContain('batches are not accepted');

    const notJsonRpc = await post(JSON.stringify({ hello: 'world' }));
    expect(notJsonRpc.status).toBe(400);
    expect(notJsonRpc.body.error?.code).toBe(-32600);

    const unknownMethod = await post(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/destroy' }));
    expect(unknownMethod.status).toBe(200);
    expect(unknownMethod.body).toMatchObject({ jsonrpc: '2.0', id: 7, error: { code: ErrorCode.MethodNotFound } });

    const badParams = await post(
      JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 'echo', arguments: [1, 2] } }),
    );
    expect(badParams.status).toBe(200);
    expect(badParams.body).toMatchObject({ jsonrpc: '2.0', id: 8, error: { code: ErrorCode.InvalidParams } });
    expect(badParams.body.error?.message).toBe(
      'Invalid params of tools/call: params.arguments: Invalid input: expected record, received array',
    );
    const badInitialize = await post(
      JSON.stringify({ jsonrpc: '2.0', id: 'init', method: 'initialize', params: { protocolVersion: 5 } }),
    );
    expect(badInitialize.body).toMatchObject({ id: 'init', error: { code: ErrorCode.InvalidParams } });
    expect(badInitialize.body.error?.message).toContain('params.clientInfo: Invalid input: expected object');
    expect(badInitialize.headers.get('mcp-session-id')).toBeNull();

    const huge = await post(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 9,
        method: 'tools/call',
        params: { name: 'echo', arguments: { x: 'x'.repeat(6_000_000) } },
      }),
    );
    expect(huge.status).toBe(413);
    expect(huge.body).toMatchObject({ jsonrpc: '2.0', error: { data: { code: 'payload_too_large' } } });

    const noAccept = await post(JSON.stringify({ jsonrpc: '2.0', id: 10, method: 'tools/list' }), {
      Accept: 'text/html',
    });
    expect(noAccept.status).toBe(406);
    expect(noAccept.body.error?.message).toContain('Not Acceptable');

    const noHeaders = await post(JSON.stringify({ jsonrpc: '2.0', id: 11, method: 'tools/list' }), {
      'Connection-Id': '',
    });
    expect(noHeaders.status).toBe(400);
    expect(noHeaders.body.error?.data?.code).toBe('missing_connection_headers');

    const noKey = await post(JSON.stringify({ jsonrpc: '2.0', id: 12, method: 'tools/list' }), { Authorization: '' });
    expect(noKey.status).toBe(401);
    expect(noKey.body.error?.data?.code).toBe('missing_authorization');

    const badSession = await post(JSON.stringify({ jsonrpc: '2.0', id: 13, method: 'tools/list' }), {
      'Mcp-Session-Id': 'forged',
    });
    expect(badSession.status).toBe(404);

    const badVersion = await post(JSON.stringify({ jsonrpc: '2.0', id: 14, method: 'tools/list' }), {
      'Mcp-Protocol-Version': '1999-01-01',
    });
    expect(badVersion.status).toBe(400);
    expect(badVersion.body.error?.message).toContain('Unsupported protocol version');

    // Arguments nested 50,000 deep (under the body limit), to a tool that checks its input field by field
    // (create-issue) and to one whose input takes anything (echo): an answer each, never a crash.
    const deep = `${'['.repeat(50_000)}${']'.repeat(50_000)}`;
    for (const [id, name, args] of [
      [16, 'create-issue', `{"title":${deep}}`],
      [17, 'echo', `{"x":${deep}}`],
    ] as const) {
      const answer = await post(
        `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"${name}","arguments":${args}}}`,
      );
      expect([name, answer.status, answer.body.jsonrpc, answer.body.id]).toEqual([name, 200, '2.0', id]);
      // A tool result naming the problem, not a protocol error; nothing ran.
      const result = (answer.body as { result?: { isError?: boolean; content: { text: string }[] } }).result;
      expect(result?.isError, JSON.stringify(answer.body).slice(0, 400)).toBe(true);
      const text = result?.content[0]?.text ?? '';
      expect(text).toContain(name === 'echo' ? 'nested deeper than 200 levels' : 'title: expected string');
    }

    // POST /action/trigger refuses the same input the same way (it answered 500 before: Temporal's
    // payload converter cannot convert it).
    const rest = await fetch(`${h.baseUrl}/action/trigger`, {
      method: 'POST',
      headers: c1JsonHeaders(),
      body: `{"action_name":"echo","input":{"x":${deep}}}`,
    });
    expect(rest.status).toBe(400);
    expect(((await rest.json()) as { error: { code: string } }).error.code).toBe('invalid_request');

    // Without a session, a request is answered all the same (a client that keeps none, curl).
    const stateless = await post(JSON.stringify({ jsonrpc: '2.0', id: 15, method: 'tools/list' }));
    expect(stateless.status).toBe(200);
    expect((stateless.body as { result?: { tools: unknown[] } }).result?.tools).toHaveLength(4);
    expect((await fetch(`${h.baseUrl}/health`)).status).toBe(200);
  });
});

describe('sessions', () => {
  it('are bounded per environment: a flood closes the flooding environment’s oldest, never another’s', async () => {
    const { client: bClient } = await agent({ key: h.envB.secretKey });
    const bSessions = registry.environments().get(h.envB.id)?.length ?? 0;
    const flood: { client: Client; transport: StreamableHTTPClientTransport }[] = [];
    for (let i = 0; i < SESSIONS_PER_ENVIRONMENT * 3; i += 1) flood.push(await agent());
    const environments = registry.environments();
    expect(environments.get(h.envA.id)?.length).toBe(SESSIONS_PER_ENVIRONMENT);
    expect(environments.get(h.envB.id)?.length).toBe(bSessions);
    // Environment B's session still answers; environment A's first sessions are gone (404).
    await bClient.listTools();
    const oldest = flood[0];
    const error = await oldest?.client.listTools().catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StreamableHTTPError);
    expect((error as StreamableHTTPError).code).toBe(404);
    await flood.at(-1)?.client.listTools();
  });

  it('close on DELETE; the id is then unknown', async () => {
    const { transport } = await agent();
    const id = transport.sessionId ?? '';
    await transport.terminateSession();
    const after = await post(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }), { 'Mcp-Session-Id': id });
    expect(after.status).toBe(404);
  });
});

describe('docs/api.md "Actions as tools for AI agents"', () => {
  const doc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
  const section = doc.split('\n## Actions as tools for AI agents\n')[1]?.split('\n## ')[0] ?? '';
  const block = (language: string): string => {
    const code = new RegExp(`^\`\`\`${language}\n([\\s\\S]*?)^\`\`\`$`, 'm').exec(section)?.[1];
    if (code === undefined) throw new Error(`docs/api.md: the section has no ${language} block`);
    return code;
  };
  const env = () => ({
    ...process.env,
    SERVICE_URL: h.baseUrl,
    SERVICE_SECRET_KEY: h.envA.secretKey,
    CONNECTION_ID: 'c1',
    PROVIDER_CONFIG_KEY: TRACKER,
  });
  // Asynchronous: the API answering the example runs in this process.
  const run = promisify(execFile);

  it('its agent example runs as written: it lists the tools and calls one', async () => {
    const root = new URL('../..', import.meta.url).pathname;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', block('js')], {
      cwd: root,
      env: env(),
      timeout: 60_000,
    });
    expect(stdout).toContain('create-issue: Creates an issue in the tracker and returns it\n');
    expect(stdout).toContain('output: {"id":"i-1","title":"Printer on fire","state":"open","labels":[]}');
  });

  it('its curl example answers the tool list without a session', async () => {
    const { stdout } = await run('bash', ['-c', block('sh')], { env: env(), timeout: 60_000 });
    const answer = JSON.parse(stdout) as { id: number; result: { tools: { name: string }[] } };
    expect(answer.id).toBe(1);
    expect(answer.result.tools.map((tool) => tool.name)).toEqual(['create-issue', 'close-issue', 'echo', 'broken']);
  });
});
