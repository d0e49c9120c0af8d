import { spawn, type ChildProcess } from 'node:child_process';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { stack } from '../helpers/stack.js';

const here = dirname(fileURLToPath(import.meta.url));
// node itself with tsx's loader, not the tsx CLI: the CLI runs the script in a child process of its
// own, so a SIGKILL sent to it would leave the real worker running as an orphan.
const TSX_LOADER = pathToFileURL(join(here, '..', '..', 'node_modules', 'tsx', 'dist', 'loader.mjs')).href;

export interface WorkerChild {
  child: ChildProcess;
  /** Resolves with the exit code (or signal) when the process ends. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  output: () => string;
}

/** Starts test/runtime/workerProcess.ts and resolves once it polls its task queue. */
export async function startWorkerProcess(options: {
  databaseUrl: string;
  taskQueue: string;
  apiBaseUrl: string;
  nodeOptions?: string;
  env?: Record<string, string>;
}): Promise<WorkerChild> {
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  const child = spawn(process.execPath, ['--import', TSX_LOADER, join(here, 'workerProcess.ts')], {
    env: {
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
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker process not ready after 60 s:\n${output}`)), 60_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('ready')) {
        clearTimeout(timer);
        resolve();
      }
    });
    child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`worker process exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  });
  return { child, exited, output: () => output };
}
