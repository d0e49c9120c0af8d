import { describe, expect, it } from 'vitest';
import { ServiceError } from '../errors.js';
import { canonicalRecordJson, contentHash, copyText, decodeCursor, encodeCursor, recordKey } from './encoding.js';

const where = { index: 3, model: 'Issue' };

function errorOf(fn: () => unknown): ServiceError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ServiceError) return error as ServiceError;
    throw error;
  }
  throw new Error('expected a ServiceError');
}

describe('recordKey', () => {
  it('keeps strings and turns finite numbers into their string form', () => {
    expect(recordKey('abc', where)).toBe('abc');
    expect(recordKey(1, where)).toBe('1');
    expect(recordKey(1, where)).toBe(recordKey('1', where));
    expect(recordKey(-0, where)).toBe('0');
    expect(recordKey(2.5, where)).toBe('2.5');
  });

  it.each([
    [null, 'an id of type null'],
    [undefined, 'no id'],
    [{ a: 1 }, 'an id of type object'],
    [[1], 'an id of type array'],
    [true, 'an id of type boolean'],
    [Number.NaN, 'non-finite number NaN'],
    ['', 'empty string'],
    ['x'.repeat(1025), '1025 characters'],
    ['a\u0000b', 'U+0000'],
  ])('rejects %j, naming the position and the model', (id, reason) => {
    const error = errorOf(() => recordKey(id, where));
    expect(error.code).toBe('invalid_record_id');
    expect(error.status).toBe(400);
    expect(error.message).toContain('record at index 3 of model "Issue"');
    expect(error.message).toContain(reason);
  });
});

describe('canonicalRecordJson', () => {
  it('sorts keys at every depth so equal content gives equal text and hash', () => {
    const a = canonicalRecordJson({ id: 1, b: { y: 1, x: [{ q: 1, p: 2 }] }, a: 'z' }, where);
    const b = canonicalRecordJson({ a: 'z', b: { x: [{ p: 2, q: 1 }], y: 1 }, id: 1 }, where);
    expect(a).toBe(b);
    expect(a).toBe('{"a":"z","b":{"x":[{"p":2,"q":1}],"y":1},"id":1}');
    expect(contentHash(a)).toBe(contentHash(b));
    expect(contentHash(a)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  });

  it('follows JSON.stringify for dates, undefined, functions and non-finite numbers, and drops _service_metadata', () => {
    const json = canonicalRecordJson(
      {
        id: 'a',
        at: new Date('2026-01-02T03:04:05.000Z'),
        gone: undefined,
        fn: () => 1,
        inf: Number.POSITIVE_INFINITY,
        list: [undefined, 1],
        _service_metadata: { cursor: 'x' },
        nested: { _service_metadata: 1 },
      },
      where,
    );
    expect(JSON.parse(json)).toEqual({
      id: 'a',
      at: '2026-01-02T03:04:05.000Z',
      inf: null,
      list: [null, 1],
      nested: { _service_metadata: 1 },
    });
  });

  it.each([
    [null, 'is null, not an object'],
    [[{ id: 1 }], 'is an array'],
    ['text', 'is string'],
    [{ id: 1, n: 10n }, 'bigint'],
  ])('rejects %s with invalid_record naming the position and the model', (record, reason) => {
    const error = errorOf(() => canonicalRecordJson(record, where));
    expect(error.code).toBe('invalid_record');
    expect(error.message).toContain('record at index 3 of model "Issue"');
    expect(error.message).toContain(reason);
  });

  it('rejects a cycle and keeps U+0000 inside strings', () => {
    const cyclic: Record<string, unknown> = { id: 1 };
    cyclic['self'] = cyclic;
    expect(errorOf(() => canonicalRecordJson(cyclic, where)).message).toContain('cycle');
    expect(JSON.parse(canonicalRecordJson({ id: 1, s: 'a\u0000b' }, where))).toEqual({ id: 1, s: 'a\u0000b' });
  });
});

describe('copyText and cursors', () => {
  it('escapes what COPY text format treats specially', () => {
    expect(copyText('a\\b\tc\nd\re')).toBe('a\\\\b\\tc\\nd\\re');
    expect(copyText('plain')).toBe('plain');
  });

  it('round-trips a position and rejects anything it did not make', () => {
    expect(decodeCursor(encodeCursor('12345'))).toBe('12345');
    for (const bad of [
      '',
      'abc',
      encodeCursor('12345').slice(1),
      'cjE6LTE',
      Buffer.from('r1:1e5').toString('base64url'),
    ]) {
      expect(errorOf(() => decodeCursor(bad)).code).toBe('invalid_cursor');
    }
  });
});
