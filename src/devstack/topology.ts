/**
 * The production topology on one machine (`npm run topology`, and test/topology/): the real Temporal
 * server on Postgres persistence (src/devstack/temporalServer.ts), one SERVICE_ROLE=api process and
 * two SERVICE_ROLE=worker processes of src/main.ts, each an OS process of its own, as a deployment
 * runs them. Postgres is the dev stack's (DATABASE_URL or a local cluster) or one the caller gives.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startPostgres, type PostgresServer } from './postgres.js';
import { startOnFreePorts, saysPortTaken, type PortChooser, type PortStart } from './portRetry.js';
import { DevStackError, waitUntil } from './process.js';
import { startTemporalServer, type TemporalClusterServer } from './temporalServer.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const MAIN = join(ROOT, 'src', 'main.ts');

export interface ServiceProcess {
  role: 'api' | 'worker';
  name: string;
  child: ChildProcess;
  /** Everything it printed (stdout and stderr), the last 200,000 characters. */
  output(): string;
  /** Resolves with the exit code or signal once the process has ended. */
  exited: Promise<string>;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export interface StartTopologyOptions {
  /** Folder of the topology's state (Temporal's config and log, the local cluster, the key); scratch when omitted. */
  dataDir?: string;
  /** Postgres to use: Temporal's databases go next to `url`'s (created through `adminUrl`). */
  postgres?: { url: string; adminUrl: string };
  workers?: number;
  /** Port of the API; a free one when omitted. */
  apiPort?: number;
  taskQueue?: string;
  /** Prefix of Temporal's two databases (`<prefix>`, `<prefix>_visibility`). */
  temporalDatabasePrefix?: string;
  /** Temporal's history shards (fixed once its database exists); the server's default when omitted. */
  numHistoryShards?: number;
  /** More environment for every service process (SERVICE_PROVIDERS_FILE, SERVICE_OUTBOUND_ALLOW…). */
  env?: NodeJS.ProcessEnv;
  /** Node options of the SERVICE_ROLE=worker processes only (a bench's `--cpu-prof`, which NODE_OPTIONS refuses). */
  workerNodeArgs?: string[];
  /** Tests: chooses the API's free port (src/devstack/portRetry.ts), to hand it one that is taken. */
  choosePorts?: PortChooser;
  /** Where each service process's output goes besides output(); none when omitted. */
  echo?: (name: string, text: string) => void;
}

export interface Topology {
  temporal: TemporalClusterServer;
  postgres: { url: string; adminUrl: string; version?: string };
  apiUrl: string;
  encryptionKey: string;
  taskQueue: string;
  api: ServiceProcess;
  workers: ServiceProcess[];
  /** The secret key of the environment the first API start created, when this start created it. */
  firstSecretKey: string | undefined;
  /** Starts one more SERVICE_ROLE=worker process (a replacement, or a second build with `env`). */
  startWorker(options?: { name?: string; env?: NodeJS.ProcessEnv }): Promise<ServiceProcess>;
  stop(): Promise<void>;
}

