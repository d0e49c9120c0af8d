import { describe, expect, it } from 'vitest';
import { MAX_INPUT_DEPTH, nestedDeeperThan } from './postActionTrigger.js';

/** `levels` lists (or objects) inside each other, a string at the bottom. */
function nested(levels: number, as: 'list' | 'object'): unknown {
  let value: unknown = 'leaf';
  for (let i = 0; i < levels; i++) value = as === 'list' ? [value] : { x: value };
  return value;
}

describe('nestedDeeperThan (the depth limit of an action input)', () => {
  it('counts objects and lists, not scalars, and stops at the limit', () => {
    for (const as of ['list', 'object'] as const) {
      expect(nestedDeeperThan(nested(MAX_INPUT_DEPTH, as), MAX_INPUT_DEPTH)).toBe(false);
      expect(nestedDeeperThan(nested(MAX_INPUT_DEPTH + 1, as), MAX_INPUT_DEPTH)).toBe(true);
    }
    expect(nestedDeeperThan('text', 0)).toBe(false);
    expect(nestedDeeperThan(undefined, 1)).toBe(false);
    expect(nestedDeeperThan({ a: [1, { b: null }], c: 'x' }, 3)).toBe(false);
    expect(nestedDeeperThan({ a: [1, { b: {} }], c: 'x' }, 3)).toBe(true);
  });

  it('reads a value far too deep to recurse into', () => {
    expect(nestedDeeperThan(nested(1_000_000, 'list'), MAX_INPUT_DEPTH)).toBe(true);
  });
});
