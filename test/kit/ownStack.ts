/**
 * A stack of the chaos suite's own, for the tests that restart servers (the shared harness stack must
 * stay up for every other test file): a Temporal dev server on a SQLite file (its state survives a
 * restart on the same port), a durable Postgres cluster restarted in place with `pg_ctl restart` (same
 * port, so every client reconnects to the same address), the migrated database, the workflow bundle,
 * and a supervisor that runs the runtime worker in child processes and restarts each one that dies,
 * as systemd or Kubernetes would.
 */
import type { ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { beforeAll } from 'vitest';
import { createPool, type Pool } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { findPostgresBinaries, startPostgres, type PostgresServer } from '../../src/devstack/postgres.js';
import { freePort, run, sleep } from '../../src/devstack/process.js';
import { startTemporal, type TemporalServer } from '../../src/devstack/temporal.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { bundleWorkflows } from '../../src/temporal/worker.js';
import { spawnTrackedWorker } from './processWorker.js';
import { deferCleanup } from './cleanup.js';
import { importFakeApiConnection } from './testConnections.js';
import { createTemporalClient } from './stack.js';

/** The environment without the variables that make the dev stack adopt a running server. */
function ownEnv(): NodeJS.ProcessEnv {
  const env = { ...process.env };
  delete env['TEMPORAL_ADDRESS'];
  delete env['DATABASE_URL'];
  return env;
}

export interface OwnStack {
  dir: string;
  pool: Pool;
  databaseUrl: string;
  temporalAddress: string;
  namespace: string;
  workflowBundlePath: string;
  /** A client with the runtime's data converter; reconnects by itself after a Temporal restart. */
  client: Client;
  restartTemporal(): Promise<number>;
  restartPostgres(): Promise<number>;
  /**
   * SIGKILL of the postmaster, as an OOM killer or a crashed host would do it: no shutdown, every
   * connection cut. Returns once the postmaster is gone; `recoverPostgres` starts it again.
   */
  killPostgres(): Promise<number>;
  /** Starts the killed cluster again in place (crash recovery, same port); returns the ms it took. */
  recoverPostgres(): Promise<number>;
  stop(): Promise<void>;
}

/** A stack of this test file's own: started before its tests, stopped after them. */
export function useOwnStack(): () => OwnStack {
  let own: OwnStack | undefined;
  beforeAll(async () => {
    own = await startOwnStack();
  }, 180_000);
  deferCleanup(async () => {
    await own?.stop();
  });
  return () => {
    if (!own) throw new Error('the chaos stack did not start');
    return own;
  };
}

/** A run's result, asked again until the run is closed: the long poll does not outlive a server restart. */
export async function runResult<T>(client: Client, workflowId: string): Promise<T> {
  for (;;) {
    try {
      return (await client.workflow.getHandle(workflowId).result()) as T;
    } catch (error) {
      if (error instanceof WorkflowFailedError) throw error;
      await sleep(500);
    }
  }
}

export async function startOwnStack(): Promise<OwnStack> {
  const dir = mkdtempSync(join(tmpdir(), 'chaos-stack-'));
  // Postgres runs as its own user when we are root: it must reach the cluster inside.
  chmodSync(dir, 0o755);
  const env = ownEnv();
  const port = await freePort();
  const dbFile = join(dir, 'temporal.sqlite');
  let temporal: TemporalServer = await startTemporal({ dbFile, port, env });
  let postgres: PostgresServer;
  try {
    postgres = await startPostgres({ dataDir: join(dir, 'postgres'), database: 'chaos', env });
  } catch (error) {
    await temporal.stop();
    throw error;
  }
  const pgCtlRestart = () => {
    const dataDir = join(dir, 'postgres');
    // -l: the new postmaster must not inherit pg_ctl's output pipe, or pg_ctl's caller waits forever.
    const args = [
      join(findPostgresBinaries(env) ?? '', 'pg_ctl'),
      ...['-D', dataDir, '-l', join(dataDir, 'server.log'), '-m', 'fast', '-w', '-t', '60', 'restart'],
    ];
    return process.getuid?.() === 0 ? run('runuser', ['-u', 'postgres', '--', ...args]) : run(args[0]!, args.slice(1));
  };
  const pool = createPool({ url: postgres.url, max: 10, applicationName: 'chaos-test' });
  await migrate(pool);
  const workflowBundlePath = join(dir, 'workflows.js');
  writeFileSync(workflowBundlePath, (await bundleWorkflows()).code);
  const { client, close: closeClient } = await createTemporalClient({
    address: temporal.address,
    namespace: temporal.namespace,
    dataConverter: createDataConverter({ db: pool }),
    timeoutMs: 5000,
  });
  return {
    dir,
    pool,
    databaseUrl: postgres.url,
    temporalAddress: temporal.address,
    namespace: temporal.namespace,
    workflowBundlePath,
    client,
    async restartTemporal() {
      const started = Date.now();
      await temporal.stop();
      temporal = await startTemporal({ dbFile, port, env });
      return Date.now() - started;
    },
    async restartPostgres() {
      const started = Date.now();
      const result = await pgCtlRestart();
      if (result.code !== 0) throw new Error(`pg_ctl restart failed: ${result.stdout}${result.stderr}`);
      return Date.now() - started;
    },
    async killPostgres() {
      const started = Date.now();
      const pid = Number(readFileSync(join(dir, 'postgres', 'postmaster.pid'), 'utf8').split('\n')[0]);
      process.kill(pid, 'SIGKILL');
      while (alive(pid)) await sleep(20);
      return Date.now() - started;
    },
    async recoverPostgres() {
      const started = Date.now();
      // The killed postmaster's backends notice its death and exit; until they have, the new one
      // refuses to start (their shared memory is still attached). pg_ctl restart finds the old
      // process gone and starts with the options of the last start (postmaster.opts): the same port.
      for (;;) {
        const result = await pgCtlRestart();
        if (result.code === 0) return Date.now() - started;
        if (Date.now() - started > 60_000) throw new Error(`pg_ctl restart failed: ${result.stdout}${result.stderr}`);
        await sleep(500);
      }
    },
    async stop() {
      await closeClient().catch(() => undefined);
      await pool.end().catch(() => undefined);
      await Promise.allSettled([temporal.stop(), postgres.stop()]);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Whether a process runs (a zombie nobody has reaped yet counts as gone). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

export interface WorkerDeath {
  code: number | null;
  signal: string | null;
  ms: number;
}

/** Characters of the workers' output a supervisor keeps in memory (a quiet worker, at `warn`, says little). */
const OUTPUT_KEPT = 8 * 1024 * 1024;

/** Runs test/kit/workerProcess.ts against `stack`, restarting it whenever it exits. */
export function superviseWorkers(
  stack: Pick<OwnStack, 'databaseUrl' | 'temporalAddress' | 'namespace' | 'workflowBundlePath'>,
  options: { taskQueue: string; apiBaseUrl: string; nodeOptions?: string; env?: Record<string, string> },
) {
  const deaths: WorkerDeath[] = [];
  let current: { child: ChildProcess; ready: boolean } | undefined;
  let stopped = false;
  let starts = 0;
  // Every worker's output, each line stamped with the time and which worker said it, the oldest lines
  // dropped past OUTPUT_KEPT: what a failed test writes to its diagnostics (test/chaos/lib/diagnostics.ts).
  let kept: string[] = [];
  let first = 0; // kept[first] is the oldest line still kept (dropping from the front one by one is quadratic)
  let keptLength = 0;
  const keep = (whole: string): void => {
    const line = whole.length > 4000 ? `${whole.slice(0, 4000)}…` : whole;
    kept.push(line);
    keptLength += line.length + 1;
    while (keptLength > OUTPUT_KEPT && first < kept.length - 1) keptLength -= kept[first++]!.length + 1;
    if (first > 10_000 && first > kept.length / 2) {
      kept = kept.slice(first);
      first = 0;
    }
  };
  const loop = (async () => {
    while (!stopped) {
      const started = Date.now();
      starts++;
      const child = spawnTrackedWorker({
        ...process.env,
        DATABASE_URL: stack.databaseUrl,
        TEMPORAL_ADDRESS: stack.temporalAddress,
        TEMPORAL_NAMESPACE: stack.namespace,
        TASK_QUEUE: options.taskQueue,
        // Thread marks of this test's workers only (src/temporal/scriptThreads.ts).
        SERVICE_THREAD_MARKS_DIR: join(tmpdir(), 'integration-service-threads-test', options.taskQueue),
        WORKFLOW_BUNDLE: stack.workflowBundlePath,
        API_BASE_URL: options.apiBaseUrl,
        NODE_OPTIONS: options.nodeOptions ?? '',
        ...options.env,
      });
      let output = '';
      // CHAOS_WORKER_LOG=<file>: every worker's whole output goes there too (the supervisor keeps only
      // the last lines of a dead one), to read what the workers did in a failed run.
      const logFile = process.env['CHAOS_WORKER_LOG'];
      if (logFile) {
        child.stdout?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
        child.stderr?.on('data', (chunk: Buffer) => appendFileSync(logFile, chunk));
      }
      const worker = `worker ${starts} (pid ${String(child.pid)})`;
      keep(`${new Date().toISOString()} [supervisor] ${worker} started`);
      for (const [stream, name] of [
        [child.stdout, 'out'],
        [child.stderr, 'err'],
      ] as const) {
        let partial = '';
        stream?.on('data', (chunk: Buffer) => {
          const lines = (partial + chunk.toString()).split('\n');
          partial = lines.pop() ?? '';
          const at = new Date().toISOString();
          for (const line of lines) keep(`${at} ${worker} ${name}: ${line}`);
        });
      }
      const entry = { child, ready: false };
      child.stdout?.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        if (output.includes('ready')) entry.ready = true;
      });
      child.stderr?.on('data', (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4000)));
      current = entry;
      const exit = await new Promise<{ code: number | null; signal: string | null }>((resolve) =>
        child.on('exit', (code, signal) => resolve({ code, signal })),
      );
      keep(
        `${new Date().toISOString()} [supervisor] ${worker} exited (code ${String(exit.code)}, signal ${String(exit.signal)})`,
      );
      if (stopped) break;
      deaths.push({ ...exit, ms: Date.now() - started });
      // What the worker said last: why it died (heap limit, an aborted isolate, a failed start).
      process.stderr.write(
        `[supervisor] worker exited (code ${String(exit.code)}, signal ${String(exit.signal)}) after ${Date.now() - started} ms: ` +
          `${output.slice(-600).replace(/\s+/g, ' ')}\n`,
      );
      // A worker that cannot even start (a server is down) is tried again after a pause.
      if (!entry.ready) await sleep(500);
    }
  })();
  return {
    deaths,
    starts: () => starts,
    /** What the workers printed, oldest first, at most the last OUTPUT_KEPT characters or so. */
    output: (): string => kept.slice(first).join('\n'),
    /** Resolves when a worker polls its task queue (the one running now, or its successor). */
    async ready(timeoutMs = 120_000): Promise<void> {
      const deadline = Date.now() + timeoutMs;
      while (!current?.ready) {
        if (Date.now() > deadline) throw new Error(`no worker became ready in ${timeoutMs} ms`);
        await sleep(50);
      }
    },
    /** SIGKILL of the running worker process; the supervisor starts the next one. */
    async kill(): Promise<void> {
      while (!current) await sleep(50);
      current.child.kill('SIGKILL');
      const before = current;
      while (current === before) await sleep(20);
    },
    async stop(): Promise<void> {
      stopped = true;
      current?.child.kill('SIGKILL');
      await loop.catch(() => undefined);
    },
  };
}

/**
 * The fake API's connection in the stack's database (the real connection service), then workers that
 * read it from there (WORKER_CONNECTIONS=postgres), supervised; ready when this returns.
 */
export async function fakeApiWorkers(
  stack: OwnStack,
  apiUrl: string,
  options: { taskQueue: string; environmentName: string; connectionId: string; apiKey: string },
): Promise<ReturnType<typeof superviseWorkers>> {
  const { taskQueue, ...connection } = options;
  await importFakeApiConnection(stack.pool, apiUrl, connection);
  const workers = superviseWorkers(stack, { taskQueue, apiBaseUrl: apiUrl, env: { WORKER_CONNECTIONS: 'postgres' } });
  await workers.ready();
  return workers;
}
