/**
 * Problems found in a service.yaml. The compiler never stops at the first one: every stage appends to
 * a list, and the CLI prints them all like a compiler does (`file:line:column error code message`).
 */
import { ServiceError } from '../errors.js';

/** Stable codes of configuration problems; part of the public interface (documented in docs/configuration.md). */
export const PROBLEM_CODES = [
  'yaml_syntax',
  'duplicate_key',
  'empty_config',
  'unknown_key',
  'ignored_key',
  'missing_field',
  'invalid_type',
  'invalid_value',
  'invalid_name',
  'invalid_endpoint',
  'invalid_runs',
  'runs_below_minimum',
  'output_endpoint_mismatch',
  'duplicate_output',
  'unknown_model',
  'unknown_action',
  'missing_id',
  'invalid_id',
  'nullable_id',
  'invalid_type_expression',
  'missing_type',
  'circular_extends',
  'conflicting_inherited_field',
  'conflicting_keys',
  'redeclared_field',
  'deprecated_key',
  'literal_looks_like_type',
  'ignored_field',
  'generated_endpoint_conflict',
  'generated_endpoint_shadows_builtin',
] as const;
export type ProblemCode = (typeof PROBLEM_CODES)[number];

export type YamlPath = readonly (string | number)[];

export interface ConfigProblem {
  severity: 'error' | 'warning';
  code: ProblemCode;
  message: string;
  /** Where in the document, as keys and list indexes from the root. */
  path: YamlPath;
  /** 1-based; 0 when the position is unknown (never for problems the compiler produces from a file). */
  line: number;
  column: number;
}

/** Thrown by functions that need a valid configuration (`loadConfigFile`, `compileProject`'s callers). */
export class ConfigError extends ServiceError<'invalid_config'> {
  override readonly name = 'ConfigError';
  readonly problems: readonly ConfigProblem[];

  constructor(file: string, problems: readonly ConfigProblem[]) {
    const errors = problems.filter((p) => p.severity === 'error');
    super('invalid_config', `${file} has ${plural(errors.length, 'error')}:\n${formatProblems(file, errors)}`, {
      status: 400,
      details: errors,
    });
    this.problems = problems;
  }
}

export function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? '' : 's'}`;
}

/** `a.b[0].c`: how a YAML path reads in a message. */
export function formatPath(path: YamlPath): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (/^[A-Za-z_$][\w$-]*\??$/.test(part)) out += out === '' ? part : `.${part}`;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out === '' ? '(root)' : out;
}

/**
 * One line per problem, like a compiler, followed by the offending source line and a caret when the
 * source is given: `service.yaml:12:5 error unknown_key unknown key 'x' … (at integrations.github)`.
 */
export function formatProblems(file: string, problems: readonly ConfigProblem[], source?: string): string {
  const lines = source?.split(/\r?\n/);
  return problems
    .map((p) => {
      const head = `${file}:${p.line}:${p.column} ${p.severity} ${p.code} ${p.message} (at ${formatPath(p.path)})`;
      const text = lines?.[p.line - 1];
      if (text === undefined || p.line === 0) return head;
      return `${head}\n    ${text}\n    ${' '.repeat(Math.max(0, p.column - 1))}^`;
    })
    .join('\n');
}

/** Edit distance (Levenshtein), for "did you mean" suggestions. */
export function editDistance(a: string, b: string): number {
  const previous = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = previous[0] ?? 0;
    previous[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = previous[j] ?? 0;
      const left = previous[j - 1] ?? 0;
      previous[j] = Math.min(above + 1, left + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return previous[b.length] ?? 0;
}

/** Edit-distance cells the "did you mean" hints may still spend (`withHintBudget`); unbounded outside it. */
let hintCells = Infinity;

/**
 * Runs `work` with at most `cells` cells of edit distance for hints: past them, `closest` suggests
 * nothing. A service.yaml with thousands of unknown names against thousands of models made every name
 * a search through every model (4,000 × 4,000 held the API's event loop 55 s on a loaded machine).
 */
export function withHintBudget<T>(cells: number, work: () => T): T {
  const before = hintCells;
  hintCells = cells;
  try {
    return work();
  } finally {
    hintCells = before;
  }
}

/** The closest candidate, when it is close enough to be a likely typo (case-insensitive). */
export function closest(word: string, candidates: Iterable<string>): string | undefined {
  let best: string | undefined;
  let bestDistance = Infinity;
  // A third of the word, at least one edit and at most three: close enough to be a typo, not a guess.
  const allowed = Math.min(3, Math.max(1, Math.floor(word.length / 3)));
  const lower = word.toLowerCase();
  for (const candidate of candidates) {
    // Each candidate looked at costs a cell; the distance is at least the difference in length.
    hintCells -= 1;
    if (hintCells < 0) break;
    if (Math.abs(candidate.length - word.length) > allowed) continue;
    hintCells -= (word.length + 1) * (candidate.length + 1);
    if (hintCells < 0) break;
    const distance = editDistance(lower, candidate.toLowerCase());
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best !== undefined && bestDistance <= allowed ? best : undefined;
}

export function didYouMean(word: string, candidates: Iterable<string>): string {
  const suggestion = closest(word, candidates);
  return suggestion === undefined ? '' : `; did you mean '${suggestion}'?`;
}
