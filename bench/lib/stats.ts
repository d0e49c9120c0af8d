/**
 * Shared benchmark helpers: timing, percentiles, and printing figures and ratios against goals.
 * Generic on purpose: nothing here knows what is being measured.
 */

/** Milliseconds since an arbitrary origin, with sub-millisecond resolution. */
export const nowMs = (): number => Number(process.hrtime.bigint()) / 1e6;

/** Runs `work` and returns its result with the elapsed milliseconds. */
export async function timed<T>(work: () => Promise<T>): Promise<{ result: T; ms: number }> {
  const started = nowMs();
  const result = await work();
  return { result, ms: nowMs() - started };
}

/** Accumulates the time of many separate pieces of work (the parts of a run that count). */
export class Stopwatch {
  totalMs = 0;
  count = 0;
  async measure<T>(work: () => Promise<T>): Promise<T> {
    const { result, ms } = await timed(work);
    this.totalMs += ms;
    this.count++;
    return result;
  }
}

export interface Summary {
  count: number;
  mean: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentile of an ascending array (p from 0 to 100). */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? Number.NaN;
}

export function summarize(samples: readonly number[]): Summary {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((total, value) => total + value, 0);
  return {
    count: sorted.length,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    max: sorted[sorted.length - 1] ?? Number.NaN,
  };
}

export const formatMs = (ms: number): string => (ms >= 1000 ? `${(ms / 1000).toFixed(2)} s` : `${ms.toFixed(2)} ms`);

export const formatCount = (n: number): string => Math.round(n).toLocaleString('en-US');

export function formatSummary(summary: Summary): string {
  return `mean ${formatMs(summary.mean)}, p50 ${formatMs(summary.p50)}, p90 ${formatMs(summary.p90)}, p99 ${formatMs(summary.p99)}, max ${formatMs(summary.max)} (n=${summary.count})`;
}

/** A line to print: label, then a value. */
export function line(label: string, value: string): string {
  return `  ${label.padEnd(44)} ${value}`;
}

export interface GoalCheck {
  label: string;
  value: number;
  goal: number;
  /** 'min': value must be at least goal; 'max': at most. */
  kind: 'min' | 'max';
  unit?: string;
}

export const goalMet = (check: GoalCheck): boolean =>
  check.kind === 'min' ? check.value >= check.goal : check.value <= check.goal;

/** "label  0.63  (goal ≥ 0.5: met)" */
export function formatGoal(check: GoalCheck): string {
  const unit = check.unit ?? '';
  const digits = check.value < 10 ? 2 : 1;
  return line(
    check.label,
    `${check.value.toFixed(digits)}${unit}  (goal ${check.kind === 'min' ? '≥' : '≤'} ${check.goal}${unit}: ${goalMet(check) ? 'met' : 'MISSED'})`,
  );
}

/** A small deterministic PRNG (mulberry32), so generated data is the same on every run. */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}
