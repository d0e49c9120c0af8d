/**
 * Load (issue 10). `npx tsx bench/load.ts [--connections N] [--minutes M] [--actions N]`
 * (default 1,000 connections; the full run is --connections 10000).
 *
 * One worker process (the service's own, SERVICE_ROLE=worker) and the API in this process over an
 * ephemeral dev stack. A deployment with one sync at a 5-minute interval; N connections imported
 * through the API; then a second deploy adds a second sync to all of them (its time is measured).
 * From the service's run history (sync_runs), each entity's scheduled second run against its plan (the end of the first
 * run plus the interval): the delay p50/p99/max. The worker's RSS and
 * CPU are sampled from /proc throughout. Last, bursts of 50 concurrent POST /action/trigger: p50, p99,
 * errors, and the sync runs open when each burst starts.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { spawn } from 'node:child_process';
import { createClient } from '../src/client/index.js';
import { createPool } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';
import { startStack } from '../src/devstack/index.js';
import { createService } from '../src/service.js';
import { loadSettings } from '../src/settings.js';
import { recordFigures } from '../test/chaos/lib/figures.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { mapLimit } from '../src/mapLimit.js';
import { processSample } from './lib/loadParts.js';
import { percentile } from './lib/stats.js';

const {
  connections: N,
  minutes: MINUTES,
  actions: ACTION_BURSTS,
} = positiveIntegerFlags({
  connections: 1000,
  minutes: 5,
  actions: 2,
});
const INTEGRATION = 'load-api';
const TASK_QUEUE = 'bench-load';
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TSX_LOADER = pathToFileURL(join(ROOT, 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

const yaml = (syncs: string[]) => `
integrations:
  ${INTEGRATION}:
    syncs:
${syncs
  .map(
    (name) => `      ${name}:
        description: ${name}
        output: Item
        endpoint: GET /${name}
        sync_type: incremental
        runs: ${MINUTES}m`,
  )
  .join('\n')}
    actions:
      echo:
        description: Returns its input
        output: Item
        endpoint: POST /echo
models:
  Item:
    id: string
`;
const SYNC = (name: string) =>
  `"use strict";\nmodule.exports.default = async function (svc) { const res = await svc.get({ endpoint: '/${name}' }); await svc.batchSave(res.data.items, 'Item'); };\n`;
const ECHO = `"use strict";\nmodule.exports.default = async function (svc, input) { return { id: String(input.n) }; };\n`;
const request = (syncs: string[]) => ({
  yaml: yaml(syncs),
  scripts: [
    ...syncs.map((name) => ({ integration: INTEGRATION, kind: 'sync' as const, name, code: SYNC(name) })),
    { integration: INTEGRATION, kind: 'action' as const, name: 'echo', code: ECHO },
  ],
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
const log = (message: string) => console.log(`[load ${new Date().toISOString().slice(11, 19)}] ${message}`);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'bench-load-'));
  const stack = await startStack({ ephemeral: true, database: 'bench_load' });
  const db = createPool({ url: stack.postgres.url, max: 20, applicationName: 'bench-load' });
  const stops: (() => Promise<unknown>)[] = [async () => db.end(), async () => stack.stop()];
  try {
    await migrate(db);
    log(
      `Temporal ${stack.temporal.version}; Postgres ${stack.postgres.version}; ${N} connections × 2 syncs every ${MINUTES} min`,
    );
    const fake = createServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items: [{ id: `${req.url ?? ''}`.slice(1, 20) || 'x' }] }));
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    stops.unshift(() => new Promise((resolve) => fake.close(resolve)));
    const providers = join(dir, 'providers.yaml');
    writeFileSync(
      providers,
      `${INTEGRATION}:\n  display_name: Load\n  auth_mode: API_KEY\n  api_key: { in: header, name: Authorization, format: 'Bearer \${apiKey}' }\n  base_url: http://127.0.0.1:${(fake.address() as AddressInfo).port}\n`,
    );
    const key = randomBytes(32);

    // The worker under measurement: the service's own process, worker role only.
    const serviceEnv = {
      DATABASE_URL: stack.postgres.url,
      TEMPORAL_ADDRESS: stack.temporal.address,
      TEMPORAL_NAMESPACE: stack.temporal.namespace,
      TEMPORAL_TASK_QUEUE: TASK_QUEUE,
      SERVICE_ENCRYPTION_KEY: key.toString('base64'),
      SERVICE_PROVIDERS_FILE: providers,
      // The fake API only (docs/operations.md "Outbound requests").
      SERVICE_OUTBOUND_ALLOW: `127.0.0.1:${(fake.address() as AddressInfo).port}`,
      DATABASE_POOL_SIZE: '20',
    };
    const worker = spawn(process.execPath, ['--import', TSX_LOADER, join(ROOT, 'src', 'main.ts')], {
      env: { ...process.env, ...serviceEnv, SERVICE_ROLE: 'worker' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    stops.unshift(async () => {
      worker.kill('SIGTERM');
      await new Promise((resolve) => worker.once('exit', resolve));
    });
    await new Promise<void>((resolve, reject) => {
      let out = '';
      worker.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes('ready.')) resolve();
      });
      worker.once('exit', (code) => reject(new Error(`the worker exited (${code}): ${out}`)));
    });
    const samples: { at: number; cpuS: number; rssMb: number }[] = [];
    const sampler = setInterval(() => {
      const now = processSample(worker.pid!);
      if (now) samples.push({ at: Date.now(), ...now });
    }, 1000);
    stops.unshift(async () => clearInterval(sampler));

    // The API in this process (not measured), built by the composition root from the worker's settings
    // (the worker encrypts every payload with the service key: the API's client must read them).
    const service = await createService(
      loadSettings({ ...serviceEnv, SERVICE_ROLE: 'api', PORT: '0', RATE_LIMIT_PER_SECOND: '100000' }),
      {
        db,
        log: () => undefined,
        // Request lines would flood the output; errors still show.
        apiDeps: { logger: { info: () => undefined, error: (message, fields) => console.error(message, fields) } },
      },
    );
    stops.unshift(() => service.stop());
    await service.start();
    const baseUrl = service.apiUrl ?? '';
    const { connections, deployments } = service.parts;
    const { environment, secretKey } = await connections.environments.create({ name: 'load' });
    const api = createClient({ baseUrl, secretKey });
    await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
    await deployments.apply(environment.id, request(['alpha']), { allowDestructive: false });

    let started = Date.now();
    const ids = Array.from({ length: N }, (_, i) => `conn-${String(i).padStart(5, '0')}`);
    await mapLimit(ids, 8, (id) =>
      api.connections.import({
        provider_config_key: INTEGRATION,
        connection_id: id,
        credentials: { type: 'API_KEY', apiKey: `key-${id}` },
      }),
    );
    const importS = (Date.now() - started) / 1000;
    log(`imported ${N} connections (each starts its sync) in ${round(importS, 1)} s`);

    started = Date.now();
    await deployments.apply(environment.id, request(['alpha', 'beta']), { allowDestructive: false });
    const deployS = (Date.now() - started) / 1000;
    log(`deploy adding a second sync to all ${N} connections: ${round(deployS, 1)} s`);

    // The runs, from the service's run history (sync_runs; querying 2N entities one by one would load
    // the worker we measure). A run is its entity's execution (issue 31), so Temporal's visibility lists
    // executions, not runs. An entity plans its next run at the end of the last one plus the interval
    // (nextRunAt = finishedAt + runs).
    const entities = 2 * N;
    const intervalMs = MINUTES * 60_000;
    const runsByEntity = async (): Promise<Map<string, { start: number; close: number }[]>> => {
      const map = new Map<string, { start: number; close: number }[]>();
      const { rows } = await db.query<{
        connection_id: string;
        sync_name: string;
        started_at: Date;
        finished_at: Date;
      }>('SELECT connection_id, sync_name, started_at, finished_at FROM sync_runs');
      for (const run of rows) {
        const entity = `${run.connection_id}:${run.sync_name}`;
        map.set(entity, [
          ...(map.get(entity) ?? []),
          { start: run.started_at.getTime(), close: run.finished_at.getTime() },
        ]);
      }
      return map;
    };
    started = Date.now();
    let runs = await runsByEntity();
    while (runs.size < entities) {
      log(`${runs.size}/${entities} entities have run once`);
      if (Date.now() - started > intervalMs) throw new Error('the first runs did not all finish within one interval');
      await sleep(10_000);
      runs = await runsByEntity();
    }
    const firstRoundS = (Date.now() - started) / 1000;
    const cpuBefore = samples.at(-1)!;
    const lastPlanned = Math.max(
      ...[...runs.values()].map((list) => Math.min(...list.map((r) => r.close)) + intervalMs),
    );
    log(
      `all ${entities} ran once; waiting for the scheduled round (the last is planned ${round((lastPlanned - Date.now()) / 1000)} s from now)`,
    );
    while (Date.now() < lastPlanned + 10_000) await sleep(5000);
    const delays: number[] = [];
    for (let attempt = 0; attempt < 30; attempt++) {
      runs = await runsByEntity();
      delays.length = 0;
      for (const list of runs.values()) {
        const [first, second] = list.sort((x, y) => x.start - y.start);
        if (first && second) delays.push(second.start - (first.close + intervalMs));
      }
      if (delays.length === entities) break;
      log(`${delays.length}/${entities} scheduled runs finished`);
      await sleep(10_000);
    }
    const cpuAfter = samples.at(-1)!;
    delays.sort((a, b) => a - b);
    const window = samples.filter((s) => s.at >= cpuBefore.at && s.at <= cpuAfter.at);
    const steadyCpu = (cpuAfter.cpuS - cpuBefore.cpuS) / ((cpuAfter.at - cpuBefore.at) / 1000);

    log(
      `scheduled start delay p50 ${round(percentile(delays, 50))} ms, p99 ${round(percentile(delays, 99))} ms; ` +
        `worker ${round(steadyCpu, 2)} cores, RSS ${round(Math.max(...samples.map((s) => s.rssMb)))} MB`,
    );

    // 50 concurrent action triggers, in bursts (behind whatever sync runs are queued at that moment).
    const latencies: number[] = [];
    let errors = 0;
    // The sync runs open when each burst starts: the backlog the actions would queue behind if they
    // shared the sync runs' task queue (they have a queue of their own, workflows/taskQueues.ts).
    const openSyncRuns: number[] = [];
    for (let burst = 0; burst < ACTION_BURSTS; burst++) {
      // Each sync run holds a run slot from its beginRun step until it is recorded (src/runtime/runSlots.ts).
      const open = await db.query<{ n: string }>("SELECT count(*) AS n FROM run_slots WHERE kind = 'sync'");
      openSyncRuns.push(Number(open.rows[0]!.n));
      await Promise.all(
        Array.from({ length: 50 }, async (_, i) => {
          const t = performance.now();
          const response = await fetch(`${baseUrl}/action/trigger`, {
            method: 'POST',
            headers: {
              authorization: `Bearer ${secretKey}`,
              'content-type': 'application/json',
              'connection-id': ids[i % ids.length]!,
              'provider-config-key': INTEGRATION,
            },
            body: JSON.stringify({ action_name: 'echo', input: { n: i } }),
          }).catch(() => undefined);
          if (!response || response.status !== 200) errors++;
          await response?.text();
          latencies.push(performance.now() - t);
        }),
      );
    }
    latencies.sort((a, b) => a - b);

    const figures = {
      connections: N,
      syncEntities: entities,
      intervalMin: MINUTES,
      importS: round(importS, 1),
      deployAddingSyncS: round(deployS, 1),
      firstRoundS: round(firstRoundS, 1),
      scheduledRunsMeasured: delays.length,
      startDelayP50Ms: round(percentile(delays, 50)),
      startDelayP99Ms: round(percentile(delays, 99)),
      startDelayMaxMs: round(delays.at(-1) ?? Number.NaN),
      workerRssMaxMb: round(Math.max(...samples.map((s) => s.rssMb))),
      workerRssSteadyMb: round(window.reduce((sum, s) => sum + s.rssMb, 0) / Math.max(1, window.length)),
      workerCpuSteadyCores: round(steadyCpu, 2),
      workerCpuTotalS: round(samples.at(-1)!.cpuS, 1),
      actionTriggers: latencies.length,
      syncRunsOpenAtBursts: openSyncRuns.join(' '),
      actionP50Ms: round(percentile(latencies, 50)),
      actionP99Ms: round(percentile(latencies, 99)),
      actionErrors: errors,
    };
    recordFigures('load', figures);
    for (const [name, value] of Object.entries(figures)) console.log(`  ${name.padEnd(24)} ${value}`);
  } finally {
    for (const stop of stops) await stop().catch((error: unknown) => console.error(error));
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
