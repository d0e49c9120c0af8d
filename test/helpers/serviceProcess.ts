/**
 * The service as an operator runs it: `src/main.ts` in a process of its own (node with tsx's loader,
 * so SIGINT reaches main.ts itself), with the environment given and nothing of the test run's own
 * settings leaking in. And an empty database (no migrations), for first starts.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import pg from 'pg';
import { eventually } from './eventually.js';
import { stack, uniqueName } from '../kit/stack.js';
import { deferCleanup } from '../kit/cleanup.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const TSX_LOADER = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

export interface ServiceProcess {
  /** The process id (its memory: /proc/<pid>/status). */
  pid: number;
  output(): string;
  exited: Promise<number | null>;
  interrupt(): void;
  kill(): void;
  /** Resolves with the output once it matches `pattern`; fails when the process exits first. */
  waitFor(pattern: RegExp, timeoutMs: number, what: string): Promise<string>;
}

/** Variables of the test run that must not reach the service: each test says what the service gets. */
const SCRUBBED = [
  'DATABASE_URL',
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'SERVICE_DATA_DIR',
  'SERVICE_ENCRYPTION_KEY',
  'SERVICE_ROLE',
  'PORT',
];

/**
 * `nodeArgs`: what node runs, by default src/main.ts through tsx's loader (`npm start`); the built server
 * is `[join(REPO, 'dist/src/main.js')]` (`npm run serve`, test/builtServer.test.ts).
 */
export function startService(
  env: Record<string, string>,
  options: { cwd?: string; nodeArgs?: string[] } = {},
): ServiceProcess {
  const base = { ...process.env };
  for (const name of SCRUBBED) delete base[name];
  for (const name of Object.keys(base))
    if (name.startsWith('TEMPORAL_TLS') || name === 'TEMPORAL_API_KEY') delete base[name];
  const nodeArgs = options.nodeArgs ?? ['--import', TSX_LOADER, join(REPO, 'src/main.ts')];
  const child = spawn(process.execPath, nodeArgs, {
    cwd: options.cwd ?? REPO,
    // Warnings and errors only (no access log): the worker's and the pool's warnings stay in the output
    // that the tests scan for secrets.
    env: { ...base, SERVICE_LOG_LEVEL: 'warn', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  let done = false;
  void exited.then(() => (done = true));
  deferCleanup(async () => {
    if (!done) {
      child.kill('SIGKILL');
      await exited;
    }
  });
  return {
    pid: child.pid ?? 0,
    output: () => output,
    exited,
    interrupt: () => child.kill('SIGINT'),
    kill: () => child.kill('SIGKILL'),
    waitFor: (pattern, timeoutMs, what) => {
      const exitedEarly = exited.then((code) => {
        throw new Error(`the service exited (${code}) before ${what}:\n${output}`);
      });
      const matched = eventually(async () => (pattern.test(output) ? output : undefined), timeoutMs, what);
      return Promise.race([matched, exitedEarly]);
    },
  };
}

/** The production settings of a service process against the test run's servers. */
export function productionEnv(databaseUrl: string, extra: Record<string, string> = {}): Record<string, string> {
  const { temporalAddress, temporalNamespace } = stack();
  return {
    DATABASE_URL: databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_NAMESPACE: temporalNamespace,
    TEMPORAL_TASK_QUEUE: uniqueName('tq'),
    SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    DATABASE_POOL_SIZE: '4',
    ...extra,
  };
}

async function admin(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: stack().postgresAdminUrl, connectionTimeoutMillis: 5000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A database with nothing in it (no migrations), dropped after the file. */
export async function useEmptyDatabase(): Promise<string> {
  const name = uniqueName('empty');
  await admin(`CREATE DATABASE ${name}`);
  deferCleanup(() => admin(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined));
  return stack().postgresAdminUrl.replace(/\/postgres$/, `/${name}`);
}
