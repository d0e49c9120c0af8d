import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, renameSync, rmSync, accessSync, constants } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import type { TLSConfig } from '@temporalio/client';
import { probeConnection } from '../temporal/connection.js';
import { tlsHandshakeProblem } from '../temporal/tlsProbe.js';
import { startOnFreePorts, saysPortTaken, type PortChooser, type PortStart } from './portRetry.js';
import { DevStackError, freePort, log, run, waitUntil } from './process.js';

/** The Temporal CLI release the project builds; the newest that `go install` accepts (see docs/architecture.md). */
export const TEMPORAL_CLI_VERSION = '1.5.1';
const TEMPORAL_CLI_MODULE = `github.com/temporalio/cli/cmd/temporal@v${TEMPORAL_CLI_VERSION}`;

export interface TemporalServer {
  /** host:port of the frontend gRPC service. */
  address: string;
  namespace: string;
  /** Web UI base URL, when this process started a dev server with its UI. */
  uiUrl: string | undefined;
  /** What the server reports about itself, for logs (for example "temporal version 1.5.1 (Server 1.29.1, UI 2.42.1)"). */
  version: string;
  /** True when this process started the server (and so stops it). */
  owned: boolean;
  stop(): Promise<void>;
}

export interface StartTemporalOptions {
  /** SQLite file that keeps the dev server's state across restarts; omitted means a throw-away in-memory server. */
  dbFile?: string | undefined;
  /** Serve the Web UI (on gRPC port + 1000). */
  ui?: boolean;
  /** Fixed gRPC port; a free one when omitted. */
  port?: number | undefined;
  namespace?: string;
  env?: NodeJS.ProcessEnv;
  /** TLS and API key for the server at TEMPORAL_ADDRESS (src/temporal/connection.ts). */
  connection?: ReachOptions | undefined;
  /** Tests: chooses the free ports (src/devstack/portRetry.ts), to hand the server one that is taken. */
  choosePorts?: PortChooser;
}

/** How to reach a server that is not plaintext (Temporal Cloud, mTLS). */
export interface ReachOptions {
  tls?: TLSConfig | undefined;
  apiKey?: string | undefined;
}

/** Where the project caches what it builds once per machine (outside any repository). */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env['SERVICE_CACHE_DIR']) return env['SERVICE_CACHE_DIR'];
  const base = env['XDG_CACHE_HOME'] || join(homedir(), '.cache');
  return join(base, 'integration-service');
}

