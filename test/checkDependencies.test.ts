/**
 * The dependency check (scripts/checkDependencies.ts, rules in .dependency-cruiser.cjs) fails on a tree
 * with an import cycle and on one whose folders import each other, and passes on the real tree. The
 * fixtures are small trees written to a temporary folder; nothing here needs Postgres or Temporal.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { checkDependencies, formatReport } from '../scripts/checkDependencies.js';

const made: string[] = [];
afterAll(() => {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
});

/** A tree of the given files (path → source) with a tsconfig like the project's. */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), 'check-deps-'));
  made.push(dir);
  const all: Record<string, string> = {
    'package.json': JSON.stringify({ type: 'module' }),
    'tsconfig.json': JSON.stringify({
      compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', strict: true, verbatimModuleSyntax: true },
      include: ['src'],
    }),
    ...files,
  };
  for (const [path, text] of Object.entries(all)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
  return dir;
}

describe('dependency check', () => {
  it('fails on an import cycle inside one folder (a type-only import closes it), naming its files', async () => {
    const report = await checkDependencies({
      baseDir: tree({
        'src/orders/place.ts':
          "import { total } from './price.js';\nexport interface Order { n: number }\nexport const place = (order: Order) => total(order);\n",
        'src/orders/price.ts':
          "import type { Order } from './place.js';\nexport const total = (order: Order) => order.n;\n",
      }),
    });
    expect(report.violations.length).toBeGreaterThan(0);
    for (const violation of report.violations) {
      expect(violation.rule).toBe('no-circular');
      expect([...violation.imports].sort()).toEqual([
        'src/orders/place.ts → src/orders/price.ts',
        'src/orders/price.ts → src/orders/place.ts',
      ]);
    }
    expect(formatReport(report)).toMatch(
      /✗ no-circular: import cycle through src\/orders\/[\s\S]*what to do: break the cycle/,
    );
  });

  it('fails on two folders that import each other, a type-only import included, naming each import', async () => {
    const report = await checkDependencies({
      baseDir: tree({
        'src/billing/invoice.ts':
          "import { customer } from '../accounts/customer.js';\nexport const invoice = () => customer;\n",
        'src/accounts/customer.ts':
          "import type { Plan } from '../billing/plan.js';\nexport const customer: { plan: Plan | null } = { plan: null };\n",
        'src/billing/plan.ts': 'export interface Plan { name: string }\n',
      }),
    });
    expect(report.violations).toEqual([
      expect.objectContaining({
        rule: 'no-bidirectional-folders',
        pair: 'src/accounts ↔ src/billing',
        imports: [
          'src/accounts/customer.ts → src/billing/plan.ts (type-only)',
          'src/billing/invoice.ts → src/accounts/customer.ts',
        ],
      }),
    ]);
    expect(formatReport(report)).toContain(
      '✗ no-bidirectional-folders: src/accounts and src/billing import each other',
    );
  });

  it('passes a tree whose folders depend one way (a test file importing back does not count)', async () => {
    const report = await checkDependencies({
      baseDir: tree({
        'src/billing/invoice.ts':
          "import { customer } from '../accounts/customer.js';\nexport const invoice = () => customer;\n",
        'src/accounts/customer.ts': 'export const customer = { name: "a" };\n',
        'src/accounts/customer.test.ts':
          "import { invoice } from '../billing/invoice.js';\nexport const used = invoice;\n",
      }),
    });
    expect(report.violations).toEqual([]);
  });

  it('passes on the real tree, and every pair listed as known still occurs', { timeout: 300_000 }, async () => {
    const report = await checkDependencies();
    expect(formatReport(report)).toMatch(/dependencies: ok/);
    expect(report.violations).toEqual([]);
    expect(report.staleKnown).toEqual([]);
  });
});
