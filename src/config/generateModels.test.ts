import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { generateModels, RUNTIME_SPECIFIER } from './generateModels.js';
import type { ServiceConfig } from './types.js';
import { compileConfig } from './validate.js';

const EXAMPLE = fileURLToPath(new URL('../../config/service.example.yaml', import.meta.url));
const RUNTIME = fileURLToPath(new URL('../runtime/public.ts', import.meta.url));

function configOf(text: string): ServiceConfig {
  const { config, problems } = compileConfig(text);
  expect(problems.filter((p) => p.severity === 'error')).toEqual([]);
  if (config === null) throw new Error('invalid fixture');
  return config;
}

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

/**
 * Type-checks models.ts plus a file using it, with the strictest options a user might have, and
 * returns the diagnostics as `file:line message`.
 */
function typeCheck(models: string, usage: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'models-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'models.ts'), models);
  writeFileSync(join(dir, 'usage.ts'), usage);
  const program = ts.createProgram({
    rootNames: [join(dir, 'models.ts'), join(dir, 'usage.ts')],
    options: {
      strict: true,
      exactOptionalPropertyTypes: true,
      noUncheckedIndexedAccess: true,
      noPropertyAccessFromIndexSignature: true,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.ESNext,
      moduleResolution: ts.ModuleResolutionKind.Bundler,
      lib: ['lib.es2022.d.ts'],
      types: [],
      paths: { [RUNTIME_SPECIFIER]: [RUNTIME] },
    },
  });
  return ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
    return `${d.file?.fileName.split('/').pop() ?? '?'}:${where === undefined ? 0 : where.line + 1} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
}

describe('generateModels', () => {
  const example = configOf(readFileSync(EXAMPLE, 'utf8'));

  it('is deterministic and re-exports the script helpers from the runtime module', () => {
    const text = generateModels(example);
    expect(generateModels(configOf(readFileSync(EXAMPLE, 'utf8')))).toBe(text);
    expect(text).toContain('export type { ServiceSync, ServiceAction, ProxyConfiguration, Pagination,');
    expect(text).toMatch(/export type \{[^}]*\bAuthModeType\b[^}]*\} from 'integration-service\/runtime';/);
    expect(text).toContain("export { ActionError } from 'integration-service/runtime';");
    expect(text).toContain('  created_at: Date;\n');
    expect(text).toContain('  state: "open" | "closed";\n');
    expect(text).toContain('  extra: (string | number)[];\n');
    expect(text).toContain('  "full name": string;\n');
  });

  it('produces types that accept what the config allows and reject what it does not (tsc, strict)', () => {
    const usage = `
import { ActionError, type GithubCollaborator, type GithubIssue, type GithubRepository, type ServiceAction, type ServiceSync } from './models';

export const issue: GithubIssue = {
  id: '1', url: 'https://x', number: 1, title: 't', state: 'open', labels: ['bug'], assignee: { login: 'a', site_admin: false },
  priority: 2, locked: false, milestone: { title: 'm', due_on: null }, reactions: { '+1': 3 }, created_at: new Date(),
};
export const withBody: GithubIssue = { ...issue, body: 'text', assignee: null };
export const repo: GithubRepository = { id: 'r', url: 'u', name: 'n', visibility: 'internal', topics: ['a'], extra: ['a', 1], 'full name': 'x' };
export const collaborator: GithubCollaborator = { id: 'c', url: 'u', login: 'l', site_admin: true, permission: 'admin', permissions_checked: true };

// @ts-expect-error a union of literal strings restricts the value
export const badState: GithubIssue['state'] = 'merged';
// @ts-expect-error number literals
export const badPriority: GithubIssue['priority'] = 4;
// @ts-expect-error optional fields keep their type
export const badBody: GithubIssue['body'] = 3;
// @ts-expect-error __string values have the declared type
export const badReaction: GithubIssue['reactions'] = { '+1': 'many' };
// @ts-expect-error a boolean literal
export const badChecked: GithubCollaborator['permissions_checked'] = false;
// @ts-expect-error a required field is required
export const missing: GithubRepository = { id: 'r', url: 'u', name: 'n', visibility: 'public', topics: [], extra: [] };

export async function sync(svc: ServiceSync): Promise<void> {
  await svc.batchSave([issue], 'GithubIssue');
}
export async function action(svc: ServiceAction): Promise<GithubRepository> {
  await svc.log('x');
  throw new ActionError({ message: 'no' });
}
`;
    expect(typeCheck(generateModels(example), usage)).toEqual([]);
  });

  it('widens the __string index type so declared fields of other types still compile', () => {
    const config = configOf(`
integrations: {}
models:
  Bag:
    id: string
    count?: number
    nested:
      a: boolean
    __string: string
`);
    const text = generateModels(config);
    expect(text).toContain('  [key: string]: string | number | undefined | {');
    const usage = `import type { Bag } from './models';\nexport const bag: Bag = { id: 'x', nested: { a: true }, extra: 'y' };\n`;
    expect(typeCheck(text, usage)).toEqual([]);
  });

  it('writes an empty model as an empty interface and keeps file order', () => {
    const text = generateModels(
      configOf('integrations: {}\nmodels:\n  Zed: {}\n  Alpha:\n    a: any\n    b: object\n'),
    );
    expect(text).toContain('  b: Record<string, any>;\n');
    expect(text.indexOf('interface Zed {}')).toBeGreaterThan(0);
    expect(text.indexOf('interface Zed')).toBeLessThan(text.indexOf('interface Alpha'));
    expect(typeCheck(text, 'export {};\n')).toEqual([]);
  });
});
