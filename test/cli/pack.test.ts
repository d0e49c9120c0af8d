/**
 * As a new user would: pack the project with `npm pack`, install the tarball into an empty folder
 * (from the registry, like any dependency), then `npx service init`, `generate` and `compile` there,
 * and compile the generated models.ts with `tsc --strict` under each module resolution a user may
 * have; then import the typed client (`integration-service/client`), call it, and type-check programs
 * that use it. Slow (about a minute, mostly npm install; over five minutes on a loaded machine, hence its
 * generous limits), so it is the only test of its kind.
 */
import { spawn } from 'node:child_process';
import { rm } from 'node:fs/promises';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { json, startFakeUpstream } from '../kit/upstream.js';

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const work = mkdtempSync(join(tmpdir(), 'service-pack-'));
afterAll(() => rm(work, { recursive: true, force: true }), 60_000);

// npm passes its own settings to scripts as npm_* variables (the prefix among them); a child npm
// that inherited them would act on this repository instead of the temporary folder.
const env = Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')));

/** Runs a command without blocking the test worker (a blocked worker loses its link to vitest). */
function run(command: string, args: string[], cwd: string): Promise<{ status: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'], timeout: 600_000 });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, output }));
  });
}

async function ok(command: string, args: string[], cwd: string): Promise<string> {
  const { status, output } = await run(command, args, cwd);
  expect(status, `${command} ${args.join(' ')} in ${cwd}:\n${output}`).toBe(0);
  return output;
}

