import { spawn, type SpawnOptions } from 'node:child_process';
import { createServer } from 'node:net';

/** An error of the dev stack: says what was tried and what the user can set or install instead. */
export class DevStackError extends Error {
  override readonly name = 'DevStackError';
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Whether `port` is free on loopback now. */
export async function isFree(port: number): Promise<boolean> {
  return freePort(port).then(
    () => true,
    () => false,
  );
}

/** Asks the kernel for a free loopback TCP port (or checks that `port` is free). */
export async function freePort(port = 0): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      if (address === null || typeof address === 'string') {
        server.close();
        reject(new Error('could not read the port of a probe socket'));
        return;
      }
      server.close(() => resolve(address.port));
    });
  });
}

/**
 * `count` distinct free loopback ports, none of them in `taken`: the kernel may hand the same free
 * port to two probes in a row (a dev server given one port twice fails to start).
 */
export async function freePorts(count: number, taken: readonly number[] = []): Promise<number[]> {
  const ports = new Set<number>();
  for (let attempt = 0; ports.size < count; attempt++) {
    if (attempt > count * 20) throw new Error(`could not find ${count} distinct free ports on 127.0.0.1`);
    const port = await freePort();
    if (!taken.includes(port)) ports.add(port);
  }
  return [...ports];
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion and collects its output; never throws for a non-zero exit. */
export async function run(command: string, args: readonly string[], options: SpawnOptions = {}): Promise<RunResult> {
  return new Promise((resolve) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.on('error', (error) => resolve({ code: -1, stdout, stderr: stderr + String(error.message) }));
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

export async function sleep(ms: number): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `probe` until it resolves true or `timeoutMs` passes; returns the last error seen on failure.
 * `gaveUp` ends the wait at once when it gives a reason (a server that exited will not answer).
 */
export async function waitUntil(
  probe: () => Promise<boolean>,
  { timeoutMs, intervalMs = 100, gaveUp }: { timeoutMs: number; intervalMs?: number; gaveUp?: () => Error | undefined },
): Promise<{ ok: true } | { ok: false; lastError: unknown }> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown = undefined;
  while (Date.now() < deadline) {
    const reason = gaveUp?.();
    if (reason) return { ok: false, lastError: reason };
    try {
      if (await probe()) return { ok: true };
    } catch (error) {
      lastError = error;
    }
    await sleep(intervalMs);
  }
  return { ok: false, lastError };
}

export function log(message: string): void {
  if (process.env['SERVICE_DEVSTACK_QUIET'] === '1') return;
  process.stderr.write(`[devstack] ${message}\n`);
}
