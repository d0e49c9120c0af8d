/**
 * A backfill past one execution's history bound (issue 32). `npx tsx bench/backfill.ts [--records N]
 * [--page N] [--kills N] [--raw N] [--operations N] [--budget N]`.
 *
 * A sync entity (workflows/manageSync.ts, the production run model) runs a resumable sync script
 * (docs/scripts.md "Resumable syncs": `svc.get` of a page by cursor, `svc.batchSave`, `svc.saveCheckpoint`)
 * over a fake API on loopback serving N records (default 1,000,000) at pages of 100 (10,000 pages: past
 * the ~9,500 pages one execution's history holds, docs/architecture.md), each execution ending after
 * `--operations` svc operations (SYNC_EXECUTION_OPERATION_LIMIT's default; 48000 to let only the history
 * budget end it, as before that setting) and the history budget `--budget`. A recovery is timed from the
 * kill to the first request the new worker sends. The
 * worker runs in a process of its own (test/kit/workerProcess.ts, the production data converter's
 * claim check) and is SIGKILLed `--kills` times (default 2) at evenly spread pages, a warm standby taking
 * over each time. Prints the time, the executions of the run, Temporal Cloud's billable actions of all
 * of them (src/temporal/billableActions.ts), the pages fetched twice, and checks records == source, each
 * stored once, one run in the run history. The physical limit in the same run: the same records upserted
 * raw into Postgres in the same pages from this process (`--raw` records, default 100,000, scaled to N),
 * and the ratio.
 */
import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { startStack } from '../src/devstack/index.js';
import { DEFAULT_EXECUTION_OPERATION_LIMIT } from '../src/runtime/definitions.js';
import { createDataConverter } from '../src/runtime/payloadStorage.js';
import { createPostgresScriptStore } from '../src/runtime/scriptStore.js';
import { billableActions } from '../src/temporal/billableActions.js';
import { connectTemporal } from '../src/temporal/connection.js';
import { createSyncControl } from '../src/temporal/syncControl.js';
import { bundleWorkflows } from '../src/temporal/worker.js';
import { spawnWorkerProcess } from '../test/kit/workerSpawn.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { formatCount, line } from './lib/stats.js';
import { RAW_TABLE_SQL, rawUpsert, syntheticRecord } from './lib/syncRecords.js';
import { bundle } from './syncHarness.js';

const { records, page, kills, raw, budget, operations } = positiveIntegerFlags(
  {
    records: 1_000_000,
    page: 100,
    kills: 2,
    raw: 100_000,
    budget: 48_000,
    operations: DEFAULT_EXECUTION_OPERATION_LIMIT,
  },
  process.argv.slice(2),
);
const pages = Math.ceil(records / page);
const load = () =>
  loadavg()
    .map((n) => n.toFixed(1))
    .join(' ');
console.log(
  `backfill: ${formatCount(records)} records at pages of ${page} (${formatCount(pages)} pages), ${kills} SIGKILLs of the worker; load ${load()}`,
);

