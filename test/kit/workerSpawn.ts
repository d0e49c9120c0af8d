/**
 * Spawning test/kit/workerProcess.ts (node with tsx's loader, not the tsx CLI: the CLI runs the
 * script in a child process of its own, so a SIGKILL sent to it would leave the real worker running as an
 * orphan) with a lifeline: its stdin is a pipe from this process, and it exits when the pipe closes, so
 * it never outlives the process that started it, even one killed with SIGKILL. No vitest here: the
 * lifeline test's stand-in runner uses it outside vitest (processWorker.ts adds the afterAll cleanup).
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const TSX_LOADER = pathToFileURL(join(here, '..', '..', 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

/** Every worker process this process started that has not exited yet. */
export const runningWorkers = new Set<ChildProcess>();

export function spawnWorkerProcess(env: NodeJS.ProcessEnv, options: Pick<SpawnOptions, 'cwd'> = {}): ChildProcess {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, join(here, 'workerProcess.ts')], {
    ...options,
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  runningWorkers.add(child);
  child.once('exit', () => runningWorkers.delete(child));
  return child;
}
