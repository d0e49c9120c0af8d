/**
 * The `runs` field: how often a sync runs. SPEC.md: "the duration notation of the ms convention";
 * on top of that, the phrases of the de-facto format ("every 30 minutes", "every hour", "every day",
 * "every half hour", "every month"): its parser knows a few phrases by name and reads anything else as
 * "every " followed by the ms notation (docs/configuration.md, "runs forms").
 */
import ms from 'ms';
import { MAX_RUNS_MS, MIN_RUNS_MS } from './types.js';

/** The minimum as people write it: "30 seconds". */
export const MIN_RUNS_TEXT = ms(MIN_RUNS_MS, { long: true });
/** The maximum as people write it (`ms` itself would say "3653 days"). */
export const MAX_RUNS_TEXT = '10 years';

export const RUNS_FORMS =
  'a duration in the ms notation ("30m", "1h", "2 hours", "1d") or a phrase "every <duration>" ("every 30 minutes", "every hour", "every day", "every half hour")';

/**
 * Phrases the format names rather than computes; the ms notation has no month, nor halves and quarters
 * as words. A month is 30 days there, so it is here.
 */
const NAMED_PHRASES: ReadonlyMap<string, number> = new Map([
  ['half day', ms('12h')],
  ['half hour', ms('30m')],
  ['quarter hour', ms('15m')],
  ['month', ms('30d')],
]);

/**
 * What the `ms` package (2.x) makes of a string: milliseconds, or undefined for anything that is not its
 * notation. Its types accept only strings already in the notation; at run time it answers undefined
 * for the rest, and throws only for the empty string.
 */
function msOf(text: string): number | undefined {
  if (text === '') return undefined;
  const millis: number | undefined = ms(text as ms.StringValue);
  return millis !== undefined && Number.isFinite(millis) ? millis : undefined;
}

export type RunsResult =
  { ok: true; ms: number } | { ok: false; reason: 'unparseable' | 'below_minimum' | 'above_maximum'; ms?: number };

/** Parses a `runs` value to milliseconds and checks it against the minimum and the maximum. */
export function parseRuns(value: string): RunsResult {
  const text = value.trim().replace(/\s+/g, ' ');
  const every = /^every (.+)$/i.exec(text)?.[1];
  // "every 30 minutes" is "30 minutes"; "every hour", a unit alone, is "1 hour".
  const millis =
    every === undefined ? msOf(text) : (NAMED_PHRASES.get(every.toLowerCase()) ?? msOf(every) ?? msOf(`1 ${every}`));
  if (millis === undefined) return { ok: false, reason: 'unparseable' };
  if (millis < MIN_RUNS_MS) return { ok: false, reason: 'below_minimum', ms: millis };
  if (millis > MAX_RUNS_MS) return { ok: false, reason: 'above_maximum', ms: millis };
  return { ok: true, ms: millis };
}
