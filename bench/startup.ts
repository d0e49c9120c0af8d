/**
 * Start of the built server against TypeScript through tsx (issue 20). `npx tsx bench/startup.ts [--runs N]`
 *
 * Needs `npm run build` first. Over an ephemeral dev stack (Temporal dev server, local Postgres, migrated
 * once), starts the service N times (default 3) each way, alternating, in the same mode, SERVICE_ROLE=all
 * without the standby (the API in the process started, the worker in its supervised child):
 *   built  node dist/src/main.js          (`npm run serve`)
 *   tsx    node --import tsx src/main.ts  (`npm start`)
 * and measures from the spawn to GET /health answering 200, and to the worker child polling the task
 * queue (a poller in Temporal's DescribeTaskQueue). Each run has a task queue of its own and is stopped
 * (SIGINT, waited for) before the next.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import proto from '@temporalio/proto';
import { migrate } from '../src/db/migrate.js';
import { createPool } from '../src/db/pool.js';
import { startStack } from '../src/devstack/index.js';
import { freePort } from '../src/devstack/process.js';
import { connectTemporal } from '../src/temporal/connection.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({ options: { runs: { type: 'string', default: '3' } } });
const runs = Number(values.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error('--runs must be a positive integer');
const built = join(root, 'dist', 'src', 'main.js');
if (!existsSync(built)) throw new Error(`${built} is missing: run \`npm run build\` first`);

const VARIANTS = {
  built: [built],
  tsx: ['--import', 'tsx', join(root, 'src', 'main.ts')],
} as const;

const stack = await startStack({ ephemeral: true });
const pool = createPool({ url: stack.postgres.url, max: 1 });
await migrate(pool);
await pool.end();
const connection = await connectTemporal({ address: stack.temporal.address });
const scratch = mkdtempSync(join(tmpdir(), 'startup-bench-'));
const encryptionKey = randomBytes(32).toString('base64');

async function polling(taskQueue: string): Promise<boolean> {
  const answer = await connection.workflowService.describeTaskQueue({
    namespace: stack.temporal.namespace,
    taskQueue: { name: taskQueue, kind: proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (answer.pollers ?? []).length > 0;
}

async function healthy(port: number): Promise<boolean> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}/health`);
    await response.arrayBuffer();
    return response.status === 200;
  } catch {
    return false;
  }
}

async function once(args: readonly string[]): Promise<{ health: number; polling: number }> {
  const port = await freePort();
  const taskQueue = `startup-${randomBytes(4).toString('hex')}`;
  let output = '';
  const started = performance.now();
  const child = spawn(process.execPath, args, {
    cwd: root,
    env: {
      ...process.env,
      NODE_OPTIONS: '',
      SERVICE_ROLE: 'all',
      SERVICE_WORKER_STANDBY: 'false',
      TEMPORAL_ADDRESS: stack.temporal.address,
      TEMPORAL_NAMESPACE: stack.temporal.namespace,
      TEMPORAL_TASK_QUEUE: taskQueue,
      DATABASE_URL: stack.postgres.url,
      SERVICE_ENCRYPTION_KEY: encryptionKey,
      SERVICE_FIRST_SECRET_KEY: `sk_startup_${randomBytes(12).toString('hex')}`,
      SERVICE_DATA_DIR: join(scratch, 'data'),
      SERVICE_THREAD_MARKS_DIR: join(scratch, `marks-${taskQueue}`),
      SERVICE_LOG_LEVEL: 'warn',
      PORT: String(port),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolveExit) => child.once('exit', () => resolveExit()));
  let health: number | undefined;
  let polled: number | undefined;
  const deadline = Date.now() + 180_000;
  while (health === undefined || polled === undefined) {
    if (child.exitCode !== null || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the service did not become healthy and polling within 180 s:\n${output}`);
    }
    if (health === undefined && (await healthy(port))) health = performance.now() - started;
    if (polled === undefined && (await polling(taskQueue))) polled = performance.now() - started;
    await new Promise((resolveWait) => setTimeout(resolveWait, 20));
  }
  child.kill('SIGINT');
  await exited;
  return { health, polling: polled };
}

const results: Record<keyof typeof VARIANTS, { health: number; polling: number }[]> = { built: [], tsx: [] };
for (let run = 1; run <= runs; run++) {
  for (const name of Object.keys(VARIANTS) as (keyof typeof VARIANTS)[]) {
    const result = await once(VARIANTS[name]);
    results[name].push(result);
    process.stdout.write(
      `run ${run} ${name.padEnd(5)}  spawn → health ${(result.health / 1000).toFixed(2)} s, → worker polling ${(result.polling / 1000).toFixed(2)} s\n`,
    );
  }
}
const median = (numbers: number[]): number => [...numbers].sort((a, b) => a - b)[Math.floor(numbers.length / 2)]!;
for (const name of Object.keys(results) as (keyof typeof VARIANTS)[]) {
  const list = results[name];
  process.stdout.write(
    `${name.padEnd(5)}  median of ${list.length}: health ${(median(list.map((r) => r.health)) / 1000).toFixed(2)} s, ` +
      `polling ${(median(list.map((r) => r.polling)) / 1000).toFixed(2)} s\n`,
  );
}
await connection.close();
await stack.stop();
rmSync(scratch, { recursive: true, force: true });
