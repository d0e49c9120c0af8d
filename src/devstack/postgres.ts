import { execFileSync } from 'node:child_process';
import {
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmdirSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import pg from 'pg';
import { startOnFreePorts, saysPortTaken, type PortChooser, type PortStart } from './portRetry.js';
import { DevStackError, log, run, waitUntil } from './process.js';

export interface PostgresServer {
  /** Connection string of the service's database. */
  url: string;
  /** `SELECT version()` of the server, for logs. */
  version: string;
  /** True when this process started the cluster (and so stops it). */
  owned: boolean;
  /** Connection string of the maintenance database (`postgres`) of the same server. */
  adminUrl: string;
  stop(): Promise<void>;
}

export interface StartPostgresOptions {
  /** Cluster directory kept across restarts; a scratch directory that is removed on stop when omitted. */
  dataDir?: string | undefined;
  database?: string;
  /** Trade durability for speed (tests, benchmarks): no fsync, no synchronous commit. */
  ephemeral?: boolean;
  env?: NodeJS.ProcessEnv;
  /** Tests: chooses the free port (src/devstack/portRetry.ts), to hand the server one that is taken. */
  choosePorts?: PortChooser;
}

const isRoot = (): boolean => process.getuid?.() === 0;

/** Finds initdb and pg_ctl: PG_BIN_DIR, then Debian's /usr/lib/postgresql/<newest>/bin, then PATH. */
export function findPostgresBinaries(env: NodeJS.ProcessEnv = process.env): string | undefined {
  const candidates: string[] = [];
  if (env['PG_BIN_DIR']) candidates.push(env['PG_BIN_DIR']);
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const versions = readdirSync(debian)
      .filter((name) => /^\d+$/.test(name))
      .sort((a, b) => Number(b) - Number(a));
    for (const version of versions) candidates.push(join(debian, version, 'bin'));
  }
  for (const dir of (env['PATH'] ?? '').split(':')) if (dir) candidates.push(dir);
  return candidates.find((dir) => existsSync(join(dir, 'initdb')) && existsSync(join(dir, 'pg_ctl')));
}

async function installPostgres(): Promise<void> {
  if (!isRoot() || !existsSync('/usr/bin/apt-get')) {
    throw new DevStackError(
      'postgres_not_found',
      'PostgreSQL is not installed and cannot be installed automatically here (that needs root and apt-get). ' +
        'Install it (for example `sudo apt-get install postgresql`), set PG_BIN_DIR to the folder of its initdb and pg_ctl, ' +
        'or set DATABASE_URL to a running server.',
    );
  }
  log('PostgreSQL is not installed: installing Debian’s postgresql package (one time per machine)…');
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  const update = await run('apt-get', ['update'], { env });
  const install = await run('apt-get', ['install', '-y', '--no-install-recommends', 'postgresql'], { env });
  if (update.code !== 0 || install.code !== 0) {
    throw new DevStackError(
      'postgres_install_failed',
      `apt-get install postgresql failed: ${(install.stderr || update.stderr).trim().split('\n').slice(-3).join(' ')}. ` +
        'Install PostgreSQL yourself or set DATABASE_URL.',
    );
  }
}

/**
 * Runs a PostgreSQL binary, as the `postgres` user when we are root (initdb and postgres refuse to run as
 * root). From `/`: the caller's working folder may be one `postgres` cannot enter, and initdb fails there.
 */
async function runAsOwner(binary: string, args: string[]): Promise<{ code: number | null; output: string }> {
  const result = isRoot()
    ? await run('runuser', ['-u', 'postgres', '--', binary, ...args], { cwd: '/' })
    : await run(binary, args);
  return { code: result.code, output: `${result.stdout}\n${result.stderr}`.trim() };
}

function adoptForPostgres(dir: string): void {
  if (!isRoot()) return;
  const { uid, gid } = postgresUser();
  chownSync(dir, uid, gid);
}

/** Whether the `postgres` user can enter and write `dir` (every folder above it included). */
async function postgresCanUse(dir: string): Promise<boolean> {
  return (await run('runuser', ['-u', 'postgres', '--', 'test', '-w', dir, '-a', '-x', dir], { cwd: '/' })).code === 0;
}

/** Where clusters go when their data folder is out of the `postgres` user's reach: its home, /var/lib/postgresql on Debian. */
function reachableClusterRoot(): string {
  const home = requireSync('getent', ['passwd', 'postgres']).split(':')[5];
  return join(home || '/var/lib/postgresql', 'integration-service');
}

