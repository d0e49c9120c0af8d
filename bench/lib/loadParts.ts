/**
 * Parts shared by the load benchmarks (bench/load.ts, bench/capacity.ts):
 * a process's CPU seconds and RSS from /proc (Linux only).
 */
import { readFileSync } from 'node:fs';

/** CPU seconds (user + system) and RSS of a process, from /proc; undefined once it has gone. */
export function processSample(pid: number): { cpuS: number; rssMb: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    const rss = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return { cpuS: ticks / 100, rssMb: Number(rss?.[1] ?? 0) / 1024 };
  } catch {
    return undefined;
  }
}
