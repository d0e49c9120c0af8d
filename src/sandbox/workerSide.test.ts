/**
 * What the lanes answer for an interrupted replay (src/temporal/lanes.ts `replayInterruption`): a
 * failed completion that no longer reads as an isolate timeout, so the run watch does not take a
 * replay on a busy thread for a runaway script (src/temporal/runaway.ts).
 */
import { describe, expect, it } from 'vitest';
import { interruptedByIsolateTimeout, withReplayFailure } from './workerSide.js';

describe('withReplayFailure', () => {
  const interrupted = {
    runId: 'r1',
    failed: {
      failure: {
        message: 'Encoded failure',
        encodedAttributes: {
          data: Buffer.from(JSON.stringify({ message: 'Script execution timed out after 3000ms' })),
        },
      },
    },
  };

  it('replaces the failure of an interrupted completion, keeping the rest', () => {
    expect(interruptedByIsolateTimeout(interrupted)).toBe(true);
    const replaced = withReplayFailure(interrupted, 'the replay was interrupted') as typeof interrupted;
    expect(interruptedByIsolateTimeout(replaced)).toBe(false);
    expect(replaced.runId).toBe('r1');
    expect(replaced.failed.failure).toEqual({ message: 'the replay was interrupted', source: 'TypeScriptSDK' });
  });

  it('leaves a successful completion as it is', () => {
    const successful = { runId: 'r1', successful: { commands: [] } };
    expect(withReplayFailure(successful, 'x')).toBe(successful);
  });
});
