/**
 * When this process did not run at all: stopped (SIGSTOP, a debugger), its VM paused, or its machine
 * suspended. The main thread ticks every TICK_MS; a tick that comes much later than due means the
 * main thread stood still in between: the whole process stopped, or the main thread alone was busy (an
 * activity parsing a huge JSON body). A busy workflow thread does not delay it (an OS thread of its
 * own), so the lanes also ask the workflow thread's CPU time before they excuse anything.
 *
 * The lanes ask it about an activation the isolate timeout interrupted (src/temporal/lanes.ts): the
 * timeout is wall time, so a process stopped for 6 s in the middle of a healthy activation finds it
 * "timed out" when it continues, and a run that computed for milliseconds was convicted
 * `script_timeout` (test/runtime/stalledHealthyRun.test.ts, once in the clean-clone CI at stall 8 of
 * 14). Such an interruption is retried instead; a statement that really runs past the timeout is
 * interrupted again on the retry, with no stall, and convicted then.
 */

const TICK_MS = 100;
/** A tick this much later than due is a stall (a loaded machine delays ticks by tens of ms). */
const STALL_MS = 250;
/** Stalls are remembered this long: an activation lasts seconds. */
const KEEP_MS = 60_000;

export interface ProcessStalls {
  /** How long, in ms, the process stood still within [from, to] (performance.now() times). */
  stalledDuring(from: number, to: number): number;
  stop(): void;
}

export function watchProcessStalls(now: () => number = () => performance.now()): ProcessStalls {
  const stalls: { from: number; to: number }[] = [];
  let last = now();
  const timer = setInterval(() => {
    const at = now();
    if (at - last - TICK_MS > STALL_MS) stalls.push({ from: last, to: at });
    while (stalls.length > 0 && stalls[0]!.to < at - KEEP_MS) stalls.shift();
    last = at;
  }, TICK_MS);
  timer.unref();
  const overlap = (a: number, b: number, from: number, to: number) => Math.max(0, Math.min(b, to) - Math.max(a, from));
  return {
    stalledDuring(from, to) {
      // A stall may not be recorded yet: the stopped process's first tick can run after the
      // completion that asks (both were due when it continued).
      const at = now();
      const ongoing = at - last - TICK_MS > STALL_MS ? overlap(last, at, from, to) : 0;
      return stalls.reduce((longest, stall) => Math.max(longest, overlap(stall.from, stall.to, from, to)), ongoing);
    },
    stop: () => clearInterval(timer),
  };
}
