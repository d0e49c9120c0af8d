/**
 * Type expressions of model fields, as SPEC.md "Model object" describes them: type names from the
 * type table, other TypeScript names (`null`, `undefined`, …), `<type>[]`, unions `<a> | <b>` whose
 * members that are neither a known type nor a model are literal strings, and model references.
 * Decisions on top (docs/configuration.md): number and boolean literals, quoted string literals,
 * parentheses for arrays of unions, and the de-facto format's type aliases in any case (`String`,
 * `float`, `varchar`, `array`, `void`).
 */
import { closest } from './problems.js';
import type { PrimitiveType, TypeExpr } from './types.js';

/** Type names of the file and the TypeScript type each becomes. */
export const KNOWN_TYPES: ReadonlyMap<string, PrimitiveType> = new Map<string, PrimitiveType>([
  ['bool', 'boolean'],
  ['boolean', 'boolean'],
  ['string', 'string'],
  ['char', 'string'],
  ['integer', 'number'],
  ['int', 'number'],
  ['number', 'number'],
  ['date', 'Date'],
  ['Date', 'Date'],
  ['null', 'null'],
  ['undefined', 'undefined'],
  ['unknown', 'unknown'],
  ['any', 'any'],
  ['object', 'object'],
]);

/**
 * The de-facto format's aliases, read in any case after the exact names and the models (its parser
 * lower-cases a name before looking it up): `String`, `Boolean`, `Integer`, `float`, `varchar`, and
 * `array` for a list of anything.
 */
const CASE_INSENSITIVE_TYPES: ReadonlyMap<string, TypeExpr> = new Map<string, TypeExpr>([
  ...[...KNOWN_TYPES].map(([name, primitive]): [string, TypeExpr] => [
    name.toLowerCase(),
    { kind: 'primitive', name: primitive },
  ]),
  ['float', { kind: 'primitive', name: 'number' }],
  ['varchar', { kind: 'primitive', name: 'string' }],
  ['array', { kind: 'array', element: { kind: 'primitive', name: 'any' } }],
  // An action that returns nothing says `output: void`; JSON has no void, so it is what is returned: nothing.
  ['void', { kind: 'primitive', name: 'undefined' }],
]);

export type TypeExprResult =
  | {
      ok: true;
      type: TypeExpr;
      warnings: string[];
      /** Bare words read as literal strings (not quoted, neither a type nor a model), in order. */
      bareLiterals: string[];
    }
  | { ok: false; error: string };

interface ParseState {
  models: ReadonlySet<string>;
  warnings: string[];
  bareLiterals: string[];
}

