/**
 * Where a worker process's CPU goes, from the V8 CPU profiles its threads wrote (`node --cpu-prof`:
 * bench/capacity.ts with BENCH_WORKER_CPU_PROF=<dir>).
 * `npx tsx bench/lib/cpuProfileSummary.ts <dir> [<startUs> <endUs>] [--runs N] [--top K]`
 *
 * Only the samples inside the window (the monotonic µs bench/capacity.ts prints) count; `--runs` turns
 * milliseconds into milliseconds per run. Each sample goes to the first category (CATEGORIES, in order)
 * one of whose patterns matches a frame of its stack (function name or URL), else to `other`; then the
 * functions with the most self time.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

/**
 * Category, and the frame patterns (function name or URL) that put a sample in it. The stack is read
 * from the sampled frame outwards; the first frame that matches a pattern decides (patterns in order).
 */
export const CATEGORIES: [string, RegExp][] = [
  ['idle', /^\(idle\)$/],
  ['gc', /^\(garbage collector\)$/],
  ['(program): native, outside JS', /^\(program\)$/],
  ['vm entry: runInContext (a watchdog thread per call with a timeout)', /^runInContext$/],
  ['script realm: new context', /^(newScriptContext|createContext|makeContext)$/],
  ['script realm: bootstrap and svc glue', /^script-realm-setup$/],
  ['script realm: script code', /^[^/:]+\.js$/],
  ['payload codec / encryption', /payloadStorage|codec-helpers|workflow-codec-runner|encryption\.ts/],
  ['pg client', /node_modules\/pg(-[a-z]+)?\//],
  ['outbound HTTP (axios, policy)', /node_modules\/axios|src\/runtime\/(http|outbound)\.ts/],
  ['logging', /logger|src\/log\.ts|logStore/],
  ['workflow code (bundle)', /workflow-bundle|evalmachine/],
  ['Temporal SDK: workflow thread, vm calls', /@temporalio\/worker\/lib\/workflow\//],
  ['service code: activities, lanes, runtime', /\/activities\/|\/src\//],
  ['Temporal SDK: worker main thread (rxjs, bridge)', /@temporalio\/|node_modules\/rxjs/],
  ['node internals (streams, async hooks, ports)', /^node:/],
];

const FALLBACK = 'node internals (streams, async hooks, ports)';

function frameText(frame: CallFrame): string[] {
  return [frame.functionName, frame.url];
}

export function summarize(
  dir: string,
  window?: { startUs: number; endUs: number },
): { byCategory: Map<string, number>; byFunction: Map<string, number>; byThread: Map<string, number> } {
  const byCategory = new Map<string, number>();
  const byFunction = new Map<string, number>();
  const byThread = new Map<string, number>();
  for (const file of readdirSync(dir).filter((name) => name.endsWith('.cpuprofile'))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Profile;
    const parent = new Map<number, number>();
    const byId = new Map<number, ProfileNode>();
    for (const node of profile.nodes) {
      byId.set(node.id, node);
      for (const child of node.children ?? []) parent.set(child, node.id);
    }
    const categoryOf = new Map<number, string>();
    const classify = (id: number): string => {
      const known = categoryOf.get(id);
      if (known) return known;
      let found = 'other';
      // node: internals count only when no frame of the stack is anything else's (streams under pg are pg's).
      outer: for (const fallback of [false, true])
        for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
          const texts = frameText(byId.get(at)!.callFrame);
          for (const [name, pattern] of CATEGORIES) {
            if ((name === FALLBACK) !== fallback) continue;
            if (texts.some((text) => pattern.test(text))) {
              found = name;
              break outer;
            }
          }
        }
      categoryOf.set(id, found);
      return found;
    };
    // Thread: the main thread's profile holds the worker's entry (src/main.ts); the others are worker_threads.
    const thread = /^CPU\.\d+\.\d+\.(\d+)\.(\d+)\./.exec(file);
    const threadName = `pid ${thread?.[1] ?? '?'} ${thread?.[2] === '0' ? 'main thread' : `worker_thread ${thread?.[2] ?? '?'}`}`;
    let t = profile.startTime;
    for (let i = 0; i < profile.samples.length; i += 1) {
      t += profile.timeDeltas[i] ?? 0;
      const next = profile.timeDeltas[i + 1] ?? 0;
      if (window && (t < window.startUs || t >= window.endUs)) continue;
      const id = profile.samples[i]!;
      const category = `${thread?.[2] === '0' ? 'main' : 'workflow threads'}: ${classify(id)}`;
      const us = Math.max(0, next);
      byCategory.set(category, (byCategory.get(category) ?? 0) + us);
      if (!category.endsWith(': idle')) byThread.set(threadName, (byThread.get(threadName) ?? 0) + us);
      const frame = byId.get(id)!.callFrame;
      const key = `${frame.functionName || '(anonymous)'} ${frame.url.replace(/^.*node_modules\//, '~/')}:${frame.lineNumber}`;
      if (!category.endsWith(': idle')) byFunction.set(key, (byFunction.get(key) ?? 0) + us);
    }
  }
  return { byCategory, byFunction, byThread };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const args = process.argv.slice(2);
  const option = (name: string): string | undefined => {
    const at = args.indexOf(`--${name}`);
    if (at < 0) return undefined;
    const [, value] = args.splice(at, 2);
    return value;
  };
  const runs = Number(option('runs') ?? '1');
  const top = Number(option('top') ?? '40');
  const [dir, start, end] = args;
  if (!dir) throw new Error('usage: cpuProfileSummary.ts <dir> [<startUs> <endUs>] [--runs N] [--top K]');
  const window = start && end ? { startUs: Number(start), endUs: Number(end) } : undefined;
  const { byCategory, byFunction, byThread } = summarize(dir, window);
  const ms = (us: number): string => ((us / 1000 / runs).toFixed(2) + ' ms').padStart(12);
  const busy = [...byCategory].filter(([name]) => !name.endsWith(': idle')).reduce((sum, [, us]) => sum + us, 0);
  console.log(`busy (all threads, no idle): ${ms(busy)} per run over ${runs} runs`);
  for (const [name, us] of [...byCategory].sort((a, b) => b[1] - a[1])) console.log(`${ms(us)}  ${name}`);
  console.log('\nby thread:');
  for (const [name, us] of [...byThread].sort((a, b) => b[1] - a[1])) console.log(`${ms(us)}  ${name}`);
  console.log(`\ntop ${top} functions by self time:`);
  for (const [name, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${ms(us)}  ${name}`);
}
