/**
 * Feeds thousands of mutated configs to the compiler and checks that it never throws and that every
 * answer is well-formed: known codes, real positions, a config exactly when there is no error, and a
 * models.ts that generates. Seeded, so a failure reproduces; bounded to a few seconds.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { prng } from '../../bench/lib/stats.js';
import { EXAMPLE_SERVICE_YAML } from '../cli/templates.js';
import { generateModels } from './generateModels.js';
import { PROBLEM_CODES } from './problems.js';
import { compileConfig } from './validate.js';

const ITERATIONS = 2000;

const SEEDS = [
  readFileSync(fileURLToPath(new URL('../../config/service.example.yaml', import.meta.url)), 'utf8'),
  EXAMPLE_SERVICE_YAML,
];

const ATOMS: unknown[] = [
  null,
  true,
  0,
  -1,
  1.5,
  '',
  'string',
  'GET /x',
  'get x',
  'every hour',
  '1s',
  'A | B',
  'string[]',
  '(a | b)[]',
  '((',
  '|',
  'Record<a, b>',
  "'quoted'",
  'GithubIssue',
  'GithubRecord',
  '__extends',
  [],
  ['GithubIssue', 'Nope'],
  {},
  { id: 'string' },
  { __extends: 'GithubIssue' },
  { __string: 'number', 'x?': 'string' },
  // The de-facto format's forms (issue 30): parents in one string, inline objects extending a model
  // (possibly one that holds them), endpoint mappings and bare paths, type expressions as input/output.
  'GithubRecord, GithubIssue',
  { __extends: 'GithubRecord', y: 'string' },
  { __extends: 'GithubIssue,GithubRecord' },
  { __string: { __extends: 'GithubIssue' } },
  { method: 'GET', path: '/x', group: 'g' },
  { path: 'x' },
  '/bare',
  'GithubIssue[] | null',
  'every half hour',
  'a, b',
];
const KEYS = [
  'id',
  'id?',
  '__extends',
  '__string',
  '__other',
  'output',
  'endpoint',
  'runs',
  'auto_starts',
  'sync_type',
  'version',
  'webhook-subscriptions',
  'on-events',
  'x y',
  '',
];
const TEXT_NOISE = [
  ':',
  '-',
  ' ',
  '\n',
  '[',
  ']',
  '{',
  '}',
  '|',
  '?',
  '&a',
  '*a',
  '#',
  '"',
  "'",
  '\t',
  '!!str',
  '<<: *a',
];

type Tree = Record<string, unknown> | unknown[];

function isTree(value: unknown): value is Tree {
  return typeof value === 'object' && value !== null;
}

function pick<T>(rand: () => number, items: readonly T[]): T {
  const item = items[Math.floor(rand() * items.length)];
  if (item === undefined) throw new Error('empty');
  return item;
}

/** Mutates a random node of the parsed tree: replace, delete, rename, add, or wrap a value. */
function mutateTree(tree: unknown, rand: () => number): unknown {
  if (!isTree(tree) || rand() < 0.15) return pick(rand, ATOMS);
  const keys: (string | number)[] = Array.isArray(tree) ? tree.map((_, i) => i) : Object.keys(tree);
  const copy: Tree = Array.isArray(tree) ? [...tree] : { ...tree };
  const choice = rand();
  if (keys.length === 0 || choice < 0.1) {
    if (Array.isArray(copy)) copy.push(pick(rand, ATOMS));
    else copy[pick(rand, KEYS)] = pick(rand, ATOMS);
    return copy;
  }
  const key = pick(rand, keys);
  if (Array.isArray(copy) && typeof key === 'number') {
    if (choice < 0.2) copy.splice(key, 1);
    else copy[key] = mutateTree(copy[key], rand);
  } else if (!Array.isArray(copy) && typeof key === 'string') {
    if (choice < 0.2) delete copy[key];
    else if (choice < 0.3) {
      copy[`${key.slice(0, -1)}${pick(rand, ['', 'x', 's', '?'])}`] = copy[key];
      delete copy[key];
    } else copy[key] = mutateTree(copy[key], rand);
  }
  return copy;
}

/** Mutates the text: insert noise, delete a span, duplicate or drop a line, change an indentation. */
function mutateText(text: string, rand: () => number): string {
  const lines = text.split('\n');
  const at = Math.floor(rand() * lines.length);
  const line = lines[at] ?? '';
  const choice = rand();
  if (choice < 0.3) {
    const pos = Math.floor(rand() * (line.length + 1));
    lines[at] = line.slice(0, pos) + pick(rand, TEXT_NOISE) + line.slice(pos);
  } else if (choice < 0.5) {
    const pos = Math.floor(rand() * line.length);
    lines[at] = line.slice(0, pos) + line.slice(pos + 1 + Math.floor(rand() * 4));
  } else if (choice < 0.65) lines.splice(at, 0, line);
  else if (choice < 0.8) lines.splice(at, 1);
  else lines[at] = rand() < 0.5 ? `  ${line}` : line.replace(/^ {1,2}/, '');
  return lines.join('\n');
}

describe('compiler fuzz', () => {
  it(`never throws on ${ITERATIONS} mutated configs and always answers well-formed`, () => {
    const rand = prng(20261121);
    const codes = new Set<string>(PROBLEM_CODES);
    const seen = new Set<string>();
    let valid = 0;
    for (let i = 0; i < ITERATIONS; i++) {
      const seed = pick(rand, SEEDS);
      let text: string;
      if (i % 2 === 0) {
        text = seed;
        const rounds = 1 + Math.floor(rand() * 4);
        for (let r = 0; r < rounds; r++) text = mutateText(text, rand);
      } else {
        let tree: unknown = parse(seed);
        const rounds = 1 + Math.floor(rand() * 3);
        for (let r = 0; r < rounds; r++) tree = mutateTree(tree, rand);
        text = stringify(tree);
      }
      let result;
      try {
        result = compileConfig(text);
      } catch (error) {
        throw new Error(`compileConfig threw on input #${i}:\n${text}\n${String(error)}`);
      }
      const lineCount = text.split('\n').length;
      // Plain checks, not expect(): this loop runs thousands of times.
      const fail = (what: string): never => {
        throw new Error(`${what} on input #${i}:\n${text}\n${JSON.stringify(result.problems, null, 1)}`);
      };
      for (const problem of result.problems) {
        seen.add(problem.code);
        if (!codes.has(problem.code)) fail(`unknown code ${problem.code}`);
        if (problem.message.length === 0) fail('empty message');
        if (!Number.isInteger(problem.line) || problem.line < 1 || problem.line > lineCount + 1) fail('bad line');
        if (!Number.isInteger(problem.column) || problem.column < 1) fail('bad column');
      }
      const errors = result.problems.filter((p) => p.severity === 'error').length;
      if ((result.config === null) !== errors > 0) fail('config returned with errors, or withheld without');
      if (result.config !== null) {
        valid++;
        if (typeof generateModels(result.config) !== 'string') fail('generateModels');
      }
    }
    // The mutations must reach both outcomes and many kinds of problem, or the fuzzing proves little.
    expect(valid).toBeGreaterThan(ITERATIONS / 50);
    expect(seen.size).toBeGreaterThan(12);
    // A few seconds alone; half a minute on a loaded machine.
  }, 300_000);
});
