import { describe, expect, it } from 'vitest';
import {
  checkRecord,
  checkRecords,
  formatInvalidRecords,
  modelIndex,
  modelsReferenced,
  type ModelIndex,
} from './checkRecord.js';
import { compileConfig } from './validate.js';

function modelsOf(modelsYaml: string): ModelIndex {
  const text = `integrations:\n  tracker:\n    syncs: {}\nmodels:\n${modelsYaml}`;
  const { config, problems } = compileConfig(text);
  expect(problems.filter((p) => p.severity === 'error')).toEqual([]);
  if (config === null) throw new Error('invalid fixture');
  return modelIndex(config.models);
}

const MODELS = modelsOf(`
  Base:
    id: string
    created_at: date
  Issue:
    __extends: Base
    number: integer
    title: string
    body?: string
    state: open | closed
    closed_by: User | null
    labels: Label[]
    priority: 1 | 2 | 3
    archived: boolean
    estimate: number | undefined
    extra: any
  User:
    login: string
  Label:
    name: string
    color?: string
  Bag:
    id: string
    __string: integer
  Nested:
    id: string
    owner:
      name: string
      emails: string[]
`);

const good = {
  id: '1',
  created_at: '2026-11-20T10:00:00.000Z',
  number: 1,
  title: 'Login is slow',
  state: 'open',
  closed_by: null,
  labels: [{ name: 'bug' }, { name: 'ui', color: 'red' }],
  priority: 2,
  archived: false,
  extra: { anything: [1, 'two'] },
};

describe('checkRecord', () => {
  it('accepts a record that fits its model, inherited fields, optional and undefined fields absent', () => {
    expect(checkRecord(good, 'Issue', MODELS)).toEqual([]);
    expect(checkRecord({ ...good, body: 'text', estimate: 3, closed_by: { login: 'ann' } }, 'Issue', MODELS)).toEqual(
      [],
    );
  });

  it('names the path of every bad field', () => {
    const bad = {
      ...good,
      created_at: 'yesterday',
      state: 'merged',
      labels: [{ name: 'bug' }, { name: 7 }],
      priority: 4,
      archived: 'no',
      closed_by: { login: 5 },
    };
    expect(checkRecord(bad, 'Issue', MODELS)).toEqual([
      { path: 'created_at', message: 'expected a date (an ISO 8601 string), got "yesterday"' },
      { path: 'state', message: 'expected "open" | "closed", got "merged"' },
      { path: 'closed_by.login', message: 'expected string, got 5' },
      { path: 'labels[1].name', message: 'expected string, got 7' },
      { path: 'priority', message: 'expected 1 | 2 | 3, got 4' },
      { path: 'archived', message: 'expected boolean, got "no"' },
    ]);
  });

  it('reports a missing required field and a field the model does not declare', () => {
    const { title: _title, ...withoutTitle } = good;
    expect(checkRecord({ ...withoutTitle, titel: 'typo' }, 'Issue', MODELS)).toEqual([
      { path: 'title', message: 'expected string, got nothing (the field is missing)' },
      { path: 'titel', message: 'is not a field of the model' },
    ]);
  });

  it('checks dynamic keys against __string and inline objects field by field', () => {
    expect(checkRecord({ id: 'a', apples: 3, pears: 4 }, 'Bag', MODELS)).toEqual([]);
    expect(checkRecord({ id: 'a', apples: 'three' }, 'Bag', MODELS)).toEqual([
      { path: 'apples', message: 'expected number, got "three"' },
    ]);
    expect(checkRecord({ id: 'n', owner: { name: 'x', emails: ['a', 2] } }, 'Nested', MODELS)).toEqual([
      { path: 'owner.emails[1]', message: 'expected string, got 2' },
    ]);
    expect(checkRecord({ id: 'n', owner: 'x' }, 'Nested', MODELS)).toEqual([
      { path: 'owner', message: 'expected an object, got "x"' },
    ]);
  });

  it('quotes keys that are not identifiers and refuses non-objects and unknown models', () => {
    expect(checkRecord({ id: 'a', 'odd key': 'x' }, 'Bag', MODELS)).toEqual([
      { path: '["odd key"]', message: 'expected number, got "x"' },
    ]);
    expect(checkRecord([1], 'Bag', MODELS)).toEqual([
      { path: '$', message: 'expected an object of model Bag, got a list of 1' },
    ]);
    expect(checkRecord({ id: 'a' }, 'Nope', MODELS)).toEqual([
      { path: '$', message: 'expected model Nope (not declared), got an object' },
    ]);
  });

  it('keeps at most 20 problems of one record', () => {
    const labels = Array.from({ length: 50 }, () => ({ name: 0 }));
    expect(checkRecord({ ...good, labels }, 'Issue', MODELS)).toHaveLength(20);
  });
});

describe('checkRecords', () => {
  it('lists only the records that break the model, with index and id, and formats one line per field', () => {
    const invalid = checkRecords([good, { ...good, id: '2', state: 'merged' }, { ...good, id: '3' }], 'Issue', MODELS);
    expect(invalid).toEqual([
      { index: 1, id: '2', problems: [{ path: 'state', message: 'expected "open" | "closed", got "merged"' }] },
    ]);
    expect(formatInvalidRecords('Issue', invalid)).toEqual([
      'Issue record 1 (id "2"): state: expected "open" | "closed", got "merged"',
    ]);
  });
});

