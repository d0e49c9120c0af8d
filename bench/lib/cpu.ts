/**
 * CPU time (user + system) of this process by thread kind and of its child processes by name, read
 * from /proc (Linux only). On a shared, loaded machine wall-clock throughput varies by tens of per
 * cent from one run to the next; the CPU a piece of work takes varies much less, so a difference in
 * CPU per unit of work is the steadier measure of a change.
 */
import { readdirSync, readFileSync } from 'node:fs';

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** utime + stime in ms, and the command name, from a /proc stat file; undefined if it vanished. */
function readStat(path: string): { comm: string; ppid: number; ms: number } | undefined {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const comm = text.slice(open + 1, close);
  const fields = text
    .slice(close + 2)
    .split(' ')
    .map((field) => Number(field));
  // After the comm: state(0) ppid(1) … utime(11) stime(12)
  return { comm, ppid: fields[1]!, ms: (fields[11]! + fields[12]!) * TICK_MS };
}

/** CPU ms by what it is; keys of `cpuSnapshot` carry the process id after a tab (see cpuDelta). */
export type CpuSnapshot = Map<string, number>;

/** What a thread of this process is, by its name (the workflow threads run `workflow-worker-thread`). */
function threadKind(comm: string, tid: number, workflowThreadIds: ReadonlySet<number>): string {
  if (tid === process.pid) return 'worker process: main thread';
  if (workflowThreadIds.has(tid)) return 'worker process: workflow threads';
  if (/tokio|temporal|core/i.test(comm)) return 'worker process: Core (tokio)';
  // Node names all its threads "node": V8's GC and compiler helpers, libuv's pool, idle workflow threads.
  if (comm === 'node') return 'worker process: other node threads (V8 helpers, libuv pool)';
  return `worker process: Core (${comm})`;
}

/** The process that a process's parent is (for a daemon, e.g. the postmaster of a Postgres backend). */
export function parentOf(pid: number): number | undefined {
  return readStat(`/proc/${pid}/stat`)?.ppid;
}

/**
 * CPU ms so far: the whole process (threads that ended included), its live threads by kind, each
 * child process tree (the Temporal dev server) by the child's name, and each of `roots` (a daemon
 * such as the postmaster, which is not a child) with its children.
 */
export function cpuSnapshot(
  workflowThreadIds: ReadonlySet<number> = new Set(),
  roots: Record<string, number> = {},
): CpuSnapshot {
  const snapshot: CpuSnapshot = new Map();
  const add = (key: string, ms: number) => snapshot.set(key, (snapshot.get(key) ?? 0) + ms);
  add('worker process (all threads)', readStat('/proc/self/stat')?.ms ?? 0);
  for (const tid of readdirSync('/proc/self/task')) {
    const stat = readStat(`/proc/self/task/${tid}/stat`);
    if (stat) add(threadKind(stat.comm, Number(tid), workflowThreadIds), stat.ms);
  }
  const processes = new Map<number, { comm: string; ppid: number; ms: number }>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = readStat(`/proc/${entry}/stat`);
    if (stat) processes.set(Number(entry), stat);
  }
  // Each process whose ancestry reaches a direct child of this one counts for that child's name.
  const childOf = (pid: number): number | undefined => {
    for (let current = pid, hops = 0; hops < 64; hops++) {
      const parent = processes.get(current)?.ppid;
      if (parent === undefined || parent <= 1) return undefined;
      if (parent === process.pid) return current;
      current = parent;
    }
    return undefined;
  };
  for (const [name, root] of Object.entries(roots)) {
    for (const [pid, stat] of processes) if (pid === root || stat.ppid === root) add(`${name}\t${pid}`, stat.ms);
  }
  for (const [pid, stat] of processes) {
    if (pid === process.pid) continue;
    const child = childOf(pid);
    if (child !== undefined) add(`child: ${processes.get(child)?.comm ?? '?'}\t${pid}`, stat.ms);
  }
  return snapshot;
}

/**
 * after − before, per key without the process id: a process that started in between counts whole,
 * one that ended in between (a closed Postgres connection) is lost rather than counted negative.
 */
export function cpuDelta(before: CpuSnapshot, after: CpuSnapshot): CpuSnapshot {
  const delta: CpuSnapshot = new Map();
  for (const [key, ms] of after) {
    const name = key.split('\t')[0]!;
    delta.set(name, (delta.get(name) ?? 0) + ms - (before.get(key) ?? 0));
  }
  return delta;
}
