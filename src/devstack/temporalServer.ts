/**
 * The real Temporal server (not the CLI's dev server) on Postgres persistence, as production runs it:
 * built once per machine with `go install` into the cache (cacheDir()/temporal-server-<version>/, with
 * the module's Postgres schemas copied beside it), its `temporal` and `temporal_visibility` databases
 * set up with its own sql tool (`setup-schema -v 0.0`, then `update-schema` to the newest version), and
 * started as one process running all four services on loopback. Used by the local production topology
 * (src/devstack/topology.ts, `npm run topology`) and its tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, createWriteStream, existsSync, mkdirSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { msToTs } from '@temporalio/common';
import pg from 'pg';
import { stringify } from 'yaml';
import { probeConnection } from '../temporal/connection.js';
import { DevStackError, isFree, log, run, waitUntil } from './process.js';
import { cacheDir, isExecutable, type TemporalServer } from './temporal.js';

export const TEMPORAL_SERVER_VERSION = '1.29.1';
const SERVER_MODULE = 'go.temporal.io/server';
const SCHEMA = join('schema', 'postgresql', 'v12');

export interface TemporalServerBuild {
  server: string;
  sqlTool: string;
  /** schema/postgresql/v12 of the server module: temporal/ and visibility/, each with versioned/. */
  schemaDir: string;
}

export function temporalServerCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), `temporal-server-${TEMPORAL_SERVER_VERSION}`);
}

/**
 * The server, its sql tool and its schemas from the cache; built with `go install` (a few minutes, once
 * per machine) when missing. Fails with what to install when Go is missing or the build fails.
 */
export async function ensureTemporalServer(env: NodeJS.ProcessEnv = process.env): Promise<TemporalServerBuild> {
  const dir = temporalServerCacheDir(env);
  const build: TemporalServerBuild = {
    server: join(dir, 'temporal-server'),
    sqlTool: join(dir, 'temporal-sql-tool'),
    schemaDir: join(dir, SCHEMA),
  };
  if (isExecutable(build.server) && isExecutable(build.sqlTool) && existsSync(join(build.schemaDir, 'visibility'))) {
    return build;
  }
  const go = (await run('go', ['env', 'GOMODCACHE'], { env })).code === 0 ? 'go' : undefined;
  if (!go) {
    throw new DevStackError(
      'temporal_server_not_found',
      `The Temporal server v${TEMPORAL_SERVER_VERSION} is not in ${dir} and there is no Go toolchain to build it. ` +
        'Install Go ≥ 1.25 (the project then builds it with `go install`), or point TEMPORAL_ADDRESS at a running server.',
    );
  }
  const staging = `${dir}.build-${process.pid}`;
  rmSync(staging, { recursive: true, force: true });
  mkdirSync(staging, { recursive: true });
  log(
    `building the Temporal server v${TEMPORAL_SERVER_VERSION} and its sql tool with go install (once per machine, minutes)…`,
  );
  const started = Date.now();
  try {
    const modules = [`${SERVER_MODULE}/cmd/server`, `${SERVER_MODULE}/cmd/tools/sql`].map(
      (path) => `${path}@v${TEMPORAL_SERVER_VERSION}`,
    );
    const built = await run(go, ['install', ...modules], { env: { ...env, GOBIN: staging, CGO_ENABLED: '0' } });
    if (built.code !== 0) {
      throw new DevStackError(
        'temporal_server_build_failed',
        `go install ${modules.join(' ')} failed: ${built.stderr.trim().split('\n').slice(-5).join('\n')}`,
      );
    }
    const modCache = (await run(go, ['env', 'GOMODCACHE'], { env })).stdout.trim();
    const moduleSchema = join(modCache, `${SERVER_MODULE}@v${TEMPORAL_SERVER_VERSION}`, SCHEMA);
    if (!existsSync(moduleSchema)) {
      throw new DevStackError('temporal_server_build_failed', `the server module's schemas are not at ${moduleSchema}`);
    }
    cpSync(moduleSchema, join(staging, SCHEMA), { recursive: true });
    renameSync(join(staging, 'server'), join(staging, 'temporal-server'));
    renameSync(join(staging, 'sql'), join(staging, 'temporal-sql-tool'));
    rmSync(dir, { recursive: true, force: true });
    mkdirSync(join(dir, '..'), { recursive: true });
    // One rename: a concurrent start sees the whole build or none of it.
    renameSync(staging, dir);
  } finally {
    rmSync(staging, { recursive: true, force: true });
  }
  log(`built ${dir} in ${Math.round((Date.now() - started) / 1000)} s`);
  return build;
}

/** A free loopback port below 32768: Temporal stores membership ports as a SMALLINT. */
async function freeLowPort(taken: Set<number>): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (taken.has(port)) continue;
    if (await isFree(port)) {
      taken.add(port);
      return port;
    }
  }
  throw new DevStackError('temporal_server_ports', 'found no free loopback port between 20000 and 32000');
}