describe('record_validation in service.yaml', () => {
  const yaml = (setting: string) => `integrations:
  tracker:
    syncs:
      issues:
        description: d
        output: Issue
        endpoint: GET /issues
        sync_type: full
${setting}
models:
  Issue:
    id: string
    author: User
  User:
    name: string
    org: Org | null
  Org:
    name: string
  Unrelated:
    id: string
`;

  it('defaults to off, accepts warn and refuse, and rejects anything else at its path', () => {
    expect(compileConfig(yaml('')).config?.integrations[0]?.syncs[0]?.recordValidation).toBe('off');
    expect(
      compileConfig(yaml('        record_validation: refuse')).config?.integrations[0]?.syncs[0]?.recordValidation,
    ).toBe('refuse');
    const bad = compileConfig(yaml('        record_validation: strict'));
    expect(bad.config).toBeNull();
    expect(bad.problems.map((p) => p.path.join('.'))).toContain('integrations.tracker.syncs.issues.record_validation');
  });

  it('the models a sync needs for checking are its outputs and what they refer to', () => {
    const config = compileConfig(yaml('        record_validation: warn')).config;
    expect(modelsReferenced(config?.models ?? [], ['Issue']).map((model) => model.name)).toEqual([
      'Issue',
      'User',
      'Org',
    ]);
  });
});

/** `{ id, child: { child: … { child: leaf } } }`, `depth` levels. */
function chain(depth: number, leaf: unknown): Record<string, unknown> {
  let value: Record<string, unknown> = { child: leaf };
  for (let level = 1; level < depth; level++) value = { child: value };
  return { id: 'deep', ...value };
}

function timed<T>(work: () => T): { result: T; ms: number } {
  const started = performance.now();
  const result = work();
  return { result, ms: performance.now() - started };
}

/*
 * Records built to be expensive (issue 25's attack pass): one that costs the checker exponentially many
 * steps, one whose keys and id would carry megabytes into the problem lines. The check runs in workflow
 * code (workflows/svc.ts checkAgainstModel), where a long synchronous walk stalls the workflow thread.
 */
describe('checking a hostile record takes bounded time and gives bounded output', () => {
  it('a record nested through a recursive union is checked in time linear in its size', () => {
    // Before the fix each level of `TreeNode | null` walked its subtree twice: 18 levels took 2.3 s on
    // an idle machine, 20 levels 11.6 s, 40 levels (a 300-byte record) longer than the universe's age.
    const models = modelsOf(`  TreeNode:\n    id?: string\n    child: TreeNode | null\n`);
    const { result, ms } = timed(() => checkRecord(chain(40, 5), 'TreeNode', models));
    expect(result).toHaveLength(1);
    expect(result[0]!.path).toBe(`${'child.'.repeat(39)}child`);
    expect(result[0]!.message).toMatch(/^expected TreeNode \| null, got 5$/);
    expect(ms).toBeLessThan(1000);
    // A valid deep record is still valid.
    expect(checkRecord(chain(40, null), 'TreeNode', models)).toEqual([]);
  });

  it('a union of several recursive members is bounded by the step budget, and says so', () => {
    const models = modelsOf(
      `  Tree:\n    id?: string\n    child: Tree | Other | null\n  Other:\n    id?: string\n    child: Tree | Other | null\n    other?: boolean\n`,
    );
    const { result, ms } = timed(() => checkRecord(chain(40, 5), 'Tree', models));
    expect(result).toEqual([
      { path: '$', message: expect.stringMatching(/^too complex to check against model Tree/) as unknown },
    ]);
    expect(ms).toBeLessThan(2000);
    // The budget is the batch's: a batch of such records costs no more than one budget, and the
    // record that spends it says the ones after it were not checked (before: 10,000 of them, 4 MB,
    // took 70 s of the workflow thread even with a per-record budget).
    const batch = Array.from({ length: 2000 }, (_, index) => ({ ...chain(40, 5), id: `r${index}` }));
    const spent = timed(() => checkRecords(batch, 'Tree', models));
    expect(spent.ms).toBeLessThan(5000);
    expect(spent.result.length).toBeLessThan(batch.length);
    expect(spent.result.at(-1)!.problems[0]!.message).toMatch(/the records after it were not checked/);
    // Budgets do not refuse what is merely big: 20,000 valid nodes in a list.
    const wide = modelsOf(
      `  Wide:\n    id: string\n    items: Item[]\n  Item:\n    name: string\n    parent: Item | null\n`,
    );
    const items = Array.from({ length: 20_000 }, (_, index) => ({
      name: `n${index}`,
      parent: { name: 'p', parent: null },
    }));
    expect(checkRecord({ id: 'w', items }, 'Wide', wide)).toEqual([]);
  });

  it('problem lines show at most a short part of a hostile key or id', () => {
    const models = modelsOf(`  Issue:\n    id: string\n    title: string\n`);
    const huge = 'k'.repeat(200_000);
    const record: Record<string, unknown> = { id: 'i'.repeat(200_000), title: 't' };
    for (let index = 0; index < 25; index++) record[`${huge}${index}`] = 1;
    record[`"${huge}"`] = 1;
    const lines = formatInvalidRecords('Issue', checkRecords([record], 'Issue', models));
    expect(lines).toHaveLength(20);
    for (const line of lines) expect(line.length).toBeLessThan(300);
  });
});
