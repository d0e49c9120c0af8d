import { describe, expect, it } from 'vitest';
import { parseRuns } from './runs.js';

describe('parseRuns, on the ms package', () => {
  it.each([
    ['30m', 1_800_000],
    ['  1.5h ', 5_400_000],
    ['.5h', 1_800_000],
    ['2   Hours', 7_200_000],
    ['every m', 60_000],
    ['EVERY 1 yr', 31_557_600_000],
  ])('reads %j as %d ms', (value, millis) => {
    expect(parseRuns(value)).toEqual({ ok: true, ms: millis });
  });

  it.each(['', ' ', 'every', 'every ', 'every every hour', '1 fortnight', '30 m s', '1e3', `${'1'.repeat(99)}ms`])(
    'refuses %j as unparseable, without throwing',
    (value) => {
      expect(parseRuns(value)).toEqual({ ok: false, reason: 'unparseable' });
    },
  );

  it.each([
    ['every 5', 5],
    ['-1h', -3_600_000],
    ['every 29s', 29_000],
  ])('refuses %j as below the minimum, saying how much it is', (value, millis) => {
    expect(parseRuns(value)).toEqual({ ok: false, reason: 'below_minimum', ms: millis });
  });
});