export interface StartTemporalServerOptions {
  /** Maintenance connection string of the Postgres that holds Temporal's databases. */
  postgresAdminUrl: string;
  /** Names of the two databases: `<prefix>` and `<prefix>_visibility`. */
  databasePrefix?: string;
  /** Folder of the server's config and log; the ports are chosen once and kept there across restarts. */
  stateDir: string;
  namespace?: string;
  numHistoryShards?: number;
  env?: NodeJS.ProcessEnv;
}

export interface TemporalClusterServer extends TemporalServer {
  /** The server's log (JSON lines, warnings and errors). */
  logFile: string;
  /** Stops the server (SIGKILL: a crash; SIGTERM: a clean stop) and starts it again on the same ports. */
  restart(options?: { signal?: NodeJS.Signals; downMs?: number }): Promise<void>;
  /** Stops it until `start()`. */
  kill(signal?: NodeJS.Signals): Promise<void>;
  start(): Promise<void>;
}

async function adminQuery<T extends pg.QueryResultRow>(url: string, sql: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return (await client.query<T>(sql, values)).rows;
  } finally {
    await client.end();
  }
}

/** Creates the database when missing, then brings its schema to the newest version (idempotent). */
async function setUpDatabase(
  build: TemporalServerBuild,
  adminUrl: string,
  database: string,
  schema: 'temporal' | 'visibility',
): Promise<void> {
  const url = new URL(adminUrl);
  const base = [
    '--plugin',
    'postgres12',
    '--ep',
    url.hostname,
    '-p',
    url.port || '5432',
    '-u',
    decodeURIComponent(url.username) || 'postgres',
    '--db',
    database,
  ];
  const env = { ...process.env, SQL_PASSWORD: decodeURIComponent(url.password) };
  const tool = async (args: string[]): Promise<void> => {
    const result = await run(build.sqlTool, [...base, ...args], { env });
    if (result.code !== 0) {
      throw new DevStackError(
        'temporal_schema_failed',
        `temporal-sql-tool ${args[0]} on ${database} failed: ${(result.stderr || result.stdout).trim().split('\n').slice(-3).join(' ')}`,
      );
    }
  };
  const exists = await adminQuery(adminUrl, 'SELECT 1 FROM pg_database WHERE datname = $1', [database]);
  if (exists.length === 0) {
    await tool(['create-database']);
    await tool(['setup-schema', '-v', '0.0']);
  }
  await tool(['update-schema', '-d', join(build.schemaDir, schema, 'versioned')]);
}

function serverConfig(options: {
  adminUrl: string;
  databasePrefix: string;
  ports: Record<'frontend' | 'frontendHttp' | 'history' | 'matching' | 'worker', number> &
    Record<'frontendMembership' | 'historyMembership' | 'matchingMembership' | 'workerMembership', number>;
  numHistoryShards: number;
  dynamicConfigFile: string;
}): object {
  const url = new URL(options.adminUrl);
  const sql = (databaseName: string, maxConns: number) => ({
    sql: {
      pluginName: 'postgres12',
      databaseName,
      connectAddr: `${url.hostname}:${url.port || '5432'}`,
      connectProtocol: 'tcp',
      user: decodeURIComponent(url.username) || 'postgres',
      password: decodeURIComponent(url.password),
      maxConns,
      maxIdleConns: maxConns,
      maxConnLifetime: '1h',
    },
  });
  const rpc = (grpcPort: number, membershipPort: number, httpPort?: number) => ({
    rpc: { grpcPort, membershipPort, bindOnIP: '127.0.0.1', ...(httpPort ? { httpPort } : {}) },
  });
  const { ports } = options;
  return {
    log: { stdout: true, level: 'warn' },
    persistence: {
      defaultStore: 'postgres-default',
      visibilityStore: 'postgres-visibility',
      numHistoryShards: options.numHistoryShards,
      datastores: {
        'postgres-default': sql(options.databasePrefix, 20),
        'postgres-visibility': sql(`${options.databasePrefix}_visibility`, 4),
      },
    },
    global: { membership: { maxJoinDuration: '30s', broadcastAddress: '127.0.0.1' } },
    services: {
      frontend: rpc(ports.frontend, ports.frontendMembership, ports.frontendHttp),
      history: rpc(ports.history, ports.historyMembership),
      matching: rpc(ports.matching, ports.matchingMembership),
      worker: rpc(ports.worker, ports.workerMembership),
    },
    clusterMetadata: {
      enableGlobalNamespace: false,
      failoverVersionIncrement: 10,
      masterClusterName: 'active',
      currentClusterName: 'active',
      clusterInformation: {
        active: {
          enabled: true,
          initialFailoverVersion: 1,
          rpcName: 'frontend',
          rpcAddress: `127.0.0.1:${ports.frontend}`,
        },
      },
    },
    dcRedirectionPolicy: { policy: 'noop' },
    archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } },
    namespaceDefaults: { archival: { history: { state: 'disabled' }, visibility: { state: 'disabled' } } },
    dynamicConfigClient: { filepath: options.dynamicConfigFile, pollInterval: '10s' },
  };
}

