/**
 * Hostile records against `record_validation` (HOSTILE s25): a record that costs the checker
 * exponentially many steps, and one whose keys and id would carry megabytes into the problem lines.
 * The check runs in workflow code (workflows/svc.ts checkAgainstModel), where a long synchronous walk
 * stalls the workflow thread.
 */
import { describe, expect, it } from 'vitest';
import { checkRecord, checkRecords, formatInvalidRecords, modelIndex, type ModelIndex } from './checkRecord.js';
import { compileConfig } from './validate.js';

function modelsOf(modelsYaml: string): ModelIndex {
  const { config, problems } = compileConfig(`integrations:\n  tracker:\n    syncs: {}\nmodels:\n${modelsYaml}`);
  expect(problems.filter((p) => p.severity === 'error')).toEqual([]);
  return modelIndex(config!.models);
}

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

describe('record validation against hostile records', () => {
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
