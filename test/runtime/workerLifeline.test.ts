/**
 * A worker process a test starts never outlives the test runner (issue 29, "Also"): a clean-clone CI run
 * left test/kit/workerProcess.ts running 28 minutes after the suite, reparented to init and retrying
 * the stopped Temporal server. Here a stand-in runner starts a worker the way the tests do and is then
 * killed abruptly (SIGKILL: no hook of its runs); the worker must be gone soon after.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { stack, uniqueName } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';

const here = dirname(fileURLToPath(import.meta.url));
const TSX_LOADER = pathToFileURL(join(here, '..', '..', 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe('a worker process started by a test', () => {
  it('dies with the runner that started it, even when the runner is killed with SIGKILL', async () => {
    const { url } = await useDatabase();
    const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
    const runner = spawn(process.execPath, ['--import', TSX_LOADER, join(here, 'fixtures', 'lifelineRunner.ts')], {
      env: {
        ...process.env,
        DATABASE_URL: url,
        TEMPORAL_ADDRESS: temporalAddress,
        TEMPORAL_NAMESPACE: temporalNamespace,
        TASK_QUEUE: uniqueName('tq'),
        WORKFLOW_BUNDLE: workflowBundlePath,
        API_BASE_URL: 'http://127.0.0.1:9',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    runner.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    runner.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const runnerExited = new Promise((resolve) => runner.once('exit', resolve));
    let workerPid = 0;
    try {
      workerPid = await eventually(
        async () => {
          const match = /worker (\d+) ready/.exec(output);
          return match ? Number(match[1]) : undefined;
        },
        90_000,
        'the runner’s worker to poll',
      );
      expect(alive(workerPid)).toBe(true);
      runner.kill('SIGKILL');
      await runnerExited;
      // Gone within seconds (the lifeline closes at once; the parent check runs every 0.5 s).
      await eventually(async () => (alive(workerPid) ? undefined : true), 30_000, `worker ${workerPid} to exit`);
      expect(alive(workerPid)).toBe(false);
    } finally {
      runner.kill('SIGKILL');
      if (workerPid > 0 && alive(workerPid)) process.kill(workerPid, 'SIGKILL');
    }
  }, 180_000);
});
