/**
 * REST API benchmark (issues 7, 31). `npx tsx bench/api.ts [--records N] [--connections N] [--requests N]
 * [--concurrency N] [--actions N]`. Uses DATABASE_URL / TEMPORAL_ADDRESS when set, else an ephemeral
 * Postgres and a Temporal dev server of the dev stack.
 *
 * 1. GET /records at N stored records (default 1,000,000 over 20 connections, about 200 bytes each):
 *    100-record pages at random cursors of random connections, through the API over HTTP (keep-alive,
 *    `--concurrency` requests in flight, from an application process of its own: bench/lib/apiReader.ts),
 *    straight from the RecordStore, as the same SQL through the raw pg pool (the statement the API
 *    sends for that page, its rows encoded into the answer the API sends, by the same encoder), and
 *    through a bare `node:http` server that answers that SQL's answer with no authentication, checks
 *    or middleware, read by the same application process (the HTTP hop's own cost), in the same run,
 *    in alternating blocks. Prints throughput and latency of each and the ratios API / SQL (issue
 *    31's goal: ≥ 0.5 in pages/s, p99 ≤ 2× SQL's), API / bare HTTP and API / store.
 * 2. POST /action/trigger of a deployed action that returns its input through the API (HTTP, auth,
 *    checks, the run), against a bare workflow that returns at once (`floorNoop`) started by the
 *    service's own client on the same queue and worker: p50 and p99 of both and the ratio (issue 31's
 *    goal: ≤ 1.3×). One call at a time, alternating.
 */
