/**
 * The prebuilt workflow bundle is used only while it matches its sources: an edit to a module the
 * bundle imports (not only its entry) makes it stale, and a worker then bundles anew, says so, and
 * writes the fresh bundle back.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import {
  buildWorkflowBundle,
  loadWorkflowBundle,
  readPrebuiltWorkflowBundle,
  saveWorkflowBundle,
} from './workflowBundle.js';

// Inside the repository, so that the bundler resolves @temporalio/workflow from its node_modules.
const dir = resolve(import.meta.dirname, '..', '..', 'dist', `bundle-test-${randomBytes(4).toString('hex')}`);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('the prebuilt workflow bundle', () => {
  it('is loaded while it matches its sources, and rebuilt with a log line after an edit to a module it imports', async () => {
    mkdirSync(dir, { recursive: true });
    const entry = join(dir, 'workflows.ts');
    const helper = join(dir, 'greeting.ts');
    writeFileSync(helper, "export const GREETING = 'hello';\n");
    writeFileSync(
      entry,
      "import { sleep } from '@temporalio/workflow';\nimport { GREETING } from './greeting.js';\n" +
        'export async function greet(): Promise<string> {\n  await sleep(1);\n  return GREETING;\n}\n',
    );
    const bundlePath = join(dir, 'out', 'workflow-bundle.js');
    const built = await buildWorkflowBundle(entry);
    saveWorkflowBundle(built, bundlePath);
    expect(built.manifest.files).toContain(`dist/${dir.split('/').at(-1)}/greeting.ts`);
    expect(built.manifest.interceptors).toEqual(['workflows/failureLog.ts']);
    expect(built.manifest.failureConverter).toBe('src/runtime/failureConverter.cjs');

    const lines: string[] = [];
    const fresh = await loadWorkflowBundle({ bundlePath, log: (line) => lines.push(line) });
    expect(fresh.code).toBe(built.code);
    expect(lines).toEqual([]);

    // An edit to the imported module, not the entry: the bundle is stale and never used as it is.
    writeFileSync(helper, "export const GREETING = 'bonjour';\n");
    const stale = readPrebuiltWorkflowBundle(bundlePath);
    expect(stale.ok).toBe(false);
    expect(!stale.ok && stale.reason).toMatch(/stale/);
    const rebuilt = await loadWorkflowBundle({ bundlePath, log: (line) => lines.push(line) });
    expect(rebuilt.code).toContain('bonjour');
    expect(lines[0]).toMatch(
      /not using the prebuilt workflow bundle: .*stale.*; bundling dist\/bundle-test-\w+\/workflows\.ts now/,
    );
    expect(lines[1]).toMatch(/^bundled in [\d.]+ s; wrote /);
    // Written back: the next start loads it without bundling.
    expect(readPrebuiltWorkflowBundle(bundlePath).ok).toBe(true);

    // A bundle file that does not match its manifest is refused too.
    writeFileSync(bundlePath, readFileSync(bundlePath, 'utf8').replace('bonjour', 'bonsoir'));
    const tampered = readPrebuiltWorkflowBundle(bundlePath);
    expect(!tampered.ok && tampered.reason).toMatch(/does not match its manifest/);
  }, 240_000);

  it('takes code for a realm of its own as text, types stripped and nothing bundled in; an edit to that file makes the bundle stale', async () => {
    mkdirSync(dir, { recursive: true });
    const entry = join(dir, 'realmWorkflows.ts');
    const realm = join(dir, 'realmCode.ts');
    writeFileSync(
      realm,
      "import type { Greeting } from './realmTypes.js';\n(function setup(word: Greeting): string {\n  return `${word}!`;\n});\n",
    );
    writeFileSync(join(dir, 'realmTypes.ts'), 'export type Greeting = string;\n');
    writeFileSync(
      entry,
      "// @ts-expect-error the ambient module of workflows/realm/source.d.ts is not in this file's program\n" +
        "import text from './realmCode.ts?source';\n" +
        'export async function realmText(): Promise<string> {\n  return text;\n}\n',
    );
    const bundlePath = join(dir, 'realm-out', 'workflow-bundle.js');
    const built = await buildWorkflowBundle(entry);
    saveWorkflowBundle(built, bundlePath);
    // The module is the file's text as a string: no type, no import, no swc helper.
    expect(built.code).toContain(JSON.stringify('(function setup(word) {\n  return `${word}!`;\n});\n'));
    expect(built.manifest.files).toContain(`dist/${dir.split('/').at(-1)}/realmCode.ts`);
    expect(readPrebuiltWorkflowBundle(bundlePath).ok).toBe(true);
    writeFileSync(realm, '(function setup(word: string): string {\n  return `${word}?`;\n});\n');
    expect(readPrebuiltWorkflowBundle(bundlePath).ok).toBe(false);

    // Anything but `import type` left in such a file fails the bundle.
    writeFileSync(
      realm,
      "import { GREETING } from './greeting.js';\n(function setup(): string {\n  return GREETING;\n});\n",
    );
    await expect(buildWorkflowBundle(entry)).rejects.toThrow();
  }, 240_000);
});
