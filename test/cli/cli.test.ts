/**
 * The `service` command on real projects in temporary folders: init, generate, compile (real
 * TypeScript, real esbuild), validate, and the bundle contract with the runtime. Most cases run the
 * CLI in-process through runCli (the same code bin/service.js calls); a few spawn bin/service.js to
 * prove the installed entry point, exit codes and output.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync, mkdirSync, copyFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { compileProject, type BuildManifest } from '../../src/cli/compile.js';
import { runCliCaptured, type CliOutcome } from '../helpers/cli.js';
import { compileConfig } from '../../src/config/index.js';
import { ActionError } from '../../src/runtime/public.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const BIN = join(REPO, 'bin/service.js');
const FIXTURES = join(REPO, 'test/fixtures/configs');

const dirs: string[] = [];
afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempProject(): string {
  const dir = mkdtempSync(join(tmpdir(), 'service-cli-'));
  dirs.push(dir);
  return dir;
}

const cli = (root: string, ...args: string[]): Promise<CliOutcome> => runCliCaptured(args, { cwd: root, env: {} });

function spawnCli(root: string, ...args: string[]): { code: number | null; out: string; err: string } {
  const result = spawnSync(process.execPath, [BIN, ...args], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  return { code: result.status, out: result.stdout, err: result.stderr };
}

function write(root: string, path: string, content: string): void {
  mkdirSync(dirname(join(root, path)), { recursive: true });
  writeFileSync(join(root, path), content);
}

function read(root: string, path: string): string {
  return readFileSync(join(root, path), 'utf8');
}

type ScriptFn = (...args: unknown[]) => Promise<unknown>;
const isScript = (value: unknown): value is ScriptFn => typeof value === 'function';

/** Evaluates a bundle exactly as the runtime contract says, recording what it requires. */
function evaluate(code: string): { fn: ScriptFn; required: string[] } {
  const required: string[] = [];
  const module: { exports: Record<string, unknown> } = { exports: {} };
  const requireFn = (specifier: string) => {
    required.push(specifier);
    if (specifier !== 'integration-service/runtime') throw new Error(`unexpected require ${specifier}`);
    return { ActionError };
  };
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- this is the evaluation the runtime performs
  const factory = new Function('module', 'exports', 'require', code);
  Reflect.apply(factory, undefined, [module, module.exports, requireFn]);
  const fn = module.exports['default'];
  if (!isScript(fn)) throw new Error('the bundle sets no function as module.exports.default');
  return { fn, required };
}

const apiIssue = (id: number, state: string) => ({
  id,
  number: id,
  title: `issue ${id}`,
  state,
  html_url: `https://github.com/o/r/issues/${id}`,
  updated_at: '2026-01-01T00:00:00Z',
  labels: [{ name: 'bug' }],
});

describe('service --help', () => {
  it('teaches every command, with examples', async () => {
    const root = tempProject();
    const main = spawnCli(root, '--help');
    expect(main.code).toBe(0);
    for (const command of ['init', 'generate', 'compile', 'validate']) expect(main.out).toContain(`  ${command} `);
    for (const command of ['init', 'generate', 'compile', 'validate', 'check']) {
      const help = await cli(root, command, '--help');
      expect(help.code, command).toBe(0);
      expect(help.out, command).toContain('Usage: service ');
      expect(help.out, command).toContain('Examples:\n  npx service ');
      expect(help.out, command).toContain('--root <dir>');
    }
    expect((await cli(root, 'help', 'compile')).out).toContain('bundle each');
  });

  it('answers unknown commands and options with exit code 2 and a pointer to --help', async () => {
    const root = tempProject();
    const unknown = await cli(root, 'deploi');
    expect(unknown).toMatchObject({ code: 2 });
    expect(unknown.err).toContain("unknown command 'deploi'");
    const option = await cli(root, 'compile', '--fast');
    expect(option.code).toBe(2);
    expect(option.err).toContain("Run 'service --help'");
    expect((await cli(root, 'generate', 'extra')).code).toBe(2);
  });
});

