/**
 * Hostile review of issue 32 (FAILING tests, demonstrate holes; no fix): runs that continue forever
 * without checkpoint_not_advancing. ExecutionChain compares an execution's last checkpoint with the one
 * it began with, and nothing else: a checkpoint that differs from its execution's start without the run
 * getting any further passes as progress, and nothing bounds the number of executions of a run.
 */
import { describe, expect, it } from 'vitest';
import { ExecutionChain, RUN_CONTINUES } from './runChain.js';
import type { ChainHandOff } from '../src/runtime/definitions.js';

/** Executions of one run, each as `script` runs it; the failure type that ended each. */
function chainOf(executions: number, script: (chain: ExecutionChain, index: number) => string | undefined) {
  const ids: string[] = [];
  let handOff: ChainHandOff | undefined;
  const ends: (string | undefined)[] = [];
  for (let index = 0; index < executions; index++) {
    const chain = new ExecutionChain({ executions: [...ids], canContinue: true, ...handOff });
    const end = script(chain, index);
    ends.push(end);
    if (end !== RUN_CONTINUES) break;
    handOff = chain.handOff();
    ids.push(`e${index}`);
  }
  return ends;
}

describe('a run whose checkpoint changes without the run getting further', () => {
  it('a script that saves checkpoints but never reads them (it starts from page 1 in every execution) is stopped', () => {
    // Each execution fetches pages 1.. again (the records are unchanged: nothing written) and saves
    // { page: n + 1 } after each; it is cut at SYNC_EXECUTION_TIME_LIMIT, after the save of whichever page
    // the API's speed got it to: 500, 490 or 480.
    const ends = chainOf(50, (chain, index) => {
      const wrote = index === 0; // only the first execution added records
      let end: string | undefined;
      const cut = 500 - (index % 3) * 10;
      for (let page = 1; page <= cut && !end; page++) {
        chain.saved({ page: page + 1 });
        end = chain.afterSave(page === cut, wrote)?.type;
      }
      return end;
    });
    expect(ends.at(-1)).toBe('checkpoint_not_advancing');
  });

  it('a checkpoint that carries the time of its save (the cursor never moves) is stopped', () => {
    const ends = chainOf(50, (chain, index) => {
      chain.read(index === 0 ? null : { cursor: 'c1', savedAt: `t${index - 1}` });
      chain.saved({ cursor: 'c1', savedAt: `t${index}` }); // new Date().toISOString() in the script
      return chain.afterSave(true, index === 0)?.type ?? chain.atLimit(index === 0, 'u').type;
    });
    expect(ends.at(-1)).toBe('checkpoint_not_advancing');
  });

  it('a cursor that cycles (A, B, A, B: an API that wraps around) is stopped', () => {
    const ends = chainOf(50, (chain, index) => {
      chain.saved({ cursor: index % 2 === 0 ? 'B' : 'A' });
      return chain.afterSave(true, index === 0)?.type ?? chain.atLimit(index === 0, 'u').type;
    });
    expect(ends.at(-1)).toBe('checkpoint_not_advancing');
  });
});