/**
 * The folder the cluster of `dataDir` lives in. Unless running as root, `dataDir` itself. As root the
 * server runs as `postgres`, which cannot reach a data folder under /root or in a `mktemp -d` folder
 * (mode 0700): then the cluster goes to a folder of its own under the `postgres` user's home, and
 * `dataDir` becomes a link to it, so a restart finds the same cluster.
 */
async function clusterFolder(dataDir: string): Promise<string> {
  if (!isRoot()) {
    mkdirSync(dataDir, { recursive: true });
    return dataDir;
  }
  if (lstatSync(dataDir, { throwIfNoEntry: false })?.isSymbolicLink()) {
    // Made by an earlier start; its folder is made again if it was deleted (a new, empty cluster).
    const target = resolve(dirname(dataDir), readlinkSync(dataDir));
    mkdirSync(target, { recursive: true });
    adoptForPostgres(target);
    return target;
  }
  mkdirSync(dataDir, { recursive: true });
  adoptForPostgres(dataDir);
  if (await postgresCanUse(dataDir)) return dataDir;
  if (readdirSync(dataDir).length > 0) {
    throw new DevStackError(
      'postgres_data_dir_unreachable',
      `The postgres user (which runs the local cluster when starting as root) cannot enter ${dataDir}, and it is not empty. ` +
        'Move the data folder (SERVICE_DATA_DIR) somewhere it can, or set DATABASE_URL to a running server.',
    );
  }
  const root = reachableClusterRoot();
  mkdirSync(root, { recursive: true });
  adoptForPostgres(root);
  if (!(await postgresCanUse(root))) {
    throw new DevStackError(
      'postgres_data_dir_unreachable',
      `The postgres user (which runs the local cluster when starting as root) can enter neither ${dataDir} nor ${root}. ` +
        'Set SERVICE_DATA_DIR to a folder it can enter, or set DATABASE_URL to a running server.',
    );
  }
  const target = mkdtempSync(join(root, 'cluster-'));
  adoptForPostgres(target);
  rmdirSync(dataDir);
  symlinkSync(target, dataDir);
  log(
    `the postgres user cannot enter ${dataDir}, so the cluster lives in ${target} (${dataDir} links to it; delete both to start afresh)`,
  );
  return target;
}

function postgresUser(): { uid: number; gid: number } {
  // The Debian package creates this user; its ids are read from the passwd database through `id`.
  const uid = Number(requireSync('id', ['-u', 'postgres']));
  const gid = Number(requireSync('id', ['-g', 'postgres']));
  if (!Number.isInteger(uid) || !Number.isInteger(gid)) {
    throw new DevStackError(
      'postgres_user_missing',
      'Running as root, but there is no `postgres` user to own the cluster (initdb refuses root). ' +
        'Install Debian’s postgresql package, which creates it, or set DATABASE_URL.',
    );
  }
  return { uid, gid };
}

function requireSync(command: string, args: string[]): string {
  try {
    return execFileSync(command, args, { encoding: 'utf8' }).trim();
  } catch {
    return 'NaN';
  }
}

async function queryOnce<T>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  // A server that dies mid-query fails the query; without a listener its 'error' event would end the process.
  client.on('error', () => undefined);
  await client.connect();
  try {
    const result = await client.query(sql);
    return result.rows as T[];
  } finally {
    await client.end();
  }
}

export async function serverVersion(url: string): Promise<string> {
  const rows = await queryOnce<{ server_version: string }>(url, 'SHOW server_version');
  return `PostgreSQL ${rows[0]?.server_version ?? 'unknown'}`;
}

/** Checks that Postgres answers at `url`, with an error that names it when it does not. */
export async function assertPostgresReachable(url: string, timeoutMs = 5000): Promise<void> {
  const result = await waitUntil(async () => (await queryOnce(url, 'SELECT 1')).length === 1, {
    timeoutMs,
    intervalMs: 200,
  });
  if (!result.ok) {
    const reason = result.lastError instanceof Error ? result.lastError.message : String(result.lastError);
    throw new DevStackError(
      'postgres_unreachable',
      `Postgres is not reachable at ${redactUrl(url)}: ${reason}. Start it, or fix DATABASE_URL, or unset DATABASE_URL to let the project start a cluster.`,
    );
  }
}

/** A connection string with its password replaced, safe for logs. */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password) parsed.password = '***';
    return parsed.toString();
  } catch {
    return '<unparseable DATABASE_URL>';
  }
}

