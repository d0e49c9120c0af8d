import { describe, expect, it } from 'vitest';
import { watchProcessStalls } from './processStalls.js';

/** Blocks this thread (and so its event loop) for `ms`, as a stopped process would stand still. */
function standStill(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until);
}

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('process stalls', () => {
  it('sees a stretch in which the main thread did not run, only inside the window asked about', async () => {
    const stalls = watchProcessStalls();
    try {
      await tick(300);
      const before = performance.now();
      expect(stalls.stalledDuring(0, before)).toBe(0);
      standStill(1200);
      // Asked before the late tick ran: the ongoing stall counts.
      expect(stalls.stalledDuring(before, performance.now())).toBeGreaterThan(900);
      await tick(250);
      const after = performance.now();
      // Recorded by the late tick: the same answer, and nothing outside the stall.
      expect(stalls.stalledDuring(before, after)).toBeGreaterThan(900);
      expect(stalls.stalledDuring(after, after + 1000)).toBe(0);
      expect(stalls.stalledDuring(0, before - 200)).toBe(0);
    } finally {
      stalls.stop();
    }
  });

  it('does not take ticks that run on time for a stall', async () => {
    const stalls = watchProcessStalls();
    try {
      const from = performance.now();
      await tick(1000);
      expect(stalls.stalledDuring(from, performance.now())).toBe(0);
    } finally {
      stalls.stop();
    }
  });
});
