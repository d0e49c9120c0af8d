/**
 * The `runs` field: how often a sync runs. SPEC.md: "the duration notation of the ms convention";
 * on top of that, English phrases people write anyway ("every 30 minutes", "every hour", "every day").
 */
import ms from 'ms';
import { MIN_RUNS_MS } from './types.js';

// The grammar of the `ms` package (2.x), so what it accepts is exactly what we accept.
const MS_NOTATION =
  /^-?(?:\d+)?\.?\d+ *(?:milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|w|years?|yrs?|y)?$/i;
const UNIT_ONLY =
  /^(?:milliseconds?|msecs?|ms|seconds?|secs?|s|minutes?|mins?|m|hours?|hrs?|h|days?|d|weeks?|w|years?|yrs?|y)$/i;

/** The minimum as people write it: "30 seconds". */
export const MIN_RUNS_TEXT = ms(MIN_RUNS_MS, { long: true });

export const RUNS_FORMS =
  'a duration in the ms notation ("30m", "1h", "2 hours", "1d") or a phrase "every <duration>" ("every 30 minutes", "every hour", "every day")';

function isMsNotation(text: string): text is ms.StringValue {
  return MS_NOTATION.test(text);
}

export type RunsResult = { ok: true; ms: number } | { ok: false; reason: 'unparseable' | 'below_minimum'; ms?: number };

/** Parses a `runs` value to milliseconds and checks it against the minimum. */
export function parseRuns(value: string): RunsResult {
  let text = value.trim().replace(/\s+/g, ' ');
  const every = /^every (.+)$/i.exec(text);
  if (every?.[1] !== undefined) text = UNIT_ONLY.test(every[1]) ? `1 ${every[1]}` : every[1];
  if (!isMsNotation(text)) return { ok: false, reason: 'unparseable' };
  const millis = ms(text);
  if (!Number.isFinite(millis)) return { ok: false, reason: 'unparseable' };
  if (millis < MIN_RUNS_MS) return { ok: false, reason: 'below_minimum', ms: millis };
  return { ok: true, ms: millis };
}
