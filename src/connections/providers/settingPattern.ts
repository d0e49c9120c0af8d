/**
 * The `pattern` of a connection setting, matched in linear time. Patterns come from the catalog and
 * from an integration's `provider_settings`, that is from whoever holds an environment's secret key,
 * and they are checked on the API, the hosted connect page (no key), the OAuth start and the worker
 * (every request and refresh that fills a URL). A backtracking engine (`new RegExp`) takes exponential
 * time on a pattern such as `^(a|a)*$`: 26 characters held the API's event loop, every environment's,
 * for 3.7 s. RE2 (re2js, a JavaScript port: no native build) matches in time linear in the value, and
 * refuses what it cannot do that way (backreferences, lookaround) when the pattern is saved.
 *
 * Linear is not cheap: RE2's time grows with the program's size times the value's length, and a provider
 * had any number of settings. 40 settings of `(?:a|aa|aaa){600}c$` (4,204 instructions, 276 ms per
 * 2 KB value) held every environment's API for 16.7 s on one `POST /connections`, and a worker for
 * 16 s on every request that filled the URL. So a pattern is at most MAX_PATTERN_PROGRAM instructions
 * (7.5 ms for a 2 KB value at that size, quiet machine), a provider's settings together as many
 * (MAX_SETTINGS_PROGRAM) and at most MAX_SETTINGS of them, and each (pattern, value) pair is matched
 * once per process: the fill of every request and refresh finds the answer in a cache.
 */
import { RE2JS } from 're2js';

/** The longest pattern accepted. */
export const MAX_PATTERN_LENGTH = 1000;
/** The largest compiled program accepted (RE2's measure of a pattern's cost; `[a-z]{500}` is about 500). */
export const MAX_PATTERN_PROGRAM = 1000;
/** The most connection settings one provider declares or fills into its URLs (the built-in catalog's most: 1). */
export const MAX_SETTINGS = 32;
/**
 * The most values one connection's settings hold (`connection_config`, checked where they are given):
 * each is looked up in the provider's URLs, and 300,000 held the API 1.4-2.6 s (a hostile review).
 */
export const MAX_CONNECTION_SETTINGS = 100;
/**
 * The largest sum of the programs of a provider's settings (a setting without a pattern counts the
 * default's): the bound on what validating one connection's settings costs (the catalog's largest: 259).
 */
export const MAX_SETTINGS_PROGRAM = 1000;
/** The longest connection setting value (also the API's bound on `connection_config` values). */
export const MAX_SETTING_VALUE_LENGTH = 2048;

/**
 * The most repetitions a pattern may write in all (`{n}` and `{m,n}` counts added up), checked before it
 * is compiled: compiling is where a refused pattern costs (999 characters of `(x){1000}` compile to
 * 333,002 instructions in 0.6-0.9 s, a hostile review), and RE2 already refuses nested counts whose
 * product passes 1,000.
 */
export const MAX_PATTERN_REPEATS = 1000;

const compiled = new Map<string, RE2JS>();
/** Patterns refused, with why: a stored one is refused again at every use without compiling it again. */
const refused = new Map<string, string>();
/** Answers already computed, by pattern and value (bounded: cleared when full). */
const answers = new Map<string, boolean>();
const MAX_ANSWERS = 10_000;

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
  const problem = refused.get(pattern);
  if (problem !== undefined) throw new Error(problem);
  try {
    return compileOnce(pattern);
  } catch (error) {
    if (refused.size >= 1000) refused.clear();
    refused.set(pattern, (error as Error).message);
    throw error;
  }
}

function compileOnce(pattern: string): RE2JS {
  if (pattern.length > MAX_PATTERN_LENGTH) throw new Error(`is longer than ${MAX_PATTERN_LENGTH} characters`);
  let repeats = 0;
  for (const [, low, high] of pattern.matchAll(/\{(\d+)(?:,(\d*))?\}/g))
    repeats += Math.max(Number(low), Number(high || 0));
  if (repeats > MAX_PATTERN_REPEATS) {
    throw new Error(`repeats ${repeats} times in all ({n} counts added up), at most ${MAX_PATTERN_REPEATS}`);
  }
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
  const key = `${pattern}\u0000${value}`;
  const known = answers.get(key);
  if (known !== undefined) return known;
  const answer = compileSettingPattern(pattern).test(value);
  if (answers.size >= MAX_ANSWERS) answers.clear();
  answers.set(key, answer);
  return answer;
}

/** A pattern's size in RE2 instructions; throws as compiling it does. */
export function settingPatternProgram(pattern: string): number {
  return compileSettingPattern(pattern).programSize();
}

/**
 * Why a provider's settings together cost too much to check (too many, or their programs too large
 * together), or undefined. `patterns` has one entry per setting: its pattern, or the default one.
 * A pattern that does not compile is left to its own check.
 */
export function settingsBudgetProblem(patterns: readonly string[]): string | undefined {
  if (patterns.length > MAX_SETTINGS) {
    return `declares or uses ${patterns.length} connection settings, at most ${MAX_SETTINGS} are accepted`;
  }
  let total = 0;
  for (const pattern of patterns) {
    try {
      total += settingPatternProgram(pattern);
    } catch {
      continue;
    }
  }
  if (total > MAX_SETTINGS_PROGRAM) {
    return (
      `has connection setting patterns of ${total} RE2 instructions together, at most ${MAX_SETTINGS_PROGRAM} ` +
      `are accepted (each value is checked against its pattern on every connect): use simpler patterns`
    );
  }
  return undefined;
}
