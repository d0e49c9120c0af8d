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
function chainOf(executions: number, script: (chain: ExecutionChain, index: number) => string | null | undefined) {
  const ids: string[] = [];
  let handOff: ChainHandOff | undefined;
  const ends: (string | null | undefined)[] = [];
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
      let end: string | null | undefined;
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

/**
 * An execution as workflows/svc.ts drives the chain: each page a batchSave (records saved) and a
 * saveCheckpoint call; at a limit (`cut` saves into the execution) the call is asked first and, when
 * the run continues, refused. `pages(start)` gives the checkpoints the script saves from its start.
 */
function runOf(
  executions: number,
  pages: (start: ChainHandOff['checkpoint'] | undefined, index: number) => Iterable<Record<string, string | number>>,
  cut: (index: number) => number,
  configure: (chain: ExecutionChain) => void = () => undefined,
) {
  return chainOf(executions, (chain, index) => {
    configure(chain);
    let saves = 0;
    for (const checkpoint of pages(chain.handOff().checkpoint, index)) {
      // batchSave of the page went first: records saved (unchanged ones count).
      if (saves >= cut(index) && chain.savedHere) {
        const end = chain.afterSave(true, true);
        if (end) return end.type;
      }
      chain.saved(checkpoint);
      saves++;
    }
    return 'finished';
  });
}

function* counting(from: number, to: number, make: (n: number) => Record<string, string | number>) {
  for (let n = from; n <= to; n++) yield make(n);
}
const pageOf = (key: string | null | undefined): number => (key ? (JSON.parse(key) as [string, number][])[0]![1] : 1);

describe('healthy resumable runs keep continuing (docs/scripts.md "Resumable syncs")', () => {
  it('a cursor, a page-number and a date-window backfill of 10,000 pages continue to their end', () => {
    const DAY = 86_400_000;
    const shapes: ((n: number) => Record<string, string | number>)[] = [
      (n) => ({ cursor: `opaque-${(n * 7919).toString(36)}` }),
      (n) => ({ page: n }),
      (n) => ({ until: new Date(Date.UTC(2000, 0, 1) + n * DAY).toISOString() }),
    ];
    for (const shape of shapes) {
      const ends = runOf(
        100,
        (start) => {
          const from = start ? (shapes.indexOf(shape) === 1 ? pageOf(start) : findIndex(shape, start)) : 1;
          return counting(from, 10_000, shape);
        },
        (index) => 300 + (index % 4) * 17,
      );
      expect(ends.at(-1)).toBe('finished');
      expect(ends.length).toBeGreaterThan(25);
    }
  });

  it('a second full pass over unchanged records (nothing added or updated) continues too', () => {
    const ends = runOf(
      100,
      (start) => counting(pageOf(start), 3_000, (n) => ({ page: n })),
      () => 400,
    );
    expect(ends.filter((end) => end === RUN_CONTINUES)).toHaveLength(7);
    expect(ends.at(-1)).toBe('finished');
  });

  it('stops at SYNC_RUN_MAX_EXECUTIONS with run_max_executions', () => {
    const ends = runOf(
      100,
      (start) => counting(pageOf(start), 10_000, (n) => ({ page: n })),
      () => 100,
      (chain) => {
        chain.maxExecutions = 3;
      },
    );
    expect(ends).toEqual([RUN_CONTINUES, RUN_CONTINUES, 'run_max_executions']);
  });
});

describe('loops that save records are stopped too', () => {
  it('a script that never reads its checkpoint, saving unchanged records, cut at pages that never repeat', () => {
    const ends = runOf(
      50,
      () => counting(1, 100_000, (n) => ({ page: n + 1 })),
      (index) => 500 + index * 3,
    );
    expect(ends).toEqual([RUN_CONTINUES, 'checkpoint_not_advancing']);
  });

  it('a cursor that cycles through three values, records saved each time', () => {
    const cycle = ['A', 'B', 'C'];
    const ends = runOf(
      50,
      (start) => {
        const at = start ? cycle.indexOf((JSON.parse(start) as [string, string][])[0]![1]) : 0;
        return [0, 1].map((i) => ({ cursor: cycle[(at + 1 + i) % 3]! }));
      },
      () => 1,
    );
    expect(ends.at(-1)).toBe('checkpoint_not_advancing');
    expect(ends.length).toBeLessThanOrEqual(4);
  });

  it('an execution of version 2 keeps the rules it was recorded with (a moved checkpoint is progress)', () => {
    const ends = chainOf(5, (chain, index) => {
      const old = new ExecutionChain({ ...chain.context, legacy: true });
      old.saved({ cursor: 'c1', savedAt: `t${index}` });
      return old.afterSave(true, index === 0)?.type;
    });
    expect(ends).toEqual(Array(5).fill(RUN_CONTINUES));
  });
});

function findIndex(shape: (n: number) => Record<string, string | number>, key: string): number {
  const value = (JSON.parse(key) as [string, string | number][])[0]![1];
  const [name] = Object.keys(shape(1));
  for (let n = 1; n <= 10_001; n++) if (shape(n)[name!] === value) return n;
  throw new Error(`no page has ${key}`);
}