/**
 * Gives a Postgres database: `DATABASE_URL` when set (nothing is started), otherwise a cluster of
 * Debian's PostgreSQL (installed when missing) on a free loopback port.
 */
export async function startPostgres(options: StartPostgresOptions = {}): Promise<PostgresServer> {
  const env = options.env ?? process.env;
  const database = options.database ?? 'service';
  if (env['DATABASE_URL']) {
    const url = env['DATABASE_URL'];
    await assertPostgresReachable(url, 10_000);
    const admin = new URL(url);
    admin.pathname = '/postgres';
    return { url, adminUrl: admin.toString(), version: await serverVersion(url), owned: false, stop: async () => {} };
  }

  let bin = findPostgresBinaries(env);
  if (!bin) {
    await installPostgres();
    bin = findPostgresBinaries(env);
    if (!bin)
      throw new DevStackError(
        'postgres_not_found',
        'PostgreSQL was installed but its initdb cannot be found; set PG_BIN_DIR.',
      );
  }
  const scratch = options.dataDir === undefined;
  const requested = options.dataDir ?? mkdtempSync(join(tmpdir(), 'service-pg-'));
  const dataDir = await clusterFolder(requested);

  if (!existsSync(join(dataDir, 'PG_VERSION'))) {
    if (readdirSync(dataDir).length > 0) {
      throw new DevStackError(
        'postgres_data_dir_not_empty',
        `${dataDir} is neither empty nor a Postgres cluster; move it away.`,
      );
    }
    const init = await runAsOwner(join(bin, 'initdb'), [
      '-D',
      dataDir,
      '-U',
      'postgres',
      '--auth=trust',
      '--encoding=UTF8',
      '--no-locale',
    ]);
    if (init.code !== 0) {
      throw new DevStackError('postgres_initdb_failed', `initdb failed in ${dataDir}: ${init.output.slice(-600)}`);
    }
  }
  const logFile = join(dataDir, 'server.log');
  const port = await startOnFreePorts({
    what: 'Postgres',
    chosen: ['Postgres'],
    remedy: 'Set DATABASE_URL to use a running Postgres instead.',
    ...(options.choosePorts ? { choose: options.choosePorts } : {}),
    start: async (ports): Promise<PortStart<number>> => {
      const port = ports.Postgres;
      const settings = [
        `-p ${port}`,
        `-k ${dataDir}`,
        '-c listen_addresses=127.0.0.1',
        '-c max_connections=300',
        '-c shared_buffers=256MB',
        ...(options.ephemeral ? ['-c fsync=off', '-c synchronous_commit=off', '-c full_page_writes=off'] : []),
      ].join(' ');
      // The log is appended to: only this start's lines say whether its port was taken.
      const logBefore = existsSync(logFile) ? readFileSync(logFile, 'utf8').length : 0;
      const start = await runAsOwner(join(bin, 'pg_ctl'), [
        '-D',
        dataDir,
        '-l',
        logFile,
        '-o',
        settings,
        '-w',
        '-t',
        '60',
        'start',
      ]);
      if (start.code === 0) return { started: port };
      const serverLog = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(logBefore).slice(-2000) : '';
      if (saysPortTaken(serverLog + start.output)) return { portTaken: `${start.output}\n${serverLog}` };
      throw new DevStackError(
        'postgres_start_failed',
        `pg_ctl start failed for ${dataDir} on port ${port}: ${start.output.slice(-600)} (server log: ${logFile})`,
      );
    },
  });
  const adminUrl = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const url = `postgres://postgres@127.0.0.1:${port}/${database}`;
  await assertPostgresReachable(adminUrl, 15_000);
  const exists = await queryOnce(
    adminUrl,
    `SELECT 1 FROM pg_database WHERE datname = '${database.replace(/'/g, "''")}'`,
  );
  if (exists.length === 0) await queryOnce(adminUrl, `CREATE DATABASE "${database.replace(/"/g, '""')}"`);

  const stop = async (): Promise<void> => {
    if (!existsSync(join(dataDir, 'postmaster.pid'))) return;
    await runAsOwner(join(bin, 'pg_ctl'), ['-D', dataDir, '-m', 'fast', '-w', 'stop']);
    if (scratch) for (const dir of new Set([dataDir, requested])) rmSync(dir, { recursive: true, force: true });
  };
  return { url, adminUrl, version: await serverVersion(url), owned: true, stop };
}
