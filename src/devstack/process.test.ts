import { describe, expect, it } from 'vitest';
import { waitUntil } from './process.js';

describe('waitUntil', () => {
  it('ends at once when gaveUp gives a reason (a server that exited), not at its timeout', async () => {
    const started = Date.now();
    const result = await waitUntil(() => Promise.resolve(false), {
      timeoutMs: 30_000,
      gaveUp: () => new Error('the server exited'),
    });
    expect(result).toEqual({ ok: false, lastError: new Error('the server exited') });
    expect(Date.now() - started).toBeLessThan(5_000);
  });
});