describe('service init, generate, compile', () => {
  it('scaffolds an example that compiles, and builds bundles that follow the runtime contract', async () => {
    const root = tempProject();
    const init = await cli(root, 'init');
    expect(init.code, init.err).toBe(0);
    for (const file of [
      'service-integrations/service.yaml',
      'service-integrations/github/syncs/issues.ts',
      'service-integrations/github/actions/create-issue.ts',
      'service-integrations/tsconfig.json',
      'service-integrations/.gitignore',
      'service-integrations/models.ts',
    ]) {
      expect(init.out).toContain(`created ${file}`);
      expect(existsSync(join(root, file)), file).toBe(true);
    }

    const again = await cli(root, 'init');
    expect(again.code).toBe(1);
    expect(again.err).toContain('exists already');

    const compile = await cli(root, 'compile');
    expect(compile.code, compile.err).toBe(0);
    expect(compile.out).toContain('type-checking 2 scripts…');
    expect(compile.out).toContain('bundling 2 scripts…');
    expect(compile.out).toContain('built 2 scripts');

    const manifest = JSON.parse(read(root, 'service-integrations/build/manifest.json')) as BuildManifest;
    expect(manifest.version).toBe(1);
    expect(manifest.config).toEqual(compileConfig(read(root, 'service-integrations/service.yaml')).config);
    expect(manifest.scripts.map(({ hash: _hash, ...rest }) => rest)).toEqual([
      {
        integration: 'github',
        kind: 'sync',
        name: 'issues',
        file: 'github/syncs/issues.cjs',
        source: 'github/syncs/issues.ts',
      },
      {
        integration: 'github',
        kind: 'action',
        name: 'create-issue',
        file: 'github/actions/create-issue.cjs',
        source: 'github/actions/create-issue.ts',
      },
    ]);
    for (const script of manifest.scripts) {
      const code = read(root, `service-integrations/build/${script.file}`);
      expect(script.hash).toBe(createHash('sha256').update(code).digest('hex'));
    }

    // The sync bundle: default export, only the runtime required, svc used as the script says.
    const sync = evaluate(read(root, 'service-integrations/build/github/syncs/issues.cjs'));
    const saved: unknown[][] = [];
    const svc = {
      lastSyncDate: undefined,
      getMetadata: () => Promise.resolve({ owner: 'o', repo: 'r' }),
      paginate: async function* (config: { endpoint: string }) {
        expect(config.endpoint).toBe('/repos/o/r/issues');
        yield [apiIssue(1, 'open'), apiIssue(2, 'closed')];
      },
      batchSave: (records: unknown[], model: string) => {
        expect(model).toBe('GithubIssue');
        saved.push(records);
        return Promise.resolve();
      },
      log: () => Promise.resolve(),
    };
    await sync.fn(svc);
    expect(saved).toEqual([
      [
        expect.objectContaining({ id: '1', state: 'open', labels: ['bug'] }),
        expect.objectContaining({ id: '2', state: 'closed' }),
      ],
    ]);
    expect(sync.required.every((specifier) => specifier === 'integration-service/runtime')).toBe(true);

    // The action bundle: returns its output, and throws the runtime's own ActionError.
    const action = evaluate(read(root, 'service-integrations/build/github/actions/create-issue.cjs'));
    expect(action.required).toEqual(['integration-service/runtime']);
    const post = (config: { data: unknown }) =>
      Promise.resolve({ data: { ...apiIssue(7, 'open'), sent: config.data } });
    await expect(action.fn({ post }, { owner: 'o', repo: 'r', title: 'Hello' })).resolves.toMatchObject({
      id: '7',
      title: 'issue 7',
    });
    const failure: unknown = await Promise.resolve(action.fn({ post }, { owner: 'o', repo: 'r', title: ' ' })).catch(
      (e: unknown) => e,
    );
    expect(failure).toBeInstanceOf(ActionError);
    expect(failure).toMatchObject({ payload: { message: 'title must not be empty' } });
  });

  it('generate writes models.ts and a compiling stub for every script that has none, never overwriting one', async () => {
    const root = tempProject();
    expect((await cli(root, 'init')).code).toBe(0);
    const yamlPath = 'service-integrations/service.yaml';
    const syncBefore = read(root, 'service-integrations/github/syncs/issues.ts');
    write(
      root,
      yamlPath,
      read(root, yamlPath)
        .replace(
          '    actions:\n',
          [
            '      pull-requests:',
            '        description: Pull requests, with their reviews.',
            '        output: [GithubIssue, Review]',
            '        endpoint: [GET /github/pulls, GET /github/reviews]',
            '        sync_type: full',
            '    actions:',
            '      close_issue:',
            '        description: Closes an issue.',
            '        output: GithubIssue',
            '        endpoint: DELETE /github/issues/:id',
            '',
          ].join('\n'),
        )
        .replace('models:\n', 'models:\n  Review:\n    id: number\n    body?: string\n'),
    );

    const generate = await cli(root, 'generate');
    expect(generate.code, generate.err).toBe(0);
    expect(generate.out).toContain('wrote service-integrations/models.ts');
    expect(generate.out).toContain('created stub service-integrations/github/syncs/pull-requests.ts');
    expect(generate.out).toContain('created stub service-integrations/github/actions/close_issue.ts');
    expect(read(root, 'service-integrations/models.ts')).toContain('export interface Review {');
    expect(read(root, 'service-integrations/github/syncs/issues.ts')).toBe(syncBefore);
    const stub = read(root, 'service-integrations/github/syncs/pull-requests.ts');
    expect(stub).toContain("await svc.batchSave(reviewRecords, 'Review');");

    const second = await cli(root, 'generate');
    expect(second.out).toBe('unchanged service-integrations/models.ts\n');

    const result = await compileProject({ root });
    expect(result.problems).toEqual([]);
    expect(result.manifest?.scripts.map((s) => `${s.kind}:${s.name}`)).toEqual([
      'sync:issues',
      'sync:pull-requests',
      'action:close_issue',
      'action:create-issue',
    ]);

    // A script removed from service.yaml leaves no stale bundle behind.
    write(root, yamlPath, read(root, yamlPath).replace(/ {6}close_issue:\n(?: {8}.*\n)+/, ''));
    const rebuilt = await compileProject({ root });
    expect(rebuilt.ok).toBe(true);
    // Its script stays, with a warning that it is not built.
    expect(rebuilt.problems).toEqual([
      expect.objectContaining({
        severity: 'warning',
        code: 'orphan_script',
        file: 'service-integrations/github/actions/close_issue.ts',
      }),
    ]);
    expect(existsSync(join(root, 'service-integrations/build/github/actions/close_issue.cjs'))).toBe(false);
    expect(existsSync(join(root, 'service-integrations/build/github/actions/create-issue.cjs'))).toBe(true);
  });
});

