import { describe, expect, it } from 'vitest';
import { checkpointDigest, ExecutionChain, RUN_CONTINUES } from './runChain.js';

const first = () => new ExecutionChain({ executions: [], canContinue: true });

describe('ExecutionChain: whether a run at a limit continues or fails', () => {
  it('continues after a saveCheckpoint near a limit once the checkpoint moved, not before', () => {
    const chain = first();
    chain.read(null);
    expect(chain.afterSave(true, false)).toBeUndefined(); // nothing saved yet: nothing to continue from
    chain.saved({ cursor: '10' });
    expect(chain.afterSave(false, true)).toBeUndefined(); // not near a limit
    expect(chain.afterSave(true, true)?.type).toBe(RUN_CONTINUES);
    expect(chain.continuing).toBe(true);
    expect(chain.handOff()).toEqual({
      checkpoint: '[["cursor","10"]]',
      tracking: {},
      inherited: false,
      seen: [checkpointDigest('[["cursor","10"]]')],
    });
  });

  it('at the history budget: run_history_limit without a checkpoint, checkpoint_not_advancing when it did not move', () => {
    const none = first();
    expect(none.atLimit(true, 'u').type).toBe('run_history_limit');
    const cleared = first();
    cleared.saved({ cursor: '1' });
    cleared.saved(null);
    expect(cleared.atLimit(true, 'u').type).toBe('run_history_limit');

    const next = new ExecutionChain({ executions: ['e1'], canContinue: true, checkpoint: '[["cursor","10"]]' });
    next.saved({ cursor: '10' });
    expect(next.atLimit(false, 'u').type).toBe('checkpoint_not_advancing');
    // The same checkpoint with records saved is no progress either: the next execution would begin
    // where this one did (version 2 took it for progress, and stopped the loop one execution later).
    expect(next.atLimit(true, 'u').type).toBe('checkpoint_not_advancing');
    const moved = new ExecutionChain({ executions: ['e1'], canContinue: true, checkpoint: '[["cursor","10"]]' });
    moved.saved({ cursor: '20' });
    // A moved checkpoint without any record saved in the execution is no progress (its save time in it).
    expect(moved.atLimit(false, 'u').type).toBe('checkpoint_not_advancing');
    expect(moved.atLimit(true, 'u').type).toBe(RUN_CONTINUES);
  });

  it('a run that cannot continue (its own workflow) fails at the budget whatever it saved', () => {
    const chain = new ExecutionChain({ executions: [], canContinue: false });
    chain.saved({ cursor: '1' });
    expect(chain.afterSave(true, true)).toBeUndefined();
    // (workflows/svc.ts fails such a run with its own message, as before issue 32.)
    expect(chain.atLimit(true, 'u').type).toBe('run_history_limit');
  });

  it('a first read that finds a checkpoint marks the run as resuming an earlier one (no track_deletes inference)', () => {
    const chain = first();
    chain.read({ cursor: '5' });
    expect(chain.sawEverything).toBe(false);
    const fresh = first();
    fresh.read(null);
    fresh.saved({ cursor: '5' });
    fresh.read({ cursor: '5' });
    expect(fresh.sawEverything).toBe(true);
  });

  it('trackDeletesStart in an earlier execution counts the saves of every execution since', () => {
    const one = first();
    one.trackStart('Issue');
    const handOff = one.handOff();
    const two = new ExecutionChain({ executions: ['e1'], canContinue: true, ...handOff });
    two.trackStart('Issue'); // started again after the continuation: the earlier start stands
    const three = new ExecutionChain({ executions: ['e1', 'e2'], canContinue: true, ...two.handOff() });
    expect(three.trackEnd('Issue')).toEqual(['e1', 'e2']);
    expect(three.trackEnd('Issue')).toBeUndefined();
    expect(first().trackEnd('Issue')).toBeUndefined();
  });
});
