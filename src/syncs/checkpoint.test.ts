import { describe, expect, it } from 'vitest';
import { CHECKPOINT_MAX_BYTES, checkCheckpoint, checkpointKey } from './checkpoint.js';

describe('checkCheckpoint', () => {
  it('takes a flat object of strings, numbers and booleans', () => {
    expect(checkCheckpoint({ cursor: 'abc', page: 3, done: false })).toEqual({
      ok: true,
      checkpoint: { cursor: 'abc', page: 3, done: false },
    });
    expect(checkCheckpoint({})).toEqual({ ok: true, checkpoint: {} });
  });

  it('refuses anything else, saying what', () => {
    const problem = (value: unknown) => {
      const checked = checkCheckpoint(value);
      return checked.ok ? undefined : checked.problem;
    };
    expect(problem(null)).toMatch(/not null/);
    expect(problem('cursor')).toMatch(/not a string/);
    expect(problem([1])).toMatch(/not an array/);
    expect(problem({ nested: { a: 1 } })).toMatch(/"nested" is an object/);
    expect(problem({ list: [1] })).toMatch(/"list" is an array/);
    expect(problem({ gone: null })).toMatch(/"gone" is null/);
    expect(problem({ n: Number.NaN })).toMatch(/not a finite number/);
    expect(problem(Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, i])))).toMatch(/at most 16 keys/);
    expect(problem({ ['k'.repeat(256)]: 1 })).toMatch(/longer than 255/);
    expect(problem({ s: 'x'.repeat(4001) })).toMatch(/longer than 4000/);
    // An own key `__proto__` (as JSON.parse or a computed key makes it) was dropped without a word.
    expect(problem(JSON.parse('{"cursor":"c1","__proto__":"x"}'))).toMatch(/key "__proto__" is not allowed/);
    expect(problem({ ['__proto__']: 1 })).toMatch(/key "__proto__" is not allowed/);
  });

  it('bounds the whole in bytes of UTF-8, not characters', () => {
    // 16 strings of 4000 three-byte characters: each within its bound, 192 KB in all.
    const wide = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`k${i}`, '€'.repeat(4000)]));
    const checked = checkCheckpoint(wide);
    expect(checked.ok).toBe(false);
    expect(checked.ok ? '' : checked.problem).toContain(`at most ${CHECKPOINT_MAX_BYTES} bytes`);
    expect(checkCheckpoint({ a: '€'.repeat(4000) }).ok).toBe(true);
  });

  it('keys the same checkpoint the same whatever the order of its keys', () => {
    expect(checkpointKey({ a: 1, b: 'x' })).toBe(checkpointKey({ b: 'x', a: 1 }));
    expect(checkpointKey({ a: 1 })).not.toBe(checkpointKey({ a: '1' }));
    expect(checkpointKey(null)).toBeNull();
  });
});