import { randomBytes } from 'node:crypto';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { parseArgs } from 'node:util';
import { fork } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { from as copyFrom } from 'pg-copy-streams';
import { log } from '../src/log.js';
import { createClient } from '../src/client/index.js';
import { Encryptor } from '../src/connections/encryption.js';
import { loadProviderCatalog } from '../src/connections/providers/catalog.js';
import { startTemporal } from '../src/devstack/temporal.js';
import { contentHash, copyText, encodeCursor } from '../src/records/encoding.js';
import {
  listQueryBuilder,
  SCOPE_ID_SQL,
  scopeParams,
  toPageJson,
  type ListRow,
} from '../src/records/postgresRecordStore.js';
import { bundleWorkflows } from '../src/temporal/worker.js';
import { actionTaskQueue } from '../workflows/taskQueues.js';
import { createService } from '../src/service.js';
import { loadSettings } from '../src/settings.js';
import type { BlockResult, ReadBlock } from './lib/apiReader.js';
import { useBenchDatabase } from './lib/database.js';
import { formatCount, formatGoal, formatMs, formatSummary, line, nowMs, prng, summarize, timed } from './lib/stats.js';

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string', default: '1000000' },
    connections: { type: 'string', default: '20' },
    requests: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '4' },
    actions: { type: 'string', default: '200' },
  },
});
const positive = (name: string, value: string | undefined): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${String(value)}`);
  return n;
};
const TOTAL = positive('records', flags.records);
const CONNECTIONS = positive('connections', flags.connections);
const REQUESTS = positive('requests', flags.requests);
const CONCURRENCY = positive('concurrency', flags.concurrency);
const ACTIONS = positive('actions', flags.actions);
const PER_CONNECTION = Math.ceil(TOTAL / CONNECTIONS);
const PAGE = 100;
const INTEGRATION = 'bench-api';
const connectionId = (c: number) => `conn-${String(c).padStart(3, '0')}`;

const YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      issues:
        description: Issues
        output: Issue
        endpoint: GET /issues
        sync_type: incremental
        auto_start: false
    actions:
      echo:
        description: Returns its input
        output: Issue
        endpoint: POST /echo
models:
  Issue:
    id: string
    title: string
`;
const SYNC_CODE = `"use strict";\nmodule.exports.default = async function (svc) {};\n`;
const ECHO_CODE = `"use strict";\nmodule.exports.default = async function (svc, input) { return { id: String(input.n), title: 'echo' }; };\n`;

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  // Request lines would flood the output and cost time the benchmark measures.
  log.level = 'silent';
  const database = await useBenchDatabase({ poolSize: 10 });
  const temporalServer = await startTemporal({});
  const { pool } = database;
  const stops: (() => Promise<void>)[] = [];
  try {
    console.log(`Postgres ${database.version}`);
    console.log(`Temporal ${temporalServer.version}`);

    // ---- the service, composed as the composition root would --------------------------------------
    const service = await createService(
      loadSettings({
        TEMPORAL_ADDRESS: temporalServer.address,
        TEMPORAL_NAMESPACE: temporalServer.namespace,
        TEMPORAL_TASK_QUEUE: 'bench-api',
        PORT: '0',
        RATE_LIMIT_PER_SECOND: '1000000',
      }),
      {
        db: pool,
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
        // The service's workflows plus Temporal's floors (bench/workflows.ts): the bare workflow the
        // action is compared with runs on the same worker and queue.
        workflowBundle: await bundleWorkflows(fileURLToPath(new URL('./workflows.ts', import.meta.url))),
      },
    );
    stops.push(() => service.stop());
    await service.start();
    const { connections, records } = service.parts;
    const baseUrl = service.apiUrl ?? '';

    const { environment, secretKey } = await connections.environments.create({ name: 'bench' });
    // Node's fetch keeps connections alive, as an application's client would.
    const api = createClient({ baseUrl, secretKey });
    await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
    for (let c = 0; c < CONNECTIONS; c++) {
      await api.connections.import({
        provider_config_key: INTEGRATION,
        connection_id: connectionId(c),
        credentials: { type: 'API_KEY', apiKey: `key-${c}` },
      });
    }
    await api.deploy.apply({
      yaml: YAML,
      scripts: [
        { integration: INTEGRATION, kind: 'sync', name: 'issues', code: SYNC_CODE },
        { integration: INTEGRATION, kind: 'action', name: 'echo', code: ECHO_CODE },
      ],
    });

    // ---- load: COPY straight into the records table (setup, not measured) -------------------------
    const loaded = await timed(async () => {
      for (let c = 0; c < CONNECTIONS; c++) {
        const scope = await pool.query<{ scope_id: string }>(
          `INSERT INTO record_scopes (environment_id, integration_id, connection_id, model) VALUES ($1, $2, $3, 'Issue') RETURNING scope_id`,
          [environment.id, INTEGRATION, connectionId(c)],
        );
        const scopeId = scope.rows[0]?.scope_id ?? '';
        const stamp = new Date().toISOString();
        const client = await pool.connect();
        try {
          const stream = client.query(
            copyFrom(
              'COPY records (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id) FROM STDIN',
            ),
          );
          async function* lines(): AsyncGenerator<string> {
            let buffer = '';
            for (let i = 0; i < PER_CONNECTION; i++) {
              const json = JSON.stringify({
                id: `${c}-${i}`,
                title: `issue ${i} of connection ${c}`,
                state: i % 3 === 0 ? 'closed' : 'open',
                comments: i % 17,
                labels: ['bug', 'api'],
                updated_at: stamp,
              });
              buffer += `${scopeId}\t${copyText(`${c}-${i}`)}\t${copyText(json)}\t${contentHash(json)}\tissues\t${stamp}\t${stamp}\tADDED\tbench\n`;
              if (buffer.length > 262_144) {
                yield buffer;
                buffer = '';
              }
            }
            if (buffer) yield buffer;
          }
          await pipeline(Readable.from(lines()), stream);
        } finally {
          client.release();
        }
      }
      await pool.query('ANALYZE records');
    });
    const count = await pool.query<{ n: string }>('SELECT count(*) AS n FROM records');
    console.log(
      `\nloaded ${formatCount(Number(count.rows[0]?.n))} records over ${CONNECTIONS} connections in ${formatMs(loaded.ms)}`,
    );

    // ---- 1. a page of GET /records: API vs store ---------------------------------------------------
    const bounds = await pool.query<{ connection_id: string; lo: string; hi: string }>(
      `SELECT s.connection_id, min(r.position) AS lo, max(r.position) AS hi FROM records r JOIN record_scopes s USING (scope_id) GROUP BY s.connection_id`,
    );
    const ranges = new Map(bounds.rows.map((row) => [row.connection_id, [Number(row.lo), Number(row.hi)] as const]));
    const random = prng(7);
    const pages = Array.from({ length: REQUESTS }, () => {
      const c = Math.floor(random() * CONNECTIONS);
      const [lo, hi] = ranges.get(connectionId(c)) ?? [0, 0];
      return {
        connection: connectionId(c),
        cursor: encodeCursor(String(lo + Math.floor(random() * Math.max(1, hi - lo - PAGE)))),
      };
    });
    // The application reading through the API is a process of its own (bench/lib/apiReader.ts), as it
    // is in production: the API server's event loop here is not also the client's.
    const reader = fork(fileURLToPath(new URL('./lib/apiReader.ts', import.meta.url)), [], {
      execArgv: ['--import', 'tsx'],
      env: { ...process.env, BENCH_API_URL: baseUrl, BENCH_SECRET_KEY: secretKey, BENCH_INTEGRATION: INTEGRATION },
    });
    stops.push(async () => {
      reader.kill();
    });
    const readerCpu = { ms: 0 };
    const runApi = (slice: typeof pages, url?: string) =>
      new Promise<{ latencies: number[]; ms: number }>((resolve, reject) => {
        const failed = (code: number | null) => reject(new Error(`the API reader exited with ${code}`));
        reader.once('exit', failed);
        reader.once('message', (result: BlockResult) => {
          reader.off('exit', failed);
          readerCpu.ms += result.cpuMs;
          resolve(result);
        });
        const block: ReadBlock = {
          pages: slice,
          concurrency: CONCURRENCY,
          limit: PAGE,
          ...(url ? { baseUrl: url } : {}),
        };
        reader.send(block);
      });
    const storeOptions = (page: (typeof pages)[number]) => ({
      environmentId: environment.id,
      integrationId: INTEGRATION,
      connectionId: page.connection,
      model: 'Issue',
      cursor: page.cursor,
      limit: PAGE,
    });
    const viaStore = async (page: (typeof pages)[number]) => {
      const result = await records.listRecords(storeOptions(page));
      // What the API does after reading: the page becomes JSON.
      if (JSON.stringify(result).length === 0 || result.records.length !== PAGE) throw new Error('short store page');
    };
    // The same SQL: the statement the API sends for a page of a scope it has read before (the scope
    // ids resolved once, as the store keeps them), through the raw pool, its rows encoded into the
    // answer a client needs by the encoder the API uses (each record's stored JSON with its metadata
    // spliced in: the least work that gives a client its page).
    const scopeIds = new Map<string, string>();
    for (let c = 0; c < CONNECTIONS; c++) {
      const options = storeOptions({ connection: connectionId(c), cursor: encodeCursor('0') });
      const scope = await pool.query<{ scope_id: string }>(SCOPE_ID_SQL, scopeParams(options));
      scopeIds.set(connectionId(c), scope.rows[0]?.scope_id ?? '0');
    }
    const sqlPage = async (page: (typeof pages)[number]) => {
      const query = listQueryBuilder(storeOptions(page))(scopeIds.get(page.connection) ?? '0');
      const result = await pool.query<ListRow>(query);
      const answer = toPageJson(result.rows, query.limit);
      if (answer.count !== PAGE) throw new Error(`SQL page of ${answer.count} records`);
      return answer.json;
    };
    const viaSql = async (page: (typeof pages)[number]) => {
      await sqlPage(page);
    };
    // The bare HTTP reference: the same SQL's answer from a plain node:http server in this process (no
    // authentication, validation, rate limit, logs or metrics), read by the same application process
    // with the same client. API / this is what the service's own code costs over the HTTP hop.
    const bareServer = createHttpServer((req, res) => {
      const url = new URL(req.url ?? '/', 'http://bench');
      const connection = req.headers['connection-id'];
      const cursor = url.searchParams.get('cursor');
      if (typeof connection !== 'string' || cursor === null) {
        res.writeHead(400).end();
        return;
      }
      sqlPage({ connection, cursor }).then(
        (json) => {
          res.writeHead(200, {
            'Content-Type': 'application/json; charset=utf-8',
            'Content-Length': Buffer.byteLength(json),
          });
          res.end(json);
        },
        (error: unknown) => {
          console.error(error);
          res.writeHead(500).end();
        },
      );
    });
    await new Promise<void>((resolve) => bareServer.listen(0, '127.0.0.1', resolve));
    stops.push(() => new Promise<void>((resolve) => bareServer.close(() => resolve())));
    const bareUrl = `http://127.0.0.1:${(bareServer.address() as AddressInfo).port}`;
    // Where an API page's time goes: the key lookup and the store's read, timed inside the server.
    const spans = { authenticate: 0, read: 0 };
    const timedMethod = <T extends object>(owner: T, name: keyof T & string, span: 'authenticate' | 'read') => {
      if (typeof owner[name] !== 'function') return;
      const original = (owner[name] as (...args: unknown[]) => Promise<unknown>).bind(owner);
      (owner as Record<string, unknown>)[name] = async (...args: unknown[]) => {
        const t = nowMs();
        try {
          return await original(...args);
        } finally {
          spans[span] += nowMs() - t;
        }
      };
    };
    timedMethod(connections.environments, 'findBySecretKey', 'authenticate');
    timedMethod(records, 'listRecordsJson', 'read');
    // CPU of this process per page, by path: the API server, or the store or SQL and their caller.
    const cpu = { api: 0, store: 0, sql: 0, bare: 0 };
    const cpuMs = () => {
      const usage = process.cpuUsage();
      return (usage.user + usage.system) / 1000;
    };
    async function run(kind: (page: (typeof pages)[number]) => Promise<void>, slice: typeof pages) {
      const latencies: number[] = [];
      let next = 0;
      const started = nowMs();
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < slice.length) {
            const page = slice[next++]!;
            const t = nowMs();
            await kind(page);
            latencies.push(nowMs() - t);
          }
        }),
      );
      return { latencies, ms: nowMs() - started };
    }
    // Warm every path (connections, plans, caches), then alternate blocks so drift hits all alike.
    await runApi(pages.slice(0, 200));
    await run(viaStore, pages.slice(0, 200));
    await run(viaSql, pages.slice(0, 200));
    await runApi(pages.slice(0, 200), bareUrl);
    const apiLat: number[] = [];
    const httpLat: number[] = [];
    let bareMs = 0;
    const storeLat: number[] = [];
    const sqlLat: number[] = [];
    let apiMs = 0;
    let storeMs = 0;
    let sqlMs = 0;
    const BLOCK = 250;
    spans.authenticate = 0;
    spans.read = 0;
    readerCpu.ms = 0;
    const readerCpuApi = { ms: 0 };
    for (let start = 0; start < pages.length; start += BLOCK) {
      const slice = pages.slice(start, start + BLOCK);
      let c = cpuMs();
      const readerBefore = readerCpu.ms;
      const a = await runApi(slice);
      cpu.api += cpuMs() - c;
      readerCpuApi.ms += readerCpu.ms - readerBefore;
      c = cpuMs();
      const s = await run(viaStore, slice);
      cpu.store += cpuMs() - c;
      c = cpuMs();
      const q = await run(viaSql, slice);
      cpu.sql += cpuMs() - c;
      c = cpuMs();
      const b = await runApi(slice, bareUrl);
      cpu.bare += cpuMs() - c;
      httpLat.push(...b.latencies);
      bareMs += b.ms;
      apiLat.push(...a.latencies);
      storeLat.push(...s.latencies);
      sqlLat.push(...q.latencies);
      apiMs += a.ms;
      storeMs += s.ms;
      sqlMs += q.ms;
    }
    const apiRps = (pages.length / apiMs) * 1000;
    const storeRps = (pages.length / storeMs) * 1000;
    const sqlRps = (pages.length / sqlMs) * 1000;
    const bareRps = (pages.length / bareMs) * 1000;
    const apiSummary = summarize(apiLat);
    const sqlSummary = summarize(sqlLat);
    console.log(
      `\nGET /records, ${PAGE}-record pages at random cursors, ${CONCURRENCY} in flight, ${formatCount(pages.length)} pages each`,
    );
    console.log(
      line('API (HTTP keep-alive, auth, checks, JSON)', `${formatCount(apiRps)} pages/s; ${formatSummary(apiSummary)}`),
    );
    console.log(
      line(
        'RecordStore.listRecords (same pages)',
        `${formatCount(storeRps)} pages/s; ${formatSummary(summarize(storeLat))}`,
      ),
    );
    console.log(
      line('the same SQL through the raw pool', `${formatCount(sqlRps)} pages/s; ${formatSummary(sqlSummary)}`),
    );
    console.log(
      line(
        'bare node:http answering the same SQL',
        `${formatCount(bareRps)} pages/s; ${formatSummary(summarize(httpLat))}`,
      ),
    );
    console.log(formatGoal({ label: 'ratio API / SQL (pages/s)', value: apiRps / sqlRps, goal: 0.5, kind: 'min' }));
    console.log(
      formatGoal({
        label: 'p99 API / p99 SQL',
        value: apiSummary.p99 / sqlSummary.p99,
        goal: 2,
        kind: 'max',
        unit: '×',
      }),
    );
    console.log(line('ratio API / store (throughput)', (apiRps / storeRps).toFixed(2)));
    console.log(
      line(
        'ratio API / bare HTTP, bare HTTP / SQL',
        `${(apiRps / bareRps).toFixed(2)}, ${(bareRps / sqlRps).toFixed(2)} (p99 ${(apiSummary.p99 / summarize(httpLat).p99).toFixed(2)}×, ${(summarize(httpLat).p99 / sqlSummary.p99).toFixed(2)}×)`,
      ),
    );
    console.log(
      line(
        'API page, mean ms inside the server',
        `key lookup ${(spans.authenticate / pages.length).toFixed(2)}, store read ${(spans.read / pages.length).toFixed(2)}, of ${apiSummary.mean.toFixed(2)} end to end`,
      ),
    );
    console.log(
      line(
        'CPU ms per page of this process',
        `API server ${(cpu.api / pages.length).toFixed(2)} + its client (another process) ${(readerCpuApi.ms / pages.length).toFixed(2)}, store ${(cpu.store / pages.length).toFixed(2)}, SQL ${(cpu.sql / pages.length).toFixed(2)}, bare HTTP server ${(cpu.bare / pages.length).toFixed(2)} + its client ${((readerCpu.ms - readerCpuApi.ms) / pages.length).toFixed(2)}`,
      ),
    );
    // The floor of any call: HTTP round trip, Express, one trivial query (GET /health, no key).
    const health = await run(
      async () => {
        await api.health();
      },
      pages.slice(0, 1000),
    );
    console.log(line('GET /health (HTTP + SELECT 1), for scale', formatSummary(summarize(health.latencies))));

    // ---- 2. action trigger through the API ------------------------------------------------------------
    const connection = { connectionId: connectionId(0), providerConfigKey: INTEGRATION };
    const bare = () =>
      service.temporal.workflow.execute('floorNoop', {
        taskQueue: actionTaskQueue(service.taskQueue),
        workflowId: `floor-${randomBytes(8).toString('hex')}`,
      });
    for (let i = 0; i < 10; i++) {
      await api.actions.trigger(connection, { action_name: 'echo', input: { n: i } });
      await bare();
    }
    const actionLat: number[] = [];
    const bareLat: number[] = [];
    for (let i = 0; i < ACTIONS; i++) {
      const t = nowMs();
      const outcome = await api.actions.trigger(connection, { action_name: 'echo', input: { n: i } });
      actionLat.push(nowMs() - t);
      if (!outcome.ok) throw new Error('action failed');
      bareLat.push((await timed(bare)).ms);
    }
    const actionSummary = summarize(actionLat);
    const bareSummary = summarize(bareLat);
    console.log(
      `\nPOST /action/trigger (echo action, one at a time, ${ACTIONS} runs, alternating with a bare workflow)`,
    );
    console.log(line('through the API', formatSummary(actionSummary)));
    console.log(line('bare workflow (client.execute)', formatSummary(bareSummary)));
    console.log(
      formatGoal({
        label: 'p50 action / bare workflow',
        value: actionSummary.p50 / bareSummary.p50,
        goal: 1.3,
        kind: 'max',
        unit: '×',
      }),
    );
    console.log(line('p99 action / bare workflow', `${(actionSummary.p99 / bareSummary.p99).toFixed(2)}×`));
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