describe('service compile rejects scripts that break the rules, with file:line:column', () => {
  const project = async () => {
    const root = tempProject();
    expect((await cli(root, 'init')).code).toBe(0);
    return root;
  };
  const SYNC = 'service-integrations/github/syncs/issues.ts';
  const ACTION = 'service-integrations/github/actions/create-issue.ts';

  it('imports of anything but the project files inside service-integrations/, the runtime and the allow-list', async () => {
    const root = await project();
    write(
      root,
      SYNC,
      `import { readFileSync } from 'node:fs';\nimport type { ServiceSync } from '../../models';\nimport { helper } from './helper';\nexport type { Foo } from 'somewhere';\nimport { outside } from '../../../outside';\n\nexport default async function run(svc: ServiceSync): Promise<void> {\n  const lib = await import('lodash');\n  await svc.log(String(readFileSync) + String(helper) + String(lib) + outside);\n}\n`,
    );
    // A file the script imports is held to the same rules, at its own place.
    write(
      root,
      'service-integrations/github/syncs/helper.ts',
      "import axios from 'axios';\nexport const helper = axios;\n",
    );
    write(root, 'outside.ts', "export const outside = 'x';\n");
    const result = await cli(root, 'compile');
    expect(result.code).toBe(1);
    const lines = result.err.split('\n').filter((line) => line.includes(' forbidden_import '));
    expect(lines.map((line) => line.split(' error ')[0])).toEqual([
      `${SYNC}:1:30`,
      `${SYNC}:5:25`,
      `${SYNC}:8:28`,
      'service-integrations/github/syncs/helper.ts:1:19',
    ]);
    expect(lines[0]).toContain("scripts cannot import 'node:fs'");
    expect(lines[1]).toContain('it is outside service-integrations/');
    expect(lines[3]).toContain("scripts cannot import 'axios'");
    // helper.ts sits where sync scripts go, but no sync declares it.
    expect(result.err).toContain('service-integrations/github/syncs/helper.ts:1:1 warning orphan_script');
    expect(result.err).toContain('4 errors, 1 warning');
    expect(existsSync(join(root, 'service-integrations/build/manifest.json'))).toBe(false);
  });

  it('accepts every spelling of the models import and the runtime import', async () => {
    const root = await project();
    write(
      root,
      ACTION,
      read(root, ACTION).replace(
        "from '../../models';",
        "from '../../models.js';\nimport type { ServiceSync } from 'integration-service/runtime';\nexport type Unused = ServiceSync;",
      ),
    );
    const result = await cli(root, 'compile');
    expect(result.code, result.err).toBe(0);
  });

  it('sync-only helpers in an action, however they are reached', async () => {
    const root = await project();
    write(
      root,
      ACTION,
      `import type { GithubIssue, ServiceSync } from '../../models';\n\nexport default async function run(svc: ServiceSync): Promise<GithubIssue> {\n  await svc.batchSave([], 'GithubIssue');\n  const { batchDelete } = svc;\n  await batchDelete([], 'GithubIssue');\n  await svc['batchSave']([], 'GithubIssue');\n  throw new Error('x');\n}\n`,
    );
    const result = await cli(root, 'compile');
    expect(result.code).toBe(1);
    const lines = result.err.split('\n').filter((line) => line.includes(' sync_only_helper '));
    expect(lines.map((line) => line.split(' error ')[0])).toEqual([`${ACTION}:4:9`, `${ACTION}:5:11`, `${ACTION}:7:9`]);
    expect(lines[0]).toContain('svc.batchSave is for sync scripts only');
  });

  it('a script without a default export, and type errors with their TypeScript code', async () => {
    const root = await project();
    write(root, ACTION, `export async function run(): Promise<void> {}\n`);
    const missing = await cli(root, 'compile');
    expect(missing.err).toContain(`${ACTION}:1:1 error missing_default_export`);

    write(
      root,
      ACTION,
      `import type { GithubIssue, ServiceAction } from '../../models';\n\nexport default async function run(svc: ServiceAction): Promise<GithubIssue> {\n  await svc.log('x');\n  return { id: 1 };\n}\n`,
    );
    const typed = await cli(root, 'compile');
    expect(typed.code).toBe(1);
    expect(typed.out).toContain('type-checking 2 scripts…');
    expect(typed.err).toMatch(new RegExp(`${ACTION}:5:12 error TS2322 `));
    expect(typed.err).not.toContain('bundling');
  });
});

