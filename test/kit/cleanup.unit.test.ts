import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = mkdtempSync(join(tmpdir(), 'cleanup-test-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** Runs one test file in a vitest of its own and returns what its teardowns wrote, in order. */
async function teardownsOf(source: string): Promise<{ log: string[]; exitCode: number; output: string }> {
  const log = join(root, `${Math.random().toString(36).slice(2)}.log`);
  writeFileSync(log, '');
  const file = join(root, `case-${Math.random().toString(36).slice(2)}.test.ts`);
  writeFileSync(
    file,
    source.replaceAll('CLEANUP', JSON.stringify(resolve('test/kit/cleanup.ts'))).replaceAll('LOG', JSON.stringify(log)),
  );
  const vitest = resolve('node_modules/.bin/vitest');
  const result = await run(vitest, ['run', '--root', root, '--config', '/dev/null', file], { cwd: root }).then(
    (done) => ({ exitCode: 0, output: done.stdout + done.stderr }),
    (failed: { code: number; stdout: string; stderr: string }) => ({
      exitCode: failed.code,
      output: failed.stdout + failed.stderr,
    }),
  );
  return { ...result, log: readFileSync(log, 'utf8').split('\n').filter(Boolean) };
}

describe('deferCleanup', () => {
  it('runs teardowns registered in a test, a beforeAll and a helper, last first; vitest drops such afterAll hooks', async () => {
    const { log, exitCode, output } = await teardownsOf(`
      import { afterAll, beforeAll, it } from 'vitest';
      import { appendFileSync } from 'node:fs';
      import { deferCleanup } from CLEANUP;
      const note = (what: string) => () => appendFileSync(LOG, what + '\\n');
      function helper() { deferCleanup(note('helper')); afterAll(note('afterAll in a helper')); }
      beforeAll(() => { deferCleanup(note('beforeAll')); afterAll(note('afterAll in a beforeAll')); });
      it('registers', () => { deferCleanup(note('test')); afterAll(note('afterAll in a test')); helper(); });
    `);
    expect(exitCode, output).toBe(0);
    // If vitest starts running the nested afterAll hooks, the lint rule in eslint.config.js is obsolete.
    expect(log).toEqual(['helper', 'test', 'beforeAll']);
  });

  it('runs every teardown when one fails, and fails the file with the error', async () => {
    const { log, exitCode, output } = await teardownsOf(`
      import { it } from 'vitest';
      import { appendFileSync } from 'node:fs';
      import { deferCleanup } from CLEANUP;
      it('registers', () => {
        deferCleanup(() => appendFileSync(LOG, 'first\\n'));
        deferCleanup(() => { throw new Error('teardown broke'); });
        deferCleanup(() => appendFileSync(LOG, 'last\\n'));
      });
    `);
    expect(log).toEqual(['last', 'first']);
    expect(exitCode).not.toBe(0);
    expect(output).toContain('teardown broke');
  });
});
