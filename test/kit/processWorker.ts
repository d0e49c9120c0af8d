import type { ChildProcess } from 'node:child_process';

import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stack } from './stack.js';
import { runningWorkers, spawnWorkerProcess } from './workerSpawn.js';
import { deferCleanup } from './cleanup.js';

export interface WorkerChild {
  child: ChildProcess;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

let cleanupRegistered = false;

/**
 * A worker process with its lifeline (workerSpawn.ts); the test file's afterAll kills any still running.
 */
export function spawnTrackedWorker(env: NodeJS.ProcessEnv): ChildProcess {
  const child = spawnWorkerProcess(env);
  if (!cleanupRegistered) {
    cleanupRegistered = true;
    deferCleanup(async () => {
      await Promise.all(
        [...runningWorkers].map(async (worker) => {
          const exited = new Promise((resolve) => worker.once('exit', resolve));
          worker.kill('SIGKILL');
          await exited;
        }),
      );
    });
  }
  return child;
}

type WorkerProcessOptions = {
  databaseUrl: string;
  taskQueue: string;
  apiBaseUrl: string;
  nodeOptions?: string;
  env?: Record<string, string>;
};

/**
 * A worker process started and loaded but not polling yet (a warm standby, as src/main.ts keeps one):
 * `run` makes it poll and resolves once it does. A test that kills a worker starts the next one this
 * way beforehand, so that a recovery does not wait for a process to start (most of a recovery on a
 * loaded machine: 12-14 s of 13-22 s at load 10).
 */
export async function startStandbyWorker(options: WorkerProcessOptions): Promise<{ run(): Promise<WorkerChild> }> {
  const standby = await startWorkerProcess({ ...options, env: { ...options.env, WORKER_STANDBY: '1' } }, 'standby');
  return {
    async run() {
      const ready = waitFor(standby, 'ready');
      standby.child.stdin?.write('run\n');
      await ready;
      return standby;
    },
  };
}

function waitFor(worker: WorkerChild, line: string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`worker process not ${line} after 60 s:\n${worker.output()}`)),
      60_000,
    );
    const look = (): void => {
      if (!worker.output().includes(`${line}\n`)) return;
      clearTimeout(timer);
      worker.child.stdout?.off('data', look);
      resolve();
    };
    worker.child.stdout?.on('data', look);
    look();
  });
}

/** Starts test/kit/workerProcess.ts and resolves once it polls its task queue (or says `until`). */
export async function startWorkerProcess(options: WorkerProcessOptions, until = 'ready'): Promise<WorkerChild> {
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  const child = spawnTrackedWorker({
    ...process.env,
    DATABASE_URL: options.databaseUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_NAMESPACE: temporalNamespace,
    TASK_QUEUE: options.taskQueue,
    // Thread marks of this test's workers only (src/temporal/scriptThreads.ts).
    SERVICE_THREAD_MARKS_DIR: join(tmpdir(), 'integration-service-threads-test', options.taskQueue),
    WORKFLOW_BUNDLE: workflowBundlePath,
    API_BASE_URL: options.apiBaseUrl,
    NODE_OPTIONS: options.nodeOptions ?? '',
    ...options.env,
  });
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker process not ${until} after 60 s:\n${output}`)), 60_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes(until)) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`worker process exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  }).catch((error: unknown) => {
    // Not ready: not left running either.
    child.kill('SIGKILL');
    throw error;
  });
  return { child, exited, output: () => output };
}

/**
 * Worker processes under a supervisor, as systemd or Kubernetes would run them: one at a time, a new
 * one started whenever the last died. `deaths` lists each death; `stop()` kills the current one.
 */
export function superviseWorkers(h: { dbUrl: string; taskQueue: string }, nodeOptions = '') {
  const deaths: { code: number | null; signal: string | null; ms: number }[] = [];
  let current: WorkerChild | undefined;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const started = Date.now();
      current = await startWorkerProcess({
        databaseUrl: h.dbUrl,
        taskQueue: h.taskQueue,
        apiBaseUrl: 'http://127.0.0.1:9',
        nodeOptions,
      });
      // Stopped while this one started: it is not left running.
      if (stopped) current.child.kill('SIGKILL');
      const exit = await current.exited;
      const notes = current
        .output()
        .split('\n')
        .filter((line) => line.includes('[worker]'));
      if (notes.length > 0) console.log(notes.join('\n'));
      if (!stopped) deaths.push({ ...exit, ms: Date.now() - started });
    }
  })();
  return {
    deaths,
    async stop() {
      stopped = true;
      current?.child.kill('SIGKILL');
      await loop.catch(() => undefined);
    },
  };
}
