/**
 * `npm start` (src/main.ts) with the local Postgres cluster, run from a checkout in a folder that the
 * `postgres` user cannot enter: a `mktemp -d` folder (mode 0700), as anything under /root is. As root the
 * cluster runs as `postgres` (initdb and postgres refuse root), which once failed there with initdb's
 * "could not change directory … Permission denied" (issue 19). Temporal is the test run's server; the
 * process starts its own cluster, its worker child and its API, stops on Ctrl-C and starts again on the
 * same state.
 */
import { spawn } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readlinkSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../src/devstack/process.js';
import { threadMarksDirFor } from '../src/temporal/scriptThreads.js';
import { eventually } from './helpers/eventually.js';
import { stack, uniqueName } from './kit/stack.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const TSX_LOADER = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

const checkout = mkdtempSync(join(tmpdir(), 'service-checkout-'));
const taskQueue = uniqueName('start');
let cluster: string | undefined;
let marks: string | undefined;

afterAll(() => {
  rmSync(checkout, { recursive: true, force: true });
  // A cluster placed outside the checkout (linked from it) goes too.
  if (cluster !== undefined && cluster !== join(checkout, '.service-data/postgres'))
    rmSync(cluster, { recursive: true, force: true });
  if (marks !== undefined) rmSync(marks, { recursive: true, force: true });
});

interface Started {
  output(): string;
  exited: Promise<number | null>;
  interrupt(): void;
}

/** `npm start` in the checkout folder: node with tsx's loader, so that SIGINT reaches main.ts itself. */
function start(env: Record<string, string>): Started {
  const base = { ...process.env };
  // The test run's own settings must not leak in: the local cluster is wanted, and the default folders.
  for (const name of ['DATABASE_URL', 'SERVICE_DATA_DIR', 'SERVICE_THREAD_MARKS_DIR', 'SERVICE_ENCRYPTION_KEY'])
    delete base[name];
  const child = spawn(process.execPath, ['--import', TSX_LOADER, join(REPO, 'src/main.ts')], {
    cwd: checkout,
    env: { ...base, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { output: () => output, exited, interrupt: () => child.kill('SIGINT') };
}

async function ready(started: Started): Promise<string> {
  const exitedEarly = started.exited.then((code) => {
    throw new Error(`npm start exited (${code}) before it was ready:\n${started.output()}`);
  });
  const isReady = eventually(
    async () => (/^ready\. Ctrl-C stops everything\./m.test(started.output()) ? started.output() : undefined),
    180_000,
    'npm start to be ready',
  );
  return Promise.race([isReady, exitedEarly]);
}

describe('npm start from a folder the postgres user cannot enter', () => {
  it('creates and starts its local cluster, stops on Ctrl-C, and starts again on the same state', async () => {
    expect(statSync(checkout).mode & 0o777).toBe(0o700);
    const { temporalAddress, temporalNamespace } = stack();
    const env = {
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: temporalNamespace,
      TEMPORAL_TASK_QUEUE: taskQueue,
      PORT: String(await freePort()),
    };

    const first = start(env);
    const output = await ready(first);
    const postgresUrl = /^Postgres\s+(postgres:\/\/\S+)/m.exec(output)?.[1] ?? '';
    expect(postgresUrl).toMatch(/^postgres:\/\/postgres@127\.0\.0\.1:\d+\/service$/);
    expect(output).toMatch(/migrations applied \d+/);
    const key = /secret key (\S+)/.exec(output)?.[1];
    expect(key).toBeDefined();
    const dataDir = join(checkout, '.service-data/postgres');
    cluster = lstatSync(dataDir).isSymbolicLink()
      ? resolve(join(checkout, '.service-data'), readlinkSync(dataDir))
      : dataDir;
    expect(existsSync(join(cluster, 'PG_VERSION'))).toBe(true);
    // The worker child keeps its thread marks in this install's own folder (src/temporal/scriptThreads.ts).
    marks = threadMarksDirFor({
      databaseUrl: postgresUrl,
      temporalAddress,
      namespace: temporalNamespace,
      taskQueue,
    });
    const folder = marks;
    await eventually(async () => (existsSync(folder) ? true : undefined), 120_000, `the thread marks folder ${folder}`);

    first.interrupt();
    expect(await first.exited).toBe(0);
    expect(first.output()).toMatch(/stopped\.\s*$/);
    expect(existsSync(join(cluster, 'postmaster.pid'))).toBe(false);

    // Again, the API alone: the same cluster, the same dev key, nothing to migrate.
    const second = start({ ...env, SERVICE_ROLE: 'api' });
    const again = await ready(second);
    expect(again).toMatch(/migrations up to date/);
    expect(/secret key (\S+)/.exec(again)?.[1]).toBe(key);
    second.interrupt();
    expect(await second.exited).toBe(0);
  }, 400_000);
});
