/**
 * The production server as `npm run serve` runs it: `node dist/src/main.js`, the build of `npm run build`
 * (scripts/build.ts; `.ci/run` builds before the tests), with plain node: no tsx in the process. On the
 * test run's Temporal and Postgres, from an empty database (the SQL migrations are read from the
 * build), with SERVICE_ROLE=all (the API here, the worker in a supervised child, also built JS): the
 * health route answers, the dashboard's files are served, and an integration deployed through the API
 * syncs every record from a fake API on loopback. A preloaded hook records every module the processes
 * load from node_modules: none of tsx, esbuild, typescript, @temporalio/testing or any devDependency.
 * The worker loads the prebuilt workflow bundle (dist/workflow-bundle.js, untouched) instead of bundling.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/client/index.js';
import { freePort } from '../src/devstack/process.js';
import { sourceFiles } from './helpers/hostingFiles.js';
import { deployPagedApi, expectExact, FakeApi, finishedRun, trigger } from './kit/pagedApi.js';
import { productionEnv, startService, useEmptyDatabase, type ServiceProcess } from './helpers/serviceProcess.js';

const REPO = join(import.meta.dirname, '..');
const BUILT_MAIN = join(REPO, 'dist/src/main.js');
const BUNDLE = join(REPO, 'dist/workflow-bundle.js');
const BUILT_AT = join(REPO, 'dist/.built-at');
const SECRET_KEY = `sk_built_${Date.now()}_0123456789abcdef`;
const READY = /^ready\. Ctrl-C stops everything\./m;

/**
 * Preloaded with `node --import`: appends to MODULE_TRACE_FILE every file under node_modules that the
 * process loads, ES modules through a resolve hook (module.register), CommonJS through
 * Module._resolveFilename.
 */
const TRACE_HOOK = `
import { appendFileSync } from 'node:fs';
import Module, { register } from 'node:module';
const file = process.env.MODULE_TRACE_FILE;
const seen = new Set();
const note = (path) => {
  if (typeof path === 'string' && path.includes('/node_modules/') && !seen.has(path)) {
    seen.add(path);
    appendFileSync(file, path + '\\n');
  }
};
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (...args) {
  const resolved = resolveFilename.apply(this, args);
  note(resolved);
  return resolved;
};
register('data:text/javascript,' + encodeURIComponent(\`
import { appendFileSync } from 'node:fs';
let file;
const seen = new Set();
export function initialize(data) { file = data.file; }
export async function resolve(specifier, context, next) {
  const result = await next(specifier, context);
  if (result.url.includes('/node_modules/') && !seen.has(result.url)) {
    seen.add(result.url);
    appendFileSync(file, result.url + '\\\\n');
  }
  return result;
}\`), { data: { file } });
`;

/**
 * Sources changed since the last build started (dist/.built-at, scripts/build.ts), or without a built
 * module: the build would not be what the sources say.
 */
function staleBuild(): string[] {
  const builtAt = existsSync(BUILT_AT) ? statSync(BUILT_AT).mtimeMs : 0;
  return ['src', 'workflows', 'activities'].flatMap((folder) =>
    sourceFiles(folder)
      .filter((file) => !file.endsWith('.d.ts') && !file.includes('/dashboard/public/'))
      .filter((file) => {
        const built = join(REPO, 'dist', relative(REPO, file)).replace(/\.ts$/, '.js');
        return !existsSync(built) || statSync(file).mtimeMs > builtAt;
      })
      .map((file) => relative(REPO, file)),
  );
}

const fake = new FakeApi();
const scratch = mkdtempSync(join(tmpdir(), 'built-server-test-'));
const traceFile = join(scratch, 'modules.txt');
let service: ServiceProcess | undefined;
let port: number;
let pool: pg.Pool;
let bundleWritten: number;
let fakeStarted = false;

