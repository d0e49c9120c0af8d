/**
 * Worker restart (issue 21, item 3). `npx tsx bench/workerRestart.ts [--kills N] [--entry path/to/main.ts]`
 *
 * Starts the service as `npm start` does (SERVICE_ROLE=all: the API, and the worker in a child process
 * that the supervisor restarts) over an ephemeral dev stack, then SIGKILLs the worker child N times
 * (default 3), each time once it is polling. For each: the time from the kill to the replacement
 * polling the task queue, as Temporal sees it (a poller of a new process in DescribeTaskQueue), and
 * the same less the supervisor's back-off before its restart (which the supervisor logs). Also the
 * first start: from the spawn of the service to its worker polling.
 *
 * `--entry` runs another checkout's src/main.ts (an older build, for a before/after figure).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import proto from '@temporalio/proto';
import { startStack } from '../src/devstack/index.js';
import { freePort } from '../src/devstack/process.js';
import { connectTemporal } from '../src/temporal/connection.js';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const { values } = parseArgs({
  options: {
    kills: { type: 'string', default: '3' },
    entry: { type: 'string' },
    'no-standby': { type: 'boolean', default: false },
  },
});
const withStandby = !values['no-standby'];
const kills = Number(values.kills);
if (!Number.isInteger(kills) || kills < 1) throw new Error('--kills must be a positive integer');
const entry = resolve(values.entry ?? join(root, 'src', 'main.ts'));

const stack = await startStack({ ephemeral: true });
const dataDir = mkdtempSync(join(tmpdir(), 'worker-restart-'));
const taskQueue = `restart-${randomBytes(4).toString('hex')}`;
const connection = await connectTemporal({ address: stack.temporal.address });
let output = '';
const spawnedAt = Date.now();
const service = spawn(join(root, 'node_modules', '.bin', 'tsx'), [entry], {
  cwd: dirname(dirname(entry)),
  env: {
    ...process.env,
    SERVICE_ROLE: 'all',
    TEMPORAL_ADDRESS: stack.temporal.address,
    TEMPORAL_NAMESPACE: stack.temporal.namespace,
    TEMPORAL_TASK_QUEUE: taskQueue,
    DATABASE_URL: stack.postgres.url,
    SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
    SERVICE_DATA_DIR: dataDir,
    // The supervisor's lines (a restart's back-off) are warnings; the access log stays quiet.
    SERVICE_LOG_LEVEL: 'warn',
    SERVICE_WORKER_STANDBY: String(withStandby),
    PORT: String(await freePort()),
  },
  stdio: ['ignore', 'pipe', 'pipe'],
});
service.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
service.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));

/** Pids of the processes polling the workflow task queue now (identity `pid@host`, the SDK's default). */
async function pollerPids(): Promise<Set<number>> {
  const answer = await connection.workflowService.describeTaskQueue({
    namespace: stack.temporal.namespace,
    taskQueue: { name: taskQueue, kind: proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return new Set((answer.pollers ?? []).map((poller) => Number((poller.identity ?? '').split('@')[0])));
}

async function newPoller(seen: Set<number>, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const pid of await pollerPids()) if (!seen.has(pid) && pid > 0) return pid;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no new worker polled within ${timeoutMs / 1000} s; the service said:\n${output.slice(-3000)}`);
}

/** Waits until the supervisor has said `count` times that a standby is ready. */
async function standbyReady(count: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((output.match(/standby ready \(pid/g) ?? []).length < count) {
    if (Date.now() > deadline)
      throw new Error(`no standby ready within ${timeoutMs / 1000} s:\n${output.slice(-3000)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const seen = new Set<number>();
const figures: string[] = [];
try {
  let pid = await newPoller(seen, 300_000);
  seen.add(pid);
  figures.push(`first start (spawn to polling): ${((Date.now() - spawnedAt) / 1000).toFixed(1)} s`);
  for (let kill = 1; kill <= kills; kill++) {
    // With a standby, each kill finds one ready (the supervisor says so once it is).
    if (withStandby) await standbyReady(kill, 300_000);
    const before = output.length;
    process.kill(pid, 'SIGKILL');
    const killedAt = Date.now();
    pid = await newPoller(seen, 300_000);
    seen.add(pid);
    const total = Date.now() - killedAt;
    const backoff = Number(/starting it again in ([\d.]+) s/.exec(output.slice(before))?.[1] ?? '0') * 1000;
    figures.push(
      `kill ${kill}: polling ${(total / 1000).toFixed(1)} s after the kill, ` +
        `${((total - backoff) / 1000).toFixed(1)} s after the supervisor's ${backoff / 1000} s back-off`,
    );
  }
  const bundleLines = output.split('\n').filter((line) => line.includes('workflow bundle') || line.includes('bundled'));
  console.log([`entry ${entry}`, `standby ${withStandby ? 'on' : 'off'}`, ...figures, ...bundleLines].join('\n'));
} finally {
  service.kill('SIGTERM');
  await new Promise((resolve) => service.once('exit', resolve));
  await connection.close();
  await stack.stop();
  rmSync(dataDir, { recursive: true, force: true });
}
