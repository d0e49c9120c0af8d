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