beforeAll(async () => {
  // A failure, never a skip: CI builds before the tests (.ci/run), a developer runs `npm run build`.
  if (!existsSync(BUILT_MAIN)) throw new Error(`${relative(REPO, BUILT_MAIN)} is missing: run \`npm run build\` first`);
  const stale = staleBuild();
  if (stale.length > 0) {
    throw new Error(
      `dist/ is older than ${stale.length} source file(s) (${stale.slice(0, 3).join(', ')}…): run \`npm run build\` first`,
    );
  }
  if (!existsSync(BUNDLE)) throw new Error(`${relative(REPO, BUNDLE)} is missing: run \`npm run build\` first`);
  bundleWritten = statSync(BUNDLE).mtimeMs;
  await fake.start();
  fakeStarted = true;
  const url = await useEmptyDatabase();
  pool = new pg.Pool({ connectionString: url, max: 2 });
  const hook = join(scratch, 'trace.mjs');
  writeFileSync(hook, TRACE_HOOK);
  writeFileSync(traceFile, '');
  port = await freePort();
  service = startService(
    productionEnv(url, {
      PORT: String(port),
      SERVICE_ROLE: 'all',
      // The worker child without its standby: one process less, the same code.
      SERVICE_WORKER_STANDBY: 'false',
      SERVICE_FIRST_SECRET_KEY: SECRET_KEY,
      SERVICE_PROVIDERS_FILE: fake.writeProvidersFile(scratch),
      SERVICE_OUTBOUND_ALLOW: new URL(fake.url).host,
      SERVICE_DATA_DIR: join(scratch, 'data'),
      SERVICE_THREAD_MARKS_DIR: join(scratch, 'marks'),
      // The worker's line about its bundle is at INFO.
      SERVICE_LOG_LEVEL: 'info',
      // Nothing of the test run's own node options (vitest's, a loader) reaches the server.
      NODE_OPTIONS: '',
      MODULE_TRACE_FILE: traceFile,
    }),
    { nodeArgs: ['--import', hook, BUILT_MAIN] },
  );
  await service.waitFor(READY, 180_000, 'the built server to be ready');
}, 300_000);

afterAll(async () => {
  if (service) {
    service.interrupt();
    await service.exited;
  }
  await pool?.end();
  if (fakeStarted) await fake.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

describe('the built server (node dist/src/main.js)', () => {
  it('serves health and the dashboard, deploys an integration and syncs it, with no tsx in its processes', async () => {
    const health = await fetch(`http://127.0.0.1:${port}/health`);
    expect(health.status).toBe(200);
    // The migrations ran from the build's copy of the SQL files.
    const migrated = await pool.query<{ n: string }>('SELECT count(*) AS n FROM records');
    expect(migrated.rows[0]?.n).toBe('0');
    // The dashboard's static files, read beside the built module.
    const dashboard = await fetch(`http://127.0.0.1:${port}/dashboard/`);
    expect(dashboard.status).toBe(200);
    expect(await dashboard.text()).toMatch(/<html/i);
    // Its chart library, resolved from node_modules by the built module.
    const chart = await fetch(`http://127.0.0.1:${port}/dashboard/vendor/uplot.esm.js`);
    expect(chart.status).toBe(200);
    expect((await chart.text()).length).toBeGreaterThan(1000);

    const api = createClient({ baseUrl: `http://127.0.0.1:${port}`, secretKey: SECRET_KEY });
    await deployPagedApi(api, ['built']);
    await trigger(api, 'built');
    await expectExact(fake, pool, 'built', await finishedRun(api, 'built', 120_000), 0);

    // The worker child loaded the prebuilt bundle: it did not bundle (which logs why, at INFO, and
    // writes the bundle anew).
    expect(service!.output()).not.toMatch(/not using the prebuilt workflow bundle/);
    expect(statSync(BUNDLE).mtimeMs).toBe(bundleWritten);
    service!.interrupt();
    expect(await service!.exited).toBe(0);

    const loaded = readFileSync(traceFile, 'utf8').split('\n').filter(Boolean);
    const packages = new Set(
      loaded.map((path) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path)?.[1]).filter(Boolean),
    );
    // The hook saw the server's own dependencies (in both processes: the worker's SDK is the child's).
    for (const name of ['express', 'pg', '@temporalio/client', '@temporalio/worker'])
      expect([...packages], name).toContain(name);
    const { devDependencies } = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>;
    };
    const unwanted = ['tsx', 'esbuild', 'typescript', '@temporalio/testing', ...Object.keys(devDependencies)];
    expect([...packages].filter((name) => unwanted.includes(name!))).toEqual([]);
  }, 240_000);
});
