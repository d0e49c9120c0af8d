/**
 * What the lanes answer for an interrupted replay (src/temporal/lanes.ts `replayInterruption`): a
 * failed completion that no longer reads as an isolate timeout, so the run watch does not take a
 * replay on a busy thread for a runaway script (src/temporal/runaway.ts).
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import {
  interruptedByIsolateTimeout,
  osThreads,
  procFiles,
  threadCpuMs,
  threadWaitMs,
  withReplayFailure,
} from './workerSide.js';

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

describe('procFiles', () => {
  it('reads a thread file afresh through its kept descriptor, as readFileSync does', () => {
    const [id] = osThreads();
    const files = procFiles();
    try {
      const stat = `/proc/self/task/${id}/stat`;
      expect(files.read(stat).split(' ')[0]).toBe(readFileSync(stat, 'latin1').split(' ')[0]);
      const before = threadWaitMs([id!], files.read);
      expect(before).toBeTypeOf('number');
      // Compute until the CPU time read through the kept descriptor grows (the kernel's 10 ms ticks).
      const cpu = threadCpuMs([id!], files.read)!;
      let now = cpu;
      for (const end = Date.now() + 10_000; now === cpu && Date.now() < end;) now = threadCpuMs([id!], files.read)!;
      expect(now).toBeGreaterThan(cpu);
      expect(() => files.read('/proc/self/task/0/stat')).toThrow();
    } finally {
      files.close();
    }
  });
});