describe('service validate and problems in service.yaml', () => {
  /** `service validate` of a fixture config: its output and the `file:line:column severity code` of each problem. */
  function validateFixture(fixture: string): { result: ReturnType<typeof spawnCli>; heads: string[] } {
    const root = tempProject();
    mkdirSync(join(root, 'service-integrations'));
    copyFileSync(join(FIXTURES, fixture), join(root, 'service-integrations/service.yaml'));
    const result = spawnCli(root, 'validate');
    const heads = result.err
      .split('\n')
      .filter((line) => line.startsWith('service-integrations/service.yaml:'))
      .map((line) => line.split(' ').slice(0, 3).join(' '));
    return { result, heads };
  }

  it('prints every mistake of a config with line:column, like a compiler, and exits 1 without a stack trace', () => {
    const { result, heads } = validateFixture('several-mistakes.yaml');
    expect(result.code).toBe(1);
    expect(heads).toEqual([
      'service-integrations/service.yaml:7:17 error unknown_model',
      'service-integrations/service.yaml:8:19 error invalid_endpoint',
      'service-integrations/service.yaml:10:15 error runs_below_minimum',
      'service-integrations/service.yaml:11:9 error unknown_key',
      'service-integrations/service.yaml:13:7 error missing_field',
      'service-integrations/service.yaml:19:13 error invalid_type_expression',
    ]);
    expect(result.err).toContain("did you mean 'auto_start'?");
    expect(result.err).toContain(`\n${' '.repeat(12)}auto_strat: true\n${' '.repeat(12)}^\n`);
    expect(result.err).toContain('6 errors, 0 warnings');
    expect(result.err).not.toMatch(/^\s+at /m);
  });

  it('reports generated endpoints that deploy would refuse (shadowed, shared) with line:column', () => {
    const { result, heads } = validateFixture('endpoint-problems.yaml');
    expect(result.code).toBe(1);
    expect(heads).toEqual([
      'service-integrations/service.yaml:13:19 error generated_endpoint_shadows_builtin',
      'service-integrations/service.yaml:19:19 error generated_endpoint_conflict',
    ]);
    expect(result.err).toContain('which the built-in route GET /records answers');
    expect(result.err).toContain("already declared by sync 'issues' (model Issue)");
    expect(result.err).toContain('2 errors, 0 warnings');
  });

  it('generate and compile refuse the same config with the same problems and write nothing', async () => {
    const root = tempProject();
    mkdirSync(join(root, 'service-integrations'));
    copyFileSync(join(FIXTURES, 'several-mistakes.yaml'), join(root, 'service-integrations/service.yaml'));
    for (const command of ['generate', 'compile']) {
      const result = await cli(root, command);
      expect(result.code).toBe(1);
      expect(result.err).toContain('6 errors, 0 warnings');
    }
    expect(existsSync(join(root, 'service-integrations/models.ts'))).toBe(false);
  });

  it('passes a config with warnings, printing them', async () => {
    const root = tempProject();
    mkdirSync(join(root, 'service-integrations'));
    copyFileSync(join(FIXTURES, 'valid-with-warnings.yaml'), join(root, 'service-integrations/service.yaml'));
    const result = await cli(root, 'check');
    expect(result.code).toBe(0);
    expect(result.err).toContain('warning deprecated_key');
    expect(result.err).toContain('warning ignored_field');
    expect(result.out).toContain('is valid: 1 integration(s), 1 sync(s), 0 action(s), 1 model(s)');
    expect(existsSync(join(root, 'service-integrations/models.ts'))).toBe(false);
  });

  it('says where the config is missing, and honours --root', async () => {
    const root = tempProject();
    const missing = await cli(root, 'generate');
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('config_not_found');
    expect(missing.err).toContain('service init');
    expect((await cli(root, 'init', '--root', 'app')).code).toBe(0);
    expect(existsSync(join(root, 'app/service-integrations/service.yaml'))).toBe(true);
    expect((await cli(root, 'validate', '--root', 'app')).code).toBe(0);
  });
});