describe('the packed package, installed into an empty folder', () => {
  it('runs service init, generate and compile, and its models.ts compiles under tsc --strict', async () => {
    await ok('npm', ['pack', '--pack-destination', work], REPO);
    const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
    if (tarball === undefined) throw new Error('npm pack wrote no tarball');
    // prepack builds dist/runtime and dist/client for the tarball; postpack removes them again.
    expect(existsSync(join(REPO, 'dist/runtime'))).toBe(false);
    expect(existsSync(join(REPO, 'dist/client'))).toBe(false);

    const app = join(work, 'app');
    mkdirSync(app);
    // A project of its own: without a package.json npm installs into the nearest folder above that has
    // one (a /tmp/package.json, say), where packages of other runs may be.
    writeFileSync(join(app, 'package.json'), `${JSON.stringify({ name: 'app', private: true })}\n`);
    // --prefer-offline: the packages are in npm's cache after the project's own install.
    await ok('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', join(work, tarball)], app);
    // tsx is a devDependency: the commands below run the CLI's build (dist/src/cli/, which prepack wrote).
    expect(existsSync(join(app, 'node_modules/tsx'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/integration-service/dist/src/cli/bin.js'))).toBe(true);

    expect(await ok('npx', ['--no-install', 'service', 'init'], app)).toContain(
      'created service-integrations/service.yaml',
    );
    expect(await ok('npx', ['--no-install', 'service', 'generate'], app)).toContain('service-integrations/models.ts');
    const compiled = await ok('npx', ['--no-install', 'service', 'compile'], app);
    expect(compiled).toContain('built 2 scripts');
    expect(existsSync(join(app, 'service-integrations/build/manifest.json'))).toBe(true);
    expect(existsSync(join(app, 'service-integrations/build/github/actions/create-issue.cjs'))).toBe(true);

    const tsc = ['--no-install', 'tsc', '--strict', '--noEmit', '--target', 'es2022'];
    const models = 'service-integrations/models.ts';
    await ok('npx', [...tsc, '--module', 'nodenext', '--moduleResolution', 'nodenext', models], app);
    await ok('npx', [...tsc, '--module', 'preserve', '--moduleResolution', 'bundler', models], app);
    await ok('npx', [...tsc, '--module', 'commonjs', '--moduleResolution', 'node10', models], app);
    // The scaffolded tsconfig.json checks the scripts the way `service compile` does.
    await ok('npx', ['--no-install', 'tsc', '-p', 'service-integrations'], app);

    // The runtime export also loads at run time, for a user's own tests of their scripts.
    const loaded = await ok(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "import { ActionError } from 'integration-service/runtime'; console.log(new ActionError({ message: 'm' }).type);",
      ],
      app,
    );
    expect(loaded.trim()).toBe('action_script_failure');

    // The typed client (docs/api.md): imported by its documented name, called against a fake API here.
    const api = await startFakeUpstream((_request, response) => json(response, 200, { status: 'ok', database: 'ok' }));
    const baseUrl = api.url;
    try {
      const called = await ok(
        process.execPath,
        [
          '--input-type=module',
          '-e',
          `import { createClient } from 'integration-service/client';\n` +
            `const api = createClient({ baseUrl: '${baseUrl}', secretKey: 'sk_test' });\n` +
            'console.log(JSON.stringify(await api.health()));',
        ],
        app,
      );
      expect(JSON.parse(called)).toEqual({ status: 'ok', database: 'ok' });
      expect(api.requests.map((r) => `${r.method} ${r.url} ${r.headers.authorization ?? ''}`)).toEqual([
        'GET /health Bearer sk_test',
      ]);
    } finally {
      await api.close();
    }
    // Its types: a strict program that uses them compiles, and one that misuses them does not.
    writeFileSync(
      join(app, 'use-client.ts'),
      [
        "import { createClient, ServiceApiError, type SyncStatus } from 'integration-service/client';",
        "const api = createClient({ baseUrl: 'http://127.0.0.1:3003', secretKey: 'sk' });",
        'export async function idle(): Promise<SyncStatus[]> {',
        "  const { syncs } = await api.syncs.status({ provider_config_key: 'github', syncs: '*' });",
        "  return syncs.filter((sync) => sync.status === 'SUCCESS' && sync.latestError === null);",
        '}',
        'export async function firstPage(): Promise<number> {',
        "  const page = await api.records.list({ connectionId: 'c', providerConfigKey: 'github', model: 'Issue', limit: 10 });",
        '  return page.records.length;',
        '}',
        'export const isApiError = (error: unknown): boolean => error instanceof ServiceApiError && error.status === 404;',
        '',
      ].join('\n'),
    );
    await ok('npx', [...tsc, '--module', 'nodenext', '--moduleResolution', 'nodenext', 'use-client.ts'], app);
    await ok('npx', [...tsc, '--module', 'preserve', '--moduleResolution', 'bundler', 'use-client.ts'], app);
    await ok('npx', [...tsc, '--module', 'commonjs', '--moduleResolution', 'node10', 'use-client.ts'], app);
    writeFileSync(
      join(app, 'misuse-client.ts'),
      "import { createClient } from 'integration-service/client';\nvoid createClient({ baseUrl: 'x' }).records.list({ connectionId: 'c', providerConfigKey: 'p', model: 1 });\n",
    );
    const misuse = await run(
      'npx',
      [...tsc, '--module', 'nodenext', '--moduleResolution', 'nodenext', 'misuse-client.ts'],
      app,
    );
    expect(misuse.status).not.toBe(0);
    expect(misuse.output).toMatch(/misuse-client\.ts\(2,\d+\): error TS2322/);

    // And a config with mistakes fails there too, each one with its position.
    mkdirSync(join(work, 'broken/service-integrations'), { recursive: true });
    copyFileSync(
      join(REPO, 'test/fixtures/configs/several-mistakes.yaml'),
      join(work, 'broken/service-integrations/service.yaml'),
    );
    const broken = await run('npx', ['--no-install', 'service', 'validate', '--root', join(work, 'broken')], app);
    expect(broken.status).toBe(1);
    expect(broken.output).toContain('service.yaml:11:9 error unknown_key');
    expect(broken.output).toContain('6 errors, 0 warnings');
  }, 900_000);
});