async function namespaceUsable(address: string, namespace: string): Promise<boolean> {
  const connection = await probeConnection({ address }, 2000);
  try {
    // Resolves the namespace through the server's namespace cache, as starting a workflow does.
    await connection.workflowService.listWorkflowExecutions({ namespace, pageSize: 1 });
    return true;
  } finally {
    await connection.close();
  }
}

async function ensureNamespace(address: string, namespace: string): Promise<void> {
  const connection = await probeConnection({ address }, 5000);
  try {
    await connection.workflowService.describeNamespace({ namespace }).catch(async () => {
      await connection.workflowService
        .registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') })
        .catch((error: unknown) => {
          if (!/already exists|AlreadyExists/i.test(String(error))) throw error;
        });
    });
  } finally {
    await connection.close();
  }
}

/** Sets up Temporal's databases and starts the server; resolves once its namespace takes requests. */
export async function startTemporalServer(options: StartTemporalServerOptions): Promise<TemporalClusterServer> {
  const env = options.env ?? process.env;
  const build = await ensureTemporalServer(env);
  const namespace = options.namespace ?? 'default';
  const databasePrefix = options.databasePrefix ?? 'temporal';
  await setUpDatabase(build, options.postgresAdminUrl, databasePrefix, 'temporal');
  await setUpDatabase(build, options.postgresAdminUrl, `${databasePrefix}_visibility`, 'visibility');

  const configDir = join(options.stateDir, 'config');
  mkdirSync(configDir, { recursive: true });
  const taken = new Set<number>();
  const ports = {
    frontend: await freeLowPort(taken),
    frontendHttp: await freeLowPort(taken),
    frontendMembership: await freeLowPort(taken),
    history: await freeLowPort(taken),
    historyMembership: await freeLowPort(taken),
    matching: await freeLowPort(taken),
    matchingMembership: await freeLowPort(taken),
    worker: await freeLowPort(taken),
    workerMembership: await freeLowPort(taken),
  };
  const dynamicConfigFile = join(configDir, 'dynamic.yaml');
  writeFileSync(dynamicConfigFile, stringify({ 'limit.maxIDLength': [{ value: 255, constraints: {} }] }));
  const config = serverConfig({
    adminUrl: options.postgresAdminUrl,
    databasePrefix,
    ports,
    numHistoryShards: options.numHistoryShards ?? 4,
    dynamicConfigFile,
  });
  // Mode 0600: the file holds the database password when there is one.
  writeFileSync(join(configDir, 'topology.yaml'), stringify(config), { mode: 0o600 });
  const address = `127.0.0.1:${ports.frontend}`;
  const logFile = join(options.stateDir, 'temporal-server.log');
  const args = ['--root', options.stateDir, '--config', 'config', '--env', 'topology', '--allow-no-auth', 'start'];

  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    const logStream = createWriteStream(logFile, { flags: 'a' });
    const current = spawn(build.server, args, { stdio: ['ignore', 'pipe', 'pipe'], env });
    current.stdout?.pipe(logStream);
    current.stderr?.pipe(logStream);
    child = current;
    let exited = false;
    current.once('exit', () => (exited = true));
    const ready = await waitUntil(
      async () => {
        await ensureNamespace(address, namespace);
        return namespaceUsable(address, namespace);
      },
      {
        timeoutMs: 120_000,
        intervalMs: 250,
        gaveUp: () => (exited ? new Error(`the server exited (its log: ${logFile})`) : undefined),
      },
    );
    if (!ready.ok) {
      await stop('SIGKILL');
      const reason = ready.lastError instanceof Error ? ready.lastError.message.split('\n')[0] : 'no answer';
      throw new DevStackError(
        'temporal_start_failed',
        `The Temporal server did not take requests at ${address} within 120 s: ${reason}. Its log: ${logFile}`,
      );
    }
  };
  const stop = async (signal: NodeJS.Signals = 'SIGTERM'): Promise<void> => {
    const current = child;
    if (!current || current.exitCode !== null || current.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => current.once('exit', () => resolve()));
    current.kill(signal);
    const timer = setTimeout(() => current.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  };
  await start();
  const version =
    (await run(build.server, ['--version'])).stdout.trim() || `Temporal server ${TEMPORAL_SERVER_VERSION}`;
  return {
    address,
    namespace,
    uiUrl: undefined,
    version: `${version} on Postgres`,
    owned: true,
    logFile,
    start,
    kill: stop,
    async restart({ signal = 'SIGKILL', downMs = 0 } = {}) {
      await stop(signal);
      if (downMs > 0) await new Promise((resolve) => setTimeout(resolve, downMs));
      await start();
    },
    stop: () => stop('SIGTERM'),
  };
}
