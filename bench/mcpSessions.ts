/**
 * MCP sessions (issue 34): what one open session of POST /mcp costs the API process, and what opening
 * one takes, against the SDK's own stateful server as its documentation builds it. `node --expose-gc --import tsx bench/mcpSessions.ts
 * [--sessions N]` (gc is needed to read the heap without garbage). Uses DATABASE_URL / TEMPORAL_ADDRESS
 * when set, else an ephemeral Postgres and a Temporal dev server of the dev stack.
 *
 * 1. The service's API: N sessions opened with `initialize` over HTTP (the bound per environment set to
 *    N, so none is closed), the heap after a full gc before and after, and each initialize's latency.
 * 2. The reference: the SDK's own stateful server as its documentation builds it (a `Server` and a
 *    `StreamableHTTPServerTransport` per session, kept in a Map), on a bare node:http server in the same
 *    process, with no authentication, no database and no tools: the same measurements. Its latency is
 *    the floor of an initialize (no query at all); its memory is not a floor: a `Server` built with the
 *    SDK's defaults compiles a JSON Schema validator of its own, which the service's share one.
 * Prints bytes per session and p50 per initialize for both and the ratios.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createClient } from '../src/client/index.js';
import { Encryptor } from '../src/connections/encryption.js';
import { loadProviderCatalog } from '../src/connections/providers/catalog.js';
import { startTemporal } from '../src/devstack/temporal.js';
import { log } from '../src/log.js';
import { createService } from '../src/service.js';
import { loadSettings } from '../src/settings.js';
import { useBenchDatabase } from './lib/database.js';
import { formatSummary, line, nowMs, summarize } from './lib/stats.js';

const { values: flags } = parseArgs({ options: { sessions: { type: 'string', default: '1000' } } });
const SESSIONS = Number(flags.sessions);
if (!Number.isInteger(SESSIONS) || SESSIONS < 10) throw new Error('--sessions: a whole number of at least 10');
const gc = (globalThis as { gc?: () => void }).gc;
if (gc === undefined) throw new Error('run with node --expose-gc --import tsx bench/mcpSessions.ts');

const INTEGRATION = 'bench-mcp';
const YAML = `
integrations:
  ${INTEGRATION}:
    actions:
      echo:
        description: Returns its input
        input: Issue
        output: Issue
        endpoint: POST /echo
models:
  Issue:
    id: string
    title: string
`;
const ECHO_CODE = `"use strict";\nmodule.exports.default = async function (svc, input) { return input; };\n`;

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
});

function heapAfterGc(): number {
  gc?.();
  gc?.();
  return process.memoryUsage().heapUsed;
}

/** Opens `count` sessions one after the other; the heap growth per session and each latency. */
async function openSessions(url: string, headers: Record<string, string>, count: number) {
  const before = heapAfterGc();
  const latencies: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = nowMs();
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream', ...headers },
      body: INITIALIZE,
    });
    await response.text();
    if (response.status !== 200 || !response.headers.get('mcp-session-id')) {
      throw new Error(`initialize answered ${response.status}`);
    }
    latencies.push(nowMs() - started);
  }
  return { bytesPerSession: (heapAfterGc() - before) / count, latency: summarize(latencies) };
}

/** The SDK's stateful server as its documentation builds it, with the SDK's defaults. */
async function startBareServer(): Promise<{ url: string; close: () => Promise<void>; size: () => number }> {
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const body: unknown = JSON.parse(Buffer.concat(chunks).toString('utf8'));
        const server = new Server({ name: 'bare', version: '1' }, { capabilities: { tools: { listChanged: true } } });
        server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: [] }));
        const transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          enableJsonResponse: true,
          onsessioninitialized: (id) => void transports.set(id, transport),
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, body);
      })();
    });
  });
  http.listen(0, '127.0.0.1');
  await new Promise((resolve) => http.once('listening', resolve));
  const { port } = http.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    size: () => transports.size,
    close: async () => {
      for (const transport of transports.values()) await transport.close();
      http.closeAllConnections();
      await new Promise((resolve) => http.close(resolve));
    },
  };
}

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  log.level = 'silent';
  const database = await useBenchDatabase({ poolSize: 4 });
  const temporalServer = await startTemporal({});
  const stops: (() => Promise<void>)[] = [];
  try {
    console.log(`Postgres ${database.version}`);
    console.log(`Temporal ${temporalServer.version}`);
    console.log(`Node ${process.version}, ${SESSIONS} sessions each`);
    const service = await createService(
      loadSettings({
        TEMPORAL_ADDRESS: temporalServer.address,
        TEMPORAL_NAMESPACE: temporalServer.namespace,
        TEMPORAL_TASK_QUEUE: 'bench-mcp',
        PORT: '0',
        RATE_LIMIT_PER_SECOND: '1000000',
        SERVICE_MCP_SESSIONS_PER_ENVIRONMENT: String(SESSIONS),
      }),
      {
        db: database.pool,
        encryptor: new Encryptor([randomBytes(32)]),
        catalog: loadProviderCatalog({
          extra: {
            [INTEGRATION]: {
              display_name: 'Bench',
              auth_mode: 'API_KEY',
              api_key: { in: 'header', name: 'Authorization', format: 'Bearer ${apiKey}' },
              base_url: 'http://127.0.0.1:1',
            },
          },
        }),
        log: () => undefined,
        backgroundJobs: false,
      },
    );
    stops.push(() => service.stop());
    await service.start();
    const baseUrl = service.apiUrl ?? '';
    const { secretKey } = await service.parts.connections.environments.create({ name: 'bench' });
    const api = createClient({ baseUrl, secretKey });
    await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
    await api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'key-1' },
    });
    await api.deploy.apply({
      yaml: YAML,
      scripts: [{ integration: INTEGRATION, kind: 'action', name: 'echo', code: ECHO_CODE }],
    });
    const headers = {
      Authorization: `Bearer ${secretKey}`,
      'Connection-Id': 'c1',
      'Provider-Config-Key': INTEGRATION,
    };
    // Warm both paths (module code, JIT, the tool set cache) before measuring.
    const bare = await startBareServer();
    stops.push(() => bare.close());
    await openSessions(`${baseUrl}/mcp`, headers, 10);
    await openSessions(bare.url, {}, 10);

    const ours = await openSessions(`${baseUrl}/mcp`, headers, SESSIONS);
    const floor = await openSessions(bare.url, {}, SESSIONS);
    if (bare.size() !== SESSIONS + 10) throw new Error(`the bare server holds ${bare.size()} sessions`);

    console.log('\nheap per open session (after a full gc)');
    console.log(line('POST /mcp of the service', `${(ours.bytesPerSession / 1024).toFixed(1)} KiB`));
    console.log(line('the SDK alone, its defaults', `${(floor.bytesPerSession / 1024).toFixed(1)} KiB`));
    console.log(line('ratio', (ours.bytesPerSession / floor.bytesPerSession).toFixed(2)));
    console.log(
      line(
        'at the default bound (100 per environment)',
        `${((ours.bytesPerSession * 100) / 1024 / 1024).toFixed(1)} MiB per environment`,
      ),
    );
    console.log('\ninitialize, one at a time');
    console.log(line('POST /mcp of the service', formatSummary(ours.latency)));
    console.log(line('the SDK alone', formatSummary(floor.latency)));
    console.log(line('ratio of p50', (ours.latency.p50 / floor.latency.p50).toFixed(2)));
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
    await temporalServer.stop();
    await database.close();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