export function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function onPath(name: string, env: NodeJS.ProcessEnv): string | undefined {
  for (const dir of (env['PATH'] ?? '').split(delimiter)) {
    if (!dir) continue;
    const candidate = join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

/**
 * Finds the Temporal CLI: `TEMPORAL_CLI_PATH`, then `temporal` on PATH, then the cache, then builds it
 * with `go install` into the cache. Returns undefined when none of these works (the caller may then
 * fall back to the SDK's download); `tried` lists what was looked at, for the error message.
 */
export async function findTemporalCli(
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ path: string | undefined; tried: string[] }> {
  const tried: string[] = [];
  const explicit = env['TEMPORAL_CLI_PATH'];
  if (explicit) {
    if (isExecutable(explicit)) return { path: explicit, tried };
    throw new DevStackError(
      'temporal_cli_not_found',
      `TEMPORAL_CLI_PATH is set to ${explicit}, but no executable is there. Point it at a Temporal CLI binary or unset it.`,
    );
  }
  tried.push('TEMPORAL_CLI_PATH (not set)');
  const fromPath = onPath('temporal', env);
  if (fromPath) return { path: fromPath, tried };
  tried.push('`temporal` on PATH (not found)');
  const cached = join(cacheDir(env), `temporal-cli-${TEMPORAL_CLI_VERSION}`, 'temporal');
  if (isExecutable(cached)) return { path: cached, tried };
  tried.push(`cache ${cached} (not there)`);
  const go = onPath('go', env);
  if (!go) {
    tried.push('`go install` (no Go toolchain on PATH)');
    return { path: undefined, tried };
  }
  const built = await buildTemporalCli(go, cached, env);
  if (built.ok) return { path: cached, tried };
  tried.push(`\`go install ${TEMPORAL_CLI_MODULE}\` failed: ${built.error}`);
  return { path: undefined, tried };
}

async function buildTemporalCli(
  go: string,
  target: string,
  env: NodeJS.ProcessEnv,
): Promise<{ ok: true } | { ok: false; error: string }> {
  const dir = dirname(target);
  const staging = `${dir}.build-${process.pid}`;
  mkdirSync(staging, { recursive: true });
  log(`building the Temporal CLI v${TEMPORAL_CLI_VERSION} with go install (one time per machine, a few minutes)…`);
  const started = Date.now();
  const result = await run(go, ['install', TEMPORAL_CLI_MODULE], {
    env: { ...env, GOBIN: staging, CGO_ENABLED: '0' },
  });
  if (result.code !== 0) {
    rmSync(staging, { recursive: true, force: true });
    return { ok: false, error: result.stderr.trim().split('\n').slice(-5).join('\n') || `exit code ${result.code}` };
  }
  mkdirSync(dir, { recursive: true });
  // A rename is atomic, so a concurrent build or a reader never sees half a binary.
  renameSync(join(staging, 'temporal'), target);
  rmSync(staging, { recursive: true, force: true });
  log(`built ${target} in ${Math.round((Date.now() - started) / 1000)} s`);
  return { ok: true };
}

async function answers(address: string, namespace: string, reach: ReachOptions = {}): Promise<boolean> {
  const connection = await probeConnection({ ...reach, address }, 1000);
  try {
    await connection.workflowService.describeNamespace({ namespace });
    return true;
  } finally {
    await connection.close();
  }
}

/** Checks that a Temporal frontend answers at `address`, with an error that names it when it does not. */
export async function assertTemporalReachable(
  address: string,
  namespace = 'default',
  timeoutMs = 5000,
  reach: ReachOptions = {},
): Promise<void> {
  const result = await waitUntil(() => answers(address, namespace, reach), { timeoutMs, intervalMs: 250 });
  if (!result.ok) {
    const handshake = await tlsHandshakeProblem(address, reach.tls);
    throw new DevStackError(
      'temporal_unreachable',
      `Temporal is not reachable at ${address} (namespace ${namespace}${reach.tls ? ', TLS' : ''}): ${describe(result.lastError)}. ` +
        (handshake !== undefined ? `The TLS handshake failed (${handshake}). ` : '') +
        (reach.tls
          ? 'Check that the server speaks TLS and that TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME and the client certificate match it (docs/operations.md, "Temporal Cloud and TLS").'
          : 'Start it, or set TEMPORAL_ADDRESS to a server that runs, or unset it to let the project start a dev server.'),
    );
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message.split('\n')[0] ?? error.name;
  return error === undefined ? 'no answer' : JSON.stringify(error);
}

/**
 * Gives a Temporal server: the one at `TEMPORAL_ADDRESS` when set (nothing is started), otherwise a
 * `temporal server start-dev` child process on free loopback ports.
 */
export async function startTemporal(options: StartTemporalOptions = {}): Promise<TemporalServer> {
  const env = options.env ?? process.env;
  const namespace = options.namespace ?? env['TEMPORAL_NAMESPACE'] ?? 'default';
  const external = env['TEMPORAL_ADDRESS'];
  if (external) {
    await assertTemporalReachable(external, namespace, 10_000, options.connection);
    return {
      address: external,
      namespace,
      uiUrl: undefined,
      version: 'external server',
      owned: false,
      stop: async () => {},
    };
  }
  const { path, tried } = await findTemporalCli(env);
  if (!path) return startWithSdkDownload(namespace, tried, options);

  // A go-install build reports 0.0.0-DEV; the module version it was built from is known.
  const version = (await run(path, ['--version'])).stdout.trim().replace('0.0.0-DEV', `${TEMPORAL_CLI_VERSION}`);
  const ui = options.ui ?? false;
  const fixed = options.port;
  return startOnFreePorts({
    what: 'the Temporal dev server',
    chosen: fixed === undefined ? ['gRPC', 'HTTP', 'metrics'] : ['HTTP', 'metrics'],
    fixed: fixed === undefined ? {} : { gRPC: fixed },
    // The Web UI is on the gRPC port + 1000.
    ...(ui ? { derived: ({ gRPC }: { gRPC: number }) => ({ UI: gRPC + 1000 }) } : {}),
    remedy: 'Set TEMPORAL_ADDRESS to use a running server instead.',
    ...(options.choosePorts ? { choose: options.choosePorts } : {}),
    start: async (ports): Promise<PortStart<TemporalServer>> => {
      const { gRPC: port, HTTP: httpPort, metrics: metricsPort } = ports;
      const args = [
        'server',
        'start-dev',
        '--ip',
        '127.0.0.1',
        '--port',
        String(port),
        '--http-port',
        String(httpPort),
        '--metrics-port',
        String(metricsPort),
        '--log-level',
        'error',
        '--namespace',
        namespace,
        // One SQLite connection carries all persistence; WAL keeps readers from blocking the writer.
        '--sqlite-pragma',
        'journal_mode=wal',
      ];
      if (options.dbFile) {
        mkdirSync(dirname(options.dbFile), { recursive: true });
        args.push('--db-filename', options.dbFile);
      }
      if (ui) args.push('--ui-port', String(port + 1000));
      else args.push('--headless');

      const child = spawn(path, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: false });
      let stderr = '';
      child.stderr?.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString()).slice(-4000);
      });
      let exited = false;
      child.on('exit', () => (exited = true));
      const address = `127.0.0.1:${port}`;
      const ready = await waitUntil(() => answers(address, namespace), {
        timeoutMs: 60_000,
        intervalMs: 200,
        gaveUp: () => (exited ? new Error(`the dev server exited: ${stderr.trim() || 'no output'}`) : undefined),
      });
      if (!ready.ok) {
        await stopChild(child);
        if (exited && saysPortTaken(stderr)) return { portTaken: stderr };
        throw new DevStackError(
          'temporal_start_failed',
          `Could not start the Temporal dev server (${path} ${args.join(' ')}): ${describe(ready.lastError)}. ` +
            'Set TEMPORAL_ADDRESS to use a running server instead.',
        );
      }
      return {
        started: {
          address,
          namespace,
          uiUrl: ui ? `http://127.0.0.1:${port + 1000}` : undefined,
          version,
          owned: true,
          stop: () => stopChild(child),
        },
      };
    },
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  await exited;
  clearTimeout(timer);
}

/** Last resort for users with internet: the SDK downloads a dev server build. */
async function startWithSdkDownload(
  namespace: string,
  tried: string[],
  options: StartTemporalOptions,
): Promise<TemporalServer> {
  log('no Temporal CLI found and none could be built; trying the SDK download of the dev server…');
  try {
    // A devDependency (the production server never starts a dev server): absent from a production install.
    const { TestWorkflowEnvironment } = await import('@temporalio/testing').catch((error: unknown) => {
      if ((error as NodeJS.ErrnoException).code !== 'ERR_MODULE_NOT_FOUND') throw error;
      throw new Error(
        'it needs the package @temporalio/testing, a devDependency that this install lacks (`npm install --save-dev @temporalio/testing@1.24.0`)',
      );
    });
    const port = options.port ?? (await freePort());
    const ui = options.ui ?? false;
    if (options.dbFile) mkdirSync(dirname(options.dbFile), { recursive: true });
    const environment = await TestWorkflowEnvironment.createLocal({
      server: {
        namespace,
        ip: '127.0.0.1',
        port,
        ...(options.dbFile ? { dbFilename: options.dbFile } : {}),
        ...(ui ? { ui: true, uiPort: port + 1000 } : {}),
      },
    });
    const address = environment.address;
    return {
      address,
      namespace,
      uiUrl: ui ? `http://127.0.0.1:${port + 1000}` : undefined,
      version: 'SDK-downloaded dev server',
      owned: true,
      stop: () => environment.teardown(),
    };
  } catch (error) {
    tried.push(`the SDK download of the dev server failed: ${describe(error)}`);
    throw new DevStackError(
      'temporal_cli_not_found',
      `No Temporal server could be had. Tried: ${tried.join('; ')}. ` +
        `Install Go ≥ 1.25 (the project then builds the CLI itself), put a \`temporal\` binary on PATH or in TEMPORAL_CLI_PATH, ` +
        `or set TEMPORAL_ADDRESS to a running server.`,
    );
  }
}
