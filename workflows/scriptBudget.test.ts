/**
 * Loop protection looks at the clock often enough, and not too often (a hostile review of 97c2658 found
 * loops of slow turns, ~3-6 ms each, stopped live but past the isolate timeout (3 s) on replay, and turns
 * of 6.5 ms past it live: with a fixed stride of 256 calls between looks, the first look came after up to
 * 1.7 s and counted as waiting).
 */
import { describe, expect, it, vi } from 'vitest';
import type * as TemporalWorkflow from '@temporalio/workflow';

const state = vi.hoisted(() => ({ clock: 0, replaying: false, looks: 0 }));
vi.mock('@temporalio/workflow', async (original) => ({
  ...(await original<typeof TemporalWorkflow>()),
  workflowInfo: () => ({ workflowId: 'sync:e:i:c:s', runId: 'r', unsafe: { isReplaying: state.replaying } }),
}));
vi.mock('../src/sandbox/hostRealm.js', () => ({
  hostRealm: () => ({
    now: () => {
      state.looks++;
      return state.clock;
    },
    mark: () => undefined,
  }),
}));

const { createScriptBudget } = await import('./scriptBudget.js');

/** Runs `for (;;) { nativeCall() }` with each turn costing `turnMs`; answers when the budget stopped it. */
function stoppedAt(turnMs: number, replaying: boolean): number {
  state.clock = 0;
  state.replaying = replaying;
  const budget = createScriptBudget('spin');
  budget.resumed();
  for (;;) {
    try {
      budget.tick();
    } catch {
      return state.clock;
    }
    state.clock += turnMs;
    if (state.clock > 60_000) return Infinity;
  }
}

const ISOLATE_TIMEOUT_MS = 3000;

describe('loop protection: loops of slow turns', () => {
  // Longer turns (a native call of 100 ms or more) are the isolate timeout's (docs/architecture.md).
  for (const turnMs of [0.001, 1, 3, 4.3, 5.5, 6.5, 20, 50]) {
    it(`a loop of ${turnMs} ms turns is stopped at about 1 s live and 2 s replayed, under the isolate timeout`, () => {
      const live = stoppedAt(turnMs, false);
      const replay = stoppedAt(turnMs, true);
      console.log(`[loop protection] turn ${turnMs} ms: stopped live at ${live} ms, on replay at ${replay} ms`);
      expect(live).toBeGreaterThanOrEqual(1000);
      expect(live).toBeLessThanOrEqual(1000 + Math.max(3 * turnMs, 50));
      expect(replay).toBeLessThan(ISOLATE_TIMEOUT_MS);
    });
  }

  it('a tight loop looks at the clock about once per 256 turns', () => {
    state.looks = 0;
    const live = stoppedAt(0.0005, false);
    const turns = live / 0.0005;
    expect(state.looks).toBeLessThan(turns / 256 + 20);
  });
});