/** Starts everything; resolves once the API answers and every worker said it is ready. */
export async function startTopology(options: StartTopologyOptions = {}): Promise<Topology> {
  const scratch = options.dataDir ? undefined : mkdtempSync(join(tmpdir(), 'service-topology-'));
  const dataDir = resolve(options.dataDir ?? scratch!);
  mkdirSync(dataDir, { recursive: true });
  const cleanups: (() => Promise<void>)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  };
  try {
    let postgres: { url: string; adminUrl: string; version?: string };
    if (options.postgres) {
      postgres = options.postgres;
    } else {
      const owned: PostgresServer = await startPostgres({
        dataDir: join(dataDir, 'postgres'),
        database: 'integration_service',
      });
      cleanups.push(() => owned.stop());
      postgres = owned;
    }
    const temporal = await startTemporalServer({
      postgresAdminUrl: postgres.adminUrl,
      stateDir: join(dataDir, 'temporal-server'),
      ...(options.temporalDatabasePrefix ? { databasePrefix: options.temporalDatabasePrefix } : {}),
      ...(options.numHistoryShards ? { numHistoryShards: options.numHistoryShards } : {}),
    });
    cleanups.push(() => temporal.stop());

    const keyFile = join(dataDir, 'encryption.key');
    if (!existsSync(keyFile)) writeFileSync(keyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });
    const encryptionKey = process.env['SERVICE_ENCRYPTION_KEY'] || readFileSync(keyFile, 'utf8').trim();
    const taskQueue = options.taskQueue ?? 'integration-service';
    const common: NodeJS.ProcessEnv = {
      ...process.env,
      ...options.env,
      DATABASE_URL: postgres.url,
      TEMPORAL_ADDRESS: temporal.address,
      TEMPORAL_NAMESPACE: temporal.namespace,
      TEMPORAL_TASK_QUEUE: taskQueue,
      SERVICE_ENCRYPTION_KEY: encryptionKey,
      SERVICE_DATA_DIR: dataDir,
    };
    const processes: ServiceProcess[] = [];
    cleanups.push(async () => {
      await Promise.all(processes.map((process) => process.stop()));
    });
    const launch = async (role: 'api' | 'worker', name: string, env: NodeJS.ProcessEnv): Promise<ServiceProcess> => {
      const nodeArgs = role === 'worker' ? (options.workerNodeArgs ?? []) : [];
      const started = startServiceProcess(
        role,
        name,
        { ...common, ...env, SERVICE_ROLE: role },
        options.echo,
        nodeArgs,
      );
      processes.push(started);
      await waitReady(started);
      return started;
    };

    // The API first: against an empty database its first start creates the first environment. Its
    // process exits saying EADDRINUSE when its port, found free, was taken before it listened; it creates
    // the environment only once it listens (src/main.ts after service.start()), so the start that prints
    // the first secret key is the one that stayed.
    let apiUrl = '';
    const api = await startOnFreePorts({
      what: 'the API process',
      chosen: options.apiPort === undefined ? ['API'] : [],
      fixed: options.apiPort === undefined ? {} : { API: options.apiPort },
      remedy: 'Pass another apiPort.',
      ...(options.choosePorts ? { choose: options.choosePorts } : {}),
      start: async ({ API: port }): Promise<PortStart<ServiceProcess>> => {
        apiUrl = `http://127.0.0.1:${port}`;
        try {
          return {
            started: await launch('api', 'api', { PORT: String(port), HOST: '127.0.0.1', SERVICE_PUBLIC_URL: apiUrl }),
          };
        } catch (error) {
          const output = processes.at(-1)?.output() ?? '';
          if (error instanceof DevStackError && saysPortTaken(output)) return { portTaken: output };
          throw error;
        }
      },
    });
    const firstSecretKey = /its secret key, shown only now: (\S+)/.exec(api.output())?.[1];
    let workerCount = 0;
    const startWorker = (extra: { name?: string; env?: NodeJS.ProcessEnv } = {}): Promise<ServiceProcess> =>
      launch('worker', extra.name ?? `worker-${++workerCount}`, extra.env ?? {});
    const workers = await Promise.all(Array.from({ length: options.workers ?? 2 }, () => startWorker()));
    return {
      temporal,
      postgres,
      apiUrl,
      encryptionKey,
      taskQueue,
      api,
      workers,
      firstSecretKey,
      startWorker,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

function startServiceProcess(
  role: 'api' | 'worker',
  name: string,
  env: NodeJS.ProcessEnv,
  echo: StartTopologyOptions['echo'],
  nodeArgs: string[] = [],
): ServiceProcess {
  // Node itself with tsx's loader (not the tsx wrapper): the child's pid is the service's, so a signal reaches it.
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', MAIN], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const collect = (chunk: Buffer): void => {
    const text = chunk.toString();
    output = (output + text).slice(-200_000);
    echo?.(name, text);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<string>((resolveExit) =>
    child.once('exit', (code, signal) => resolveExit(signal ?? `exit code ${code}`)),
  );
  return {
    role,
    name,
    child,
    output: () => output,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Until the process printed `ready.` (src/main.ts, after its API listens or its workers poll). */
async function waitReady(process: ServiceProcess): Promise<void> {
  let ended: string | undefined;
  void process.exited.then((how) => (ended = how));
  const ready = await waitUntil(() => Promise.resolve(/^ready\b/m.test(process.output())), {
    timeoutMs: 240_000,
    intervalMs: 100,
    gaveUp: () => (ended ? new Error(`it ended (${ended})`) : undefined),
  });
  if (!ready.ok) {
    await process.stop('SIGKILL');
    throw new DevStackError(
      'topology_start_failed',
      `the ${process.name} process (SERVICE_ROLE=${process.role}) did not get ready: ` +
        `${ready.lastError instanceof Error ? ready.lastError.message : 'not within 240 s'}. It said:\n${process.output().slice(-3000)}`,
    );
  }
}