const NUMBER = /^-?\d+(?:\.\d+)?$/;
// Characters that mean the author wrote syntax we do not support, rather than a literal value.
const SYNTAX = /[()[\]{}<>"'`;]/;

/** Deeper parentheses than any type needs (`(string | number)[]` is one level). */
const MAX_PARENTHESES = 16;

/** Splits at top-level `|`, respecting parentheses and quotes; `deepest`: how deep the parentheses go. */
function splitUnion(text: string): { parts: string[]; deepest: number } | string {
  const parts: string[] = [];
  let depth = 0;
  let deepest = 0;
  let quote: string | null = null;
  let current = '';
  for (const char of text) {
    if (quote !== null) {
      if (char === quote) quote = null;
    } else if (char === '"' || char === "'") {
      quote = char;
    } else if (char === '(') {
      deepest = Math.max(deepest, ++depth);
    } else if (char === ')') {
      depth--;
      if (depth < 0) return "unbalanced ')'";
    } else if (char === '|' && depth === 0) {
      parts.push(current);
      current = '';
      continue;
    }
    current += char;
  }
  if (quote !== null) return `unterminated quote ${quote}`;
  if (depth !== 0) return "unbalanced '('";
  parts.push(current);
  return { parts, deepest };
}

function parseUnion(text: string, state: ParseState): TypeExpr | string {
  const split = splitUnion(text);
  if (typeof split === 'string') return split;
  const members: TypeExpr[] = [];
  for (const raw of split.parts) {
    const member = parseMember(raw.trim(), state);
    if (typeof member === 'string') return member;
    members.push(member);
  }
  if (members.length === 1 && members[0] !== undefined) return members[0];
  return { kind: 'union', members };
}

function parseMember(text: string, state: ParseState): TypeExpr | string {
  const { models } = state;
  if (text === '') return "an empty member: two '|' in a row, or one at the start or end";
  let depth = 0;
  let core = text;
  while (core.endsWith('[]')) {
    depth++;
    core = core.slice(0, -2).trimEnd();
  }
  let type: TypeExpr | string;
  if (core.startsWith('(') && core.endsWith(')')) {
    type = parseUnion(core.slice(1, -1), state);
  } else if (/^'[^']*'$|^"[^"]*"$/.test(core)) {
    type = { kind: 'literal', value: core.slice(1, -1) };
  } else if (core === '') {
    type = "'[]' needs an element type before it, as in string[]";
  } else if (/^[\w.-]+\([\w .-]*\)$/.test(core)) {
    // A word with a parenthesised note, `speaker_view(CC)`: the de-facto format reads it as a literal.
    type = literalString(core, state);
  } else if (SYNTAX.test(core)) {
    type = core.includes('<')
      ? `'${core}': generic types are not supported; use an inline object, a model, or __string for dynamic keys`
      : `'${core}' is not a type, a model or a literal`;
  } else if (NUMBER.test(core)) {
    type = { kind: 'literal', value: Number(core) };
  } else if (core === 'true' || core === 'false') {
    type = { kind: 'literal', value: core === 'true' };
  } else {
    const primitive = KNOWN_TYPES.get(core);
    if (primitive !== undefined) type = { kind: 'primitive', name: primitive };
    else if (models.has(core)) type = { kind: 'model', name: core };
    else type = CASE_INSENSITIVE_TYPES.get(core.toLowerCase()) ?? literalString(core, state);
  }
  if (typeof type === 'string') return type;
  for (let i = 0; i < depth; i++) type = { kind: 'array', element: type };
  return type;
}

function* typeNames(models: ReadonlySet<string>): Generator<string> {
  yield* KNOWN_TYPES.keys();
  yield* models;
}

function literalString(text: string, state: ParseState): TypeExpr {
  const { models, warnings } = state;
  state.bareLiterals.push(text);
  // SPEC: an unknown name is a literal string. A lone word one typo away from a type name is far more
  // likely a typo than a literal, so say so (a warning: the file stays valid as SPEC defines it).
  if (/^\w+$/.test(text)) {
    const near = closest(text, typeNames(models));
    if (near !== undefined && near !== text) {
      const what = models.has(near) ? 'model' : 'type';
      warnings.push(
        `'${text}' is taken as the literal string '${text}'; did you mean the ${what} '${near}'? (quote it to keep the literal)`,
      );
    }
  }
  return { kind: 'literal', value: text };
}

/**
 * Parses one type expression. `models` are the declared model names: a model name is a reference,
 * never a literal.
 */
export function parseTypeExpr(text: string, models: ReadonlySet<string>): TypeExprResult {
  if (text.trim() === '') return { ok: false, error: 'the type is empty' };
  // Each level of parentheses splits its content again, recursively: bounded, it stays linear.
  const split = splitUnion(text);
  if (typeof split !== 'string' && split.deepest > MAX_PARENTHESES) {
    return { ok: false, error: `parentheses nested more than ${MAX_PARENTHESES} deep` };
  }
  const state: ParseState = { models, warnings: [], bareLiterals: [] };
  const type = parseUnion(text, state);
  if (typeof type === 'string') return { ok: false, error: type };
  return { ok: true, type, warnings: state.warnings, bareLiterals: state.bareLiterals };
}