const stack = await startStack({ ephemeral: true, database: 'bench_backfill' });
const pool = createPool({ url: stack.postgres.url, max: 4, applicationName: 'bench-backfill' });
const dir = mkdtempSync(join(tmpdir(), 'bench-backfill-'));
const workers = new Set<ReturnType<typeof spawnWorkerProcess>>();
const server = createServer((request, response) => {
  const url = new URL(request.url ?? '/', 'http://x');
  const start = Number(url.searchParams.get('cursor') ?? '0');
  hits.set(start, (hits.get(start) ?? 0) + 1);
  if (socketEpoch.get(request.socket) === epoch) requestsThisEpoch++;
  const items = Array.from({ length: Math.max(0, Math.min(page, records - start)) }, (_, i) =>
    syntheticRecord(start + i),
  );
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ items, next: start + page < records ? String(start + page) : null }));
});
const hits = new Map<number, number>();
// A recovery ends at the first request of the new worker: one on a connection opened after the kill. A request
// the killed worker wrote before it died can still be read after the kill, on a connection it opened.
let epoch = 0;
let requestsThisEpoch = 0;
const socketEpoch = new WeakMap<Socket, number>();
server.on('connection', (socket: Socket) => socketEpoch.set(socket, epoch));
try {
  await migrate(pool);
  const workflowBundle = join(dir, 'workflows.js');
  writeFileSync(workflowBundle, (await bundleWorkflows()).code);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const taskQueue = `backfill-${randomBytes(4).toString('hex')}`;

  /** A worker process (test/kit/workerProcess.ts) that says `standby` and polls once told `run`. */
  const standby = async () => {
    const child = spawnWorkerProcess({
      ...process.env,
      DATABASE_URL: stack.postgres.url,
      TEMPORAL_ADDRESS: stack.temporal.address,
      TEMPORAL_NAMESPACE: stack.temporal.namespace,
      TASK_QUEUE: taskQueue,
      WORKFLOW_BUNDLE: workflowBundle,
      API_BASE_URL: apiUrl,
      SERVICE_THREAD_MARKS_DIR: join(dir, 'threads'),
      WORKER_STANDBY: '1',
    });
    workers.add(child);
    child.once('exit', () => workers.delete(child));
    let output = '';
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      // What the workers say of failed workflow tasks, for a run that does not end.
      appendFileSync(join(dir, '..', `bench-backfill-${taskQueue}.log`), chunk);
    });
    await new Promise<void>((resolve, reject) => {
      child.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        // Its warnings too (lost workflow tasks, interrupted activations): what a recovery spent its time on.
        const warnings = chunk
          .toString()
          .split('\n')
          .filter((l) => /"level":"(warn|error)"|"component":"lanes"/.test(l));
        if (warnings.length > 0)
          appendFileSync(join(dir, '..', `bench-backfill-${taskQueue}.log`), `${warnings.join('\n')}\n`);
        if (output.includes('standby\n')) resolve();
      });
      child.once('exit', () => reject(new Error(`worker exited before standby:\n${output}`)));
    });
    return {
      child,
      run: () => {
        child.stdin?.write('run\n');
      },
    };
  };

  const clientConnection = await connectTemporal({ address: stack.temporal.address });
  const client = new Client({
    connection: clientConnection,
    namespace: stack.temporal.namespace,
    dataConverter: createDataConverter({ db: pool }),
  });
  const scripts = createPostgresScriptStore({ db: pool });
  const scriptHash = await scripts.put(
    bundle(`async function (svc) {
  const checkpoint = await svc.getCheckpoint();
  let cursor = checkpoint ? checkpoint.cursor : '0';
  for (;;) {
    const res = await svc.get({ endpoint: '/records', params: { cursor } });
    await svc.batchSave(res.data.items, 'Record');
    if (res.data.next === null) break;
    cursor = res.data.next;
    await svc.saveCheckpoint({ cursor });
  }
  await svc.clearCheckpoint();
}`),
    'bench',
  );
  const definition = {
    environmentId: 'bench',
    integrationId: 'bench-api',
    syncName: 'backfill',
    syncType: 'full' as const,
    runsMs: 30 * 86_400_000,
    autoStart: true,
    trackDeletes: true,
    models: ['Record'],
    scriptHash,
    webhookSubscriptions: [],
  };
  const ref = { ...definition, connectionId: 'backfill' };
  const control = createSyncControl({ client, taskQueue });

  let worker = await standby();
  worker.run();
  let next = standby();
  const started = Date.now();
  // --budget lowers the history budget (events) of each execution, to show continuation at a smaller size.
  const workflowId = await control.ensureSync(
    definition,
    ref.connectionId,
    // The worker setting SYNC_EXECUTION_OPERATION_LIMIT as a run option (the test worker has no settings).
    { executionOperationLimit: operations, ...(budget === 48_000 ? {} : { historyEventBudget: budget }) },
  );
  const killAt = Array.from({ length: kills }, (_, i) => Math.floor((pages * (i + 1)) / (kills + 1)));
  const recoveries: number[] = [];
  for (const at of killAt) {
    while (hits.size < at) await new Promise((resolve) => setTimeout(resolve, 20));
    worker.child.kill('SIGKILL');
    const killed = Date.now();
    epoch++;
    requestsThisEpoch = 0;
    worker = await next;
    worker.run();
    next = standby();
    while (requestsThisEpoch === 0) await new Promise((resolve) => setTimeout(resolve, 20));
    recoveries.push(Date.now() - killed);
    console.log(
      `  killed at page ${formatCount(at)} (${new Date(killed).toISOString()}): requests again after ${((Date.now() - killed) / 1000).toFixed(1)} s; load ${load()}`,
    );
  }
  // A query fails while the entity's workflow task is being retried after a kill: ask again.
  const statusNow = () => control.status(ref).catch(() => undefined);
  let status = await statusNow();
  while (!status || status.finishedAt === null || status.status === 'running') {
    await new Promise((resolve) => setTimeout(resolve, 500));
    status = await statusNow();
  }
  const ms = Date.now() - started;
  if (status.latestError) throw new Error(`the run failed: ${JSON.stringify(status.latestError)}`);
  const executions = status.latestResult?.executions ?? [status.latestResult?.runId ?? ''];

  // The run's executions' histories: events and billable actions.
  let events = 0;
  let actions = 0;
  for (const id of executions) {
    const history = await client.workflow.getHandle(workflowId, id.slice(`${workflowId}:run:`.length)).fetchHistory();
    events += history.events?.length ?? 0;
    actions += billableActions(history.events ?? []).total;
  }
  const stored = await pool.query<{ n: string; ids: string; live: string }>(
    "SELECT count(*) AS n, count(DISTINCT id) AS ids, count(*) FILTER (WHERE deleted_at IS NULL) AS live FROM records WHERE sync_name = 'backfill'",
  );
  const runs = await pool.query<{ n: string }>("SELECT count(*) AS n FROM sync_runs WHERE sync_name = 'backfill'");
  const twice = [...hits.values()].filter((n) => n > 1).length;
  const models = status.latestResult?.models['Record'];

  // The physical limit: the same records in the same pages, upserted raw from this process.
  await pool.query(RAW_TABLE_SQL);
  const rawPages = Math.ceil(Math.min(raw, records) / page);
  const rawStarted = Date.now();
  for (let p = 0; p < rawPages; p++) {
    await rawUpsert(
      pool,
      'raw',
      Array.from({ length: page }, (_, i) => syntheticRecord(p * page + i)),
    );
  }
  const rawMs = ((Date.now() - rawStarted) * records) / (rawPages * page);

  console.log(line('time', `${(ms / 1000).toFixed(1)} s (${formatCount((records / ms) * 1000)} records/s)`));
  console.log(line('executions of the run', `${executions.length} (one run in the run history: ${runs.rows[0]?.n})`));
  console.log(line('history events, all executions', formatCount(events)));
  console.log(
    line(
      'billable actions, all executions',
      `${formatCount(actions)} (${(actions / executions.length).toFixed(1)} per execution)`,
    ),
  );
  console.log(line('worker recoveries', recoveries.map((r) => `${(r / 1000).toFixed(1)} s`).join(', ')));
  console.log(
    line(
      'pages fetched',
      `${formatCount(hits.size)} of ${formatCount(pages)}, ${twice} twice (bound: 1 per kill and 1 per continuation)`,
    ),
  );
  console.log(
    line(
      'records stored',
      `${stored.rows[0]?.n} rows, ${stored.rows[0]?.ids} ids, ${stored.rows[0]?.live} live; source ${records}`,
    ),
  );
  console.log(line('run result', JSON.stringify(models)));
  console.log(
    line(
      'raw upsert (physical limit)',
      `${(rawMs / 1000).toFixed(1)} s for ${formatCount(records)} (measured on ${formatCount(rawPages * page)})`,
    ),
  );
  console.log(line('ratio backfill ÷ raw time', (ms / rawMs).toFixed(2)));
  console.log(`load at the end: ${load()}`);
  const exact =
    Number(stored.rows[0]?.n) === records &&
    Number(stored.rows[0]?.ids) === records &&
    Number(stored.rows[0]?.live) === records &&
    hits.size === pages &&
    twice <= kills + executions.length - 1 &&
    models?.added === records &&
    Number(runs.rows[0]?.n) === 1;
  console.log(exact ? 'EXACT: records == source, each once' : 'NOT EXACT');
  await control.stop(ref, 'bench over');
  await clientConnection.close();
  if (!exact) process.exitCode = 1;
} finally {
  for (const child of workers) child.kill('SIGKILL');
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await pool.end();
  await stack.stop();
  rmSync(dir, { recursive: true, force: true });
}
