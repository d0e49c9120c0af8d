/**
 * The `pattern` of a connection setting, matched in linear time. Patterns come from the catalog and
 * from an integration's `provider_settings`, that is from whoever holds an environment's secret key,
 * and they are checked on the API, the hosted connect page (no key), the OAuth start and the worker
 * (every request and refresh that fills a URL). A backtracking engine (`new RegExp`) takes exponential
 * time on a pattern such as `^(a|a)*$`: 26 characters held the API's event loop, every environment's,
 * for 3.7 s. RE2 (re2js, a JavaScript port: no native build) matches in time linear in the value, and
 * refuses what it cannot do that way (backreferences, lookaround) when the pattern is saved.
 */
import { RE2JS } from 're2js';

/** The longest pattern accepted. */
export const MAX_PATTERN_LENGTH = 1000;
/** The largest compiled program accepted (RE2's measure of a pattern's cost; `[a-z]{1000}` is about 1,000). */
export const MAX_PATTERN_PROGRAM = 5000;
/** The longest connection setting value (also the API's bound on `connection_config` values). */
export const MAX_SETTING_VALUE_LENGTH = 2048;

const compiled = new Map<string, RE2JS>();

/** Why a pattern cannot be used (RE2 syntax, length, size), or undefined. */
export function settingPatternProblem(pattern: string): string | undefined {
  try {
    compileSettingPattern(pattern);
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}

/** The compiled pattern (cached); throws an Error whose message says what is wrong with it. */
function compileSettingPattern(pattern: string): RE2JS {
  const known = compiled.get(pattern);
  if (known) return known;
  if (pattern.length > MAX_PATTERN_LENGTH) throw new Error(`is longer than ${MAX_PATTERN_LENGTH} characters`);
  let regex: RE2JS;
  try {
    regex = RE2JS.compile(pattern);
  } catch (error) {
    // RE2's message names the construct (`invalid or unsupported Perl syntax: (?=`).
    throw new Error(
      `is not a regular expression this service accepts (RE2 syntax: no backreferences or lookaround): ${(error as Error).message}`,
    );
  }
  if (regex.programSize() > MAX_PATTERN_PROGRAM) {
    throw new Error(`is too large (${regex.programSize()} RE2 instructions, at most ${MAX_PATTERN_PROGRAM})`);
  }
  if (compiled.size >= 1000) compiled.clear();
  compiled.set(pattern, regex);
  return regex;
}

/**
 * Whether `value` matches `pattern` somewhere, as `RegExp.prototype.test` (patterns anchor themselves
 * with ^ and $). Linear in the value's length; a value longer than MAX_SETTING_VALUE_LENGTH never matches.
 * Throws an Error (the pattern's problem) for a pattern that cannot be compiled.
 */
export function matchesSettingPattern(pattern: string, value: string): boolean {
  if (value.length > MAX_SETTING_VALUE_LENGTH) return false;
  return compileSettingPattern(pattern).test(value);
}
