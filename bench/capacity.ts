/**
 * Capacity (issue 21, item 6). `npx tsx bench/capacity.ts [--connections N] [--workers W]
 * [--syncs K] [--interval-s S] [--window-s S] [--records R] [--shards H] [--import-concurrency C]
 * [--max-minutes M]`
 *
 * The production topology (src/devstack/topology.ts): the real Temporal server v1.29.1 on Postgres
 * persistence, one SERVICE_ROLE=api process and W SERVICE_ROLE=worker processes, each its own OS
 * process, on a Postgres cluster of its own (scratch, fsync on, as production). A deployment with one
 * sync every S seconds whose script fetches one page of R records from a fake API on loopback and saves
 * them (--syncs such syncs, each with a model of its own); N connections imported through the API (a
 * sync entity per connection and sync). Once every entity has run once,
 * a measurement window of --window-s seconds:
 *
 * - CPU seconds and RSS from /proc of each worker, the API, the Temporal server, and every Postgres
 *   process split by the database it serves (pg_stat_activity: Temporal's, its visibility's, the
 *   service's, background);
 * - pg_stat_database deltas (commits, tuples written, blocks read and hit) per database, WAL bytes;
 * - runs completed in the window (the service's run history, sync_runs, by finish time): per second, per worker;
 * - each scheduled run's start delay: its start against its plan (the previous run's close plus the
 *   interval); a run still not started at the end of the window counts with its lateness so far.
 *
 * Everything is printed per 1,000 sync entities as well. Loopback only; bounded by --max-minutes
 * (default 14): every wait checks it and the bench stops everything it started on the way out.
 */
import { mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { stringify } from 'yaml';
import { createClient } from '../src/client/index.js';
import { createPool } from '../src/db/pool.js';
import { startPostgres } from '../src/devstack/postgres.js';
import { startTopology } from '../src/devstack/topology.js';
import { buildWorkflowBundle, saveWorkflowBundle } from '../src/temporal/workflowBundle.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { mapLimit } from '../src/mapLimit.js';
import { processSample } from './lib/loadParts.js';
import { percentile } from './lib/stats.js';

const flags = positiveIntegerFlags({
  connections: 1000,
  workers: 2,
  'interval-s': 60,
  'window-s': 240,
  records: 10,
  syncs: 1,
  'import-concurrency': 8,
  shards: 4,
  'max-minutes': 14,
});
const N = flags.connections;
/** Sync entities: one per connection and sync. */
const E = N * flags.syncs;
const INTERVAL_MS = flags['interval-s'] * 1000;
const WINDOW_MS = flags['window-s'] * 1000;
const DEADLINE = Date.now() + flags['max-minutes'] * 60_000;
const INTEGRATION = 'capacity-api';
const SERVICE_DB = 'integration_service';
const TEMPORAL_DB = 'temporal';

const SYNCS = Array.from({ length: flags.syncs }, (_, i) => i);
const YAML = stringify({
  integrations: {
    [INTEGRATION]: {
      syncs: Object.fromEntries(
        SYNCS.map((i) => [
          `items${i}`,
          {
            description: `items ${i}`,
            output: `Item${i}`,
            endpoint: `GET /items/${i}`,
            sync_type: 'incremental',
            runs: `${flags['interval-s']}s`,
          },
        ]),
      ),
    },
  },
  models: Object.fromEntries(SYNCS.map((i) => [`Item${i}`, { id: 'string', n: 'number' }])),
});
const SYNC = (i: number) =>
  `"use strict";\nmodule.exports.default = async function (svc) { const res = await svc.get({ endpoint: '/items/${i}' }); await svc.batchSave(res.data.items, 'Item${i}'); };\n`;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const round = (n: number, digits = 0) => Math.round(n * 10 ** digits) / 10 ** digits;
const log = (message: string) => console.log(`[capacity ${new Date().toISOString().slice(11, 19)}] ${message}`);
const loadAverage = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
function checkDeadline(what: string): void {
  if (Date.now() > DEADLINE) throw new Error(`--max-minutes ${flags['max-minutes']} reached while ${what}`);
}

/** The pid of the Temporal server started with `--root <stateDir>`, from /proc. */
function temporalServerPid(stateDir: string): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const args = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      if (args.includes('--root') && args[args.indexOf('--root') + 1] === stateDir) return Number(entry);
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** CPU per group over a window, from samples of each pid (a pid born inside the window counts from 0). */
class CpuWindow {
  private pids = new Map<number, { group: string; first: number; last: number }>();
  readonly rssMaxMb = new Map<string, number>();
  open = false;

  see(pid: number, group: string): void {
    const now = processSample(pid);
    if (!now) return;
    if (this.open) this.rssMaxMb.set(group, Math.max(this.rssMaxMb.get(group) ?? 0, now.rssMb));
    const known = this.pids.get(pid);
    if (known) known.last = now.cpuS;
    else this.pids.set(pid, { group, first: this.open ? 0 : now.cpuS, last: now.cpuS });
  }

  /** Forgets what was seen before: the window starts at the next round of `see`. */
  start(): void {
    this.pids.clear();
    this.rssMaxMb.clear();
  }

  byGroup(): Map<string, number> {
    const sums = new Map<string, number>();
    for (const { group, first, last } of this.pids.values()) sums.set(group, (sums.get(group) ?? 0) + last - first);
    return sums;
  }
}

interface DbStats {
  xact_commit: number;
  tup_inserted: number;
  tup_updated: number;
  tup_deleted: number;
  blks_read: number;
  blks_hit: number;
}

async function main(): Promise<void> {
  const scratch = mkdtempSync(join(tmpdir(), 'bench-capacity-'));
  const stops: (() => Promise<unknown>)[] = [];
  try {
    log(
      `${N} connections × ${flags.syncs} syncs = ${E} sync entities, ${flags.workers} workers, each sync every ${flags['interval-s']} s of ${flags.records} records, ` +
        `${flags.shards} history shards; load average at start ${loadAverage()}`,
    );
    const fake = createServer((req, res) => {
      const key = (req.headers.authorization ?? '').replace(/^Bearer /, '');
      const items = Array.from({ length: flags.records }, (_, i) => ({
        id: `${key}${req.url ?? ''}-${i}`,
        n: Date.now(),
      }));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ items }));
    });
    await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve));
    stops.unshift(() => new Promise((resolve) => fake.close(resolve)));
    const fakeHost = `127.0.0.1:${(fake.address() as AddressInfo).port}`;
    const providers = join(scratch, 'providers.yaml');
    writeFileSync(
      providers,
      stringify({
        [INTEGRATION]: {
          display_name: 'Capacity',
          auth_mode: 'API_KEY',
          api_key: { in: 'header', name: 'Authorization', format: 'Bearer ${apiKey}' },
          base_url: `http://${fakeHost}`,
        },
      }),
    );

    // A cluster of its own (not DATABASE_URL's): every backend of it is this bench's.
    const postgres = await startPostgres({
      dataDir: join(scratch, 'postgres'),
      database: SERVICE_DB,
      env: { ...process.env, DATABASE_URL: '' },
    });
    stops.unshift(async () => {
      await postgres.stop();
      // As root the cluster lives where the postgres user can enter; the scratch folder only links to it.
      rmSync(realpathSync(join(scratch, 'postgres')), { recursive: true, force: true });
    });
    const bundle = join(scratch, 'bundle', 'workflow-bundle.js');
    saveWorkflowBundle(await buildWorkflowBundle(), bundle);
    const stateDir = join(scratch, 'state');
    const topology = await startTopology({
      dataDir: stateDir,
      postgres,
      workers: flags.workers,
      numHistoryShards: flags.shards,
      // BENCH_WORKER_CPU_PROF=<dir>: each worker process writes V8 CPU profiles of its main thread and
      // of its workflow and script threads into <dir> when it exits (bench/lib/cpuProfileSummary.ts reads them).
      ...(process.env['BENCH_WORKER_CPU_PROF']
        ? { workerNodeArgs: ['--cpu-prof', `--cpu-prof-dir=${process.env['BENCH_WORKER_CPU_PROF']}`] }
        : {}),
      env: {
        SERVICE_PROVIDERS_FILE: providers,
        SERVICE_OUTBOUND_ALLOW: fakeHost,
        SERVICE_LOG_LEVEL: 'silent',
        SERVICE_WORKFLOW_BUNDLE: bundle,
      },
    });
    stops.unshift(() => topology.stop());
    const secretKey = topology.firstSecretKey;
    if (!secretKey) throw new Error('the first API start did not create the first environment');
    const temporalPid = temporalServerPid(join(stateDir, 'temporal-server'));
    if (!temporalPid) throw new Error('the Temporal server process was not found in /proc');
    log(`topology up: Temporal ${topology.temporal.version} (pid ${temporalPid}), Postgres ${postgres.version}`);

    const serviceDb = createPool({ url: postgres.url, max: 4, applicationName: 'bench-capacity' });
    stops.unshift(() => serviceDb.end());
    const admin = new pg.Client({ connectionString: postgres.adminUrl, application_name: 'bench-capacity' });
    await admin.connect();
    stops.unshift(() => admin.end());

    const cpu = new CpuWindow();
    const processes: [number, string][] = [
      ...topology.workers.map((w): [number, string] => [w.child.pid!, w.name]),
      [topology.api.child.pid!, 'api'],
      [temporalPid, 'temporal server'],
    ];
    const benchPids = new Set<number>();
    const sampleAll = async () => {
      for (const [pid, group] of processes) cpu.see(pid, group);
      const backends = await admin.query<{ pid: number; datname: string | null; application_name: string }>(
        'SELECT pid, datname, application_name FROM pg_stat_activity',
      );
      for (const { pid, datname, application_name } of backends.rows) {
        if (application_name === 'bench-capacity' || benchPids.has(pid)) {
          benchPids.add(pid);
          continue;
        }
        cpu.see(pid, `postgres: ${datname ?? 'background'}`);
      }
    };
    let sampling = Promise.resolve();
    const sampler = setInterval(() => {
      sampling = sampling.then(sampleAll).catch((error: unknown) => console.error('sample failed:', error));
    }, 2000);
    stops.unshift(async () => {
      clearInterval(sampler);
      await sampling;
    });

    const api = createClient({ baseUrl: topology.apiUrl, secretKey });
    await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
    await api.deploy.apply({
      yaml: YAML,
      scripts: SYNCS.map((i) => ({
        integration: INTEGRATION,
        kind: 'sync' as const,
        name: `items${i}`,
        code: SYNC(i),
      })),
    });
    let started = Date.now();
    const ids = Array.from({ length: N }, (_, i) => `conn-${String(i).padStart(6, '0')}`);
    await mapLimit(ids, flags['import-concurrency'], async (id) => {
      checkDeadline('importing connections');
      await api.connections.import({
        provider_config_key: INTEGRATION,
        connection_id: id,
        credentials: { type: 'API_KEY', apiKey: id },
      });
    });
    const importS = (Date.now() - started) / 1000;
    log(`imported ${N} connections in ${round(importS, 1)} s (${round(N / importS, 1)}/s)`);

    started = Date.now();
    // Runs as the service's run history counts them (GET /sync/runs): whatever executions a run takes,
    // it is one row there, so the count means the same for every run model.
    const completed = async (): Promise<number> =>
      Number(
        (await serviceDb.query<{ n: string }>(`SELECT count(*) AS n FROM sync_runs WHERE status = 'success'`)).rows[0]!
          .n,
      );
    // The window opens once every entity could have run once, or two intervals after the import when
    // the workers do not keep up (the window then shows the backlog growing).
    for (;;) {
      const done = await completed();
      if (done >= E) break;
      if (Date.now() - started > 2 * INTERVAL_MS) {
        log(`only ${done}/${E} runs completed two intervals after the import: measuring a backlog`);
        break;
      }
      log(`${done}/${E} first runs completed`);
      checkDeadline('waiting for the first runs');
      await sleep(10_000);
    }
    log(`window of ${WINDOW_MS / 1000} s opens ${round((Date.now() - started) / 1000, 1)} s after the import`);

    const dbStats = async () => {
      const rows = await admin.query<DbStats & { datname: string }>(
        `SELECT datname, xact_commit, tup_inserted, tup_updated, tup_deleted, blks_read, blks_hit
           FROM pg_stat_database WHERE datname IS NOT NULL`,
      );
      const wal = await admin.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
      const [hi, lo] = wal.rows[0]!.lsn.split('/').map((part) => BigInt(`0x${part}`));
      return {
        at: Date.now(),
        wal: Number((hi! << 32n) + lo!),
        byDb: new Map(rows.rows.map(({ datname, ...stats }) => [datname, stats])),
      };
    };
    await sampling;
    const loadAtStart = loadAverage();
    const before = await dbStats();
    cpu.start();
    await sampleAll();
    cpu.open = true;
    const windowStart = new Date();
    const windowStartUs = process.hrtime.bigint() / 1000n;
    while (Date.now() < windowStart.getTime() + WINDOW_MS) {
      checkDeadline('measuring');
      await sleep(1000);
    }
    await sampling;
    await sampleAll();
    cpu.open = false;
    const windowEnd = new Date();
    // The window on the monotonic clock V8's CPU profiles use (µs), to cut them to it.
    console.log(`window on the monotonic clock (µs): ${windowStartUs} ${process.hrtime.bigint() / 1000n}`);
    const after = await dbStats();
    const loadAtEnd = loadAverage();
    const windowS = (after.at - before.at) / 1000;

    const finishedIn = async (status: string): Promise<number> =>
      Number(
        (
          await serviceDb.query<{ n: string }>(
            'SELECT count(*) AS n FROM sync_runs WHERE status = $1 AND finished_at >= $2 AND finished_at < $3',
            [status, windowStart, windowEnd],
          )
        ).rows[0]!.n,
      );
    const runsDone = await finishedIn('success');
    const runsNotCompleted = await finishedIn('failed');
    // Why they failed: a run that fails under load is a finding, not noise.
    const failures = (
      await serviceDb.query<{ error_message: string | null; n: string }>(
        `SELECT left(error_message, 300) AS error_message, count(*) AS n FROM sync_runs
          WHERE status = 'failed' AND finished_at >= $1 AND finished_at < $2 GROUP BY 1 ORDER BY 2 DESC LIMIT 5`,
        [windowStart, windowEnd],
      )
    ).rows;

    // Each entity's runs, from the run history; delays of the runs planned inside the window.
    const runs = new Map<string, { start: number; close: number | undefined }[]>();
    const history = await serviceDb.query<{
      connection_id: string;
      sync_name: string;
      started_at: Date;
      finished_at: Date;
    }>('SELECT connection_id, sync_name, started_at, finished_at FROM sync_runs');
    for (const run of history.rows) {
      const entity = `${run.connection_id}:${run.sync_name}`;
      runs.set(entity, [
        ...(runs.get(entity) ?? []),
        { start: run.started_at.getTime(), close: run.finished_at.getTime() },
      ]);
    }
    const delays: number[] = [];
    let overdue = 0;
    const from = windowStart.getTime();
    const to = windowEnd.getTime();
    for (const list of runs.values()) {
      list.sort((x, y) => x.start - y.start);
      for (let i = 0; i + 1 < list.length; i++) {
        const [run, next] = [list[i]!, list[i + 1]!];
        if (run.close !== undefined && next.start >= from && next.start < to)
          delays.push(next.start - (run.close + INTERVAL_MS));
      }
      const last = list.at(-1)!;
      if (last.close !== undefined && last.close + INTERVAL_MS < to - 1000) {
        // Due inside the window but not started by its end: counted with the lateness it has so far.
        delays.push(to - (last.close + INTERVAL_MS));
        overdue++;
      }
    }
    delays.sort((a, b) => a - b);

    const perK = 1000 / E;
    const cpuByGroup = cpu.byGroup();
    const cores = (group: string) => (cpuByGroup.get(group) ?? 0) / windowS;
    const workerCores = topology.workers.map((w) => cores(w.name));
    const pgGroups = [...cpuByGroup.keys()].filter((group) => group.startsWith('postgres: ')).sort();
    const dbDelta = (datname: string) => {
      const a = before.byDb.get(datname)!;
      const b = after.byDb.get(datname)!;
      const d = (key: keyof DbStats) => Number(b[key]) - Number(a[key]);
      return {
        commitsPerS: d('xact_commit') / windowS,
        tuplesWrittenPerS: (d('tup_inserted') + d('tup_updated') + d('tup_deleted')) / windowS,
        blocksReadPerS: d('blks_read') / windowS,
        blocksHitPerS: d('blks_hit') / windowS,
      };
    };
    const sizes = await admin.query<{ datname: string; mb: string }>(
      `SELECT datname, round(pg_database_size(datname) / 1048576.0, 1) AS mb FROM pg_database
        WHERE datname IN ($1, $2, $3)`,
      [SERVICE_DB, TEMPORAL_DB, `${TEMPORAL_DB}_visibility`],
    );
    const runsPerS = runsDone / windowS;

    console.log(`\nload average: ${loadAtStart} at the window's start, ${loadAtEnd} at its end (1, 5, 15 min)`);
    console.log(
      `window ${round(windowS)} s; ${N} connections × ${flags.syncs} syncs = ${E} entities, ${flags.workers} workers, interval ${flags['interval-s']} s, ${flags.records} records per run`,
    );
    const rows: [string, number, number][] = [];
    const add = (name: string, value: number, digits = 2) =>
      rows.push([name, round(value, digits), round(value * perK, digits + 1)]);
    add('runs completed per second (all workers)', runsPerS);
    add('runs completed per second per worker', runsPerS / flags.workers);
    add('runs planned per second (entities / interval)', E / flags['interval-s']);
    for (const [i, w] of topology.workers.entries()) {
      add(`${w.name} CPU (cores)`, workerCores[i]!, 3);
      add(`${w.name} RSS max (MB)`, cpu.rssMaxMb.get(w.name) ?? 0, 0);
    }
    add('api CPU (cores)', cores('api'), 3);
    add('Temporal server CPU (cores)', cores('temporal server'), 3);
    add('Temporal server RSS max (MB)', cpu.rssMaxMb.get('temporal server') ?? 0, 0);
    for (const group of pgGroups) add(`${group} CPU (cores)`, cores(group), 3);
    for (const datname of [TEMPORAL_DB, `${TEMPORAL_DB}_visibility`, SERVICE_DB]) {
      const d = dbDelta(datname);
      add(`pg ${datname}: commits/s`, d.commitsPerS, 1);
      add(`pg ${datname}: tuples written/s`, d.tuplesWrittenPerS, 1);
      add(`pg ${datname}: blocks read/s`, d.blocksReadPerS, 1);
      add(`pg ${datname}: blocks hit/s`, d.blocksHitPerS, 0);
    }
    add('WAL written (kB/s)', (after.wal - before.wal) / 1024 / windowS, 1);
    const perRun = [...cpuByGroup.entries()]
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([group, seconds]) => `${group} ${round((seconds / runsDone) * 1000, 1)}`)
      .join(', ');
    console.log(`  CPU ms per completed run: ${perRun}`);
    // Every process of the installation (workers, API, Temporal server, every Postgres backend): what a
    // run costs the machine, and the runs per second two cores could carry at that cost.
    const allCpuS = [...cpuByGroup.values()].reduce((sum, seconds) => sum + seconds, 0);
    console.log(
      `  CPU per completed run, all processes: ${round((allCpuS / runsDone) * 1000, 1)} ms; ` +
        `cores busy ${round(allCpuS / windowS, 2)}; two cores at this cost: ${round((2 * runsDone) / allCpuS, 1)} runs/s`,
    );
    console.log(`\n  ${'figure'.padEnd(44)} ${'measured'.padStart(12)} ${'per 1,000 entities'.padStart(20)}`);
    for (const [name, value, k] of rows)
      console.log(`  ${name.padEnd(44)} ${String(value).padStart(12)} ${String(k).padStart(20)}`);
    console.log(
      `\n  runs completed in the window ${runsDone}, not completed (failed, timed out…) ${runsNotCompleted}\n` +
        failures.map((f) => `    ${f.n}× ${f.error_message ?? '(no message)'}\n`).join('') +
        `  scheduled start delay over ${delays.length} runs planned in the window (${overdue} not started by its end): ` +
        `p50 ${round(percentile(delays, 50))} ms, p99 ${round(percentile(delays, 99))} ms, max ${round(delays.at(-1) ?? Number.NaN)} ms\n` +
        `  per run: Temporal ${round((dbDelta(TEMPORAL_DB).commitsPerS + dbDelta(`${TEMPORAL_DB}_visibility`).commitsPerS) / runsPerS, 1)} commits, ` +
        `service ${round(dbDelta(SERVICE_DB).commitsPerS / runsPerS, 1)} commits, WAL ${round((after.wal - before.wal) / 1024 / runsDone, 1)} kB\n` +
        `  database sizes at the end (MB): ${sizes.rows.map((r) => `${r.datname} ${r.mb}`).join(', ')}\n` +
        `  import ${round(importS, 1)} s`,
    );
  } finally {
    for (const stop of stops) await stop().catch((error: unknown) => console.error(error));
    rmSync(scratch, { recursive: true, force: true });
  }
}

await main();
