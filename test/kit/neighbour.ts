/**
 * Another environment's trivial action, run over and over while one environment's heavy work runs on
 * the same worker: what one tenant sends through the worker's main thread must not stall the others
 * (docs/architecture.md "A request's answer is parsed on the run's thread", "What remains best-effort").
 */
import { expect } from 'vitest';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, type RuntimeHarness } from './runtime.js';
import { bundle } from './scripts.js';
import { startFakeUpstream } from './upstream.js';

export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/** What happened beside the heavy work: its end (`completed` or the failure's code) and the quiet action's times. */
export interface Beside<T> {
  outcome: T | undefined;
  code: string;
  ms: number;
  times: number[];
}

/**
 * Points the harness's connections at a fake API answering `bodies` (answeringUpstream), deploys the
 * quiet environment's echo action, warms it, and measures it idle (30 runs): `bound` is its idle p99
 * plus `marginMs`. `beside` starts the heavy work and runs the quiet action until the work ends (10
 * times at least).
 */
export async function quietNeighbour(h: RuntimeHarness, marginMs: number, bodies: Record<string, Buffer> = {}) {
  await answeringUpstream(h, bodies);
  const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
  const trivial = await h.scripts.put(bundle(`async function (svc, input) { return input; }`), 'quiet');
  const quiet = { ...actionDefinition('echo', trivial), environmentId: 'quiet' };
  const once = async (n: number): Promise<number> => {
    const started = performance.now();
    const outcome = await control.runAction({ definition: quiet, connectionId: 'c', input: { n } });
    expect(outcome).toEqual({ ok: true, output: { n } });
    return performance.now() - started;
  };
  for (let n = 0; n < 5; n++) await once(n);
  const idle: number[] = [];
  for (let n = 0; n < 30; n++) idle.push(await once(n));
  const beside = async <T>(work: () => Promise<T>): Promise<Beside<T>> => {
    const started = Date.now();
    let running = true;
    const run = work()
      .then(
        (outcome) => ({ outcome, code: 'completed' }),
        (error: unknown) => ({ outcome: undefined, code: (error as { code?: string }).code ?? String(error) }),
      )
      .finally(() => (running = false));
    const times: number[] = [];
    for (let n = 0; running || times.length < 10; n++) times.push(await once(n));
    return { ...(await run), ms: Date.now() - started, times };
  };
  const idleText = `quiet action idle p50/p99 ${percentile(idle, 50).toFixed(0)}/${percentile(idle, 99).toFixed(0)} ms`;
  const bound = percentile(idle, 99) + marginMs;
  /**
   * How long the quiet action may take beside `work`: its idle p99 plus the margin, or on a machine so
   * loaded that the heavy run itself took long, a quarter of that run's time. The quiet action waits a
   * few percent of a heavy run (32 MiB of `[{},…]`: 0.7-1.1 s of a 10-12 s run quiet, 2.2-2.5 s of
   * 31-34 s at load 9); when the run held the main thread, it waited nearly all of it (21.5 s at load
   * 5). Two CI runs measured 9.3 s and 6.9 s (the latter on a quiet machine beside a 10 s run): a quiet
   * workflow on the big run's lane waited for that thread's parse (fixed in src/temporal/lanes.ts;
   * docs/architecture.md "What remains best-effort"); such a stall fails.
   */
  const boundBeside = (work: Beside<unknown>): number => Math.max(bound, work.ms / 4);
  return { control, once, idle, idleText, bound, boundBeside, beside };
}

/** A fake API on loopback answering each path's prefix with its body as JSON, the harness's connections pointed at it. */
export async function answeringUpstream(h: RuntimeHarness, bodies: Record<string, Buffer>): Promise<void> {
  const api = await startFakeUpstream((request, response) => {
    const prefix = Object.keys(bodies).find((path) => request.url?.startsWith(path));
    if (prefix === undefined) return void response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(bodies[prefix]);
  });
  h.connections.setBaseUrl(api.url);
}

/**
 * Deploys the noisy environment's action, which fetches `input.path` and runs `answer` (script code with
 * `res` in scope; a caught error is its output); returns the runner of it beside the quiet action.
 */
export async function noisyFetch(
  h: RuntimeHarness,
  { control, beside }: Awaited<ReturnType<typeof quietNeighbour>>,
  answer: string,
): Promise<(path: string) => Promise<Beside<unknown>>> {
  const fetcher = await h.scripts.put(
    bundle(`async function (svc, input) {
      try {
        const res = await svc.get({ endpoint: input.path });
        ${answer}
      } catch (e) {
        return { error: String(e && e.message).slice(0, 300) };
      }
    }`),
    'noisy',
  );
  const noisy = { ...actionDefinition('fetch', fetcher), environmentId: 'noisy' };
  return (path) => beside(() => control.runAction({ definition: noisy, connectionId: 'c', input: { path } }));
}
