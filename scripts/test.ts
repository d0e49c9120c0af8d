/**
 * The project's test command (`npm test`): type check, lint, the dependency rules
 * (.dependency-cruiser.cjs), format, bundle the workflows (a Node import in workflow code fails here),
 * build dist/ (`npm run build`, which test/builtServer.test.ts runs), then the tests that need no server (vitest.unit.config.ts, no stack), then every other test on the
 * real Temporal server and Postgres (vitest.config.ts). Stops at the first failing phase and exits
 * non-zero. Arguments after `--` go to vitest (a file, `-t name`, …); each configuration runs only when
 * they select one of its files, and selecting none is a failure.
 */
import { spawnSync } from 'node:child_process';
import { bundleWorkflows } from '../src/temporal/worker.js';

const vitestArgs = process.argv.slice(2);
const quick = process.env['TEST_SKIP_CHECKS'] === '1';

function phase(name: string, body: () => boolean | Promise<boolean>): Promise<void> {
  const started = Date.now();
  process.stdout.write(`\n== ${name}\n`);
  return Promise.resolve(body()).then((ok) => {
    const seconds = ((Date.now() - started) / 1000).toFixed(1);
    if (!ok) {
      process.stdout.write(`== ${name}: FAILED after ${seconds} s\n`);
      process.exit(1);
    }
    process.stdout.write(`== ${name}: ok in ${seconds} s\n`);
  });
}

function npx(args: string[]): boolean {
  const result = spawnSync('npx', ['--no-install', ...args], { stdio: 'inherit' });
  return result.status === 0;
}

if (!quick) {
  await phase('type check (tsc)', () => npx(['tsc', '--noEmit', '-p', 'tsconfig.json']));
  // The dashboard's browser modules: JavaScript served as written, checked through JSDoc types, the API's
  // among them written again from the routes first (scripts/dashboardApiTypes.ts).
  await phase(
    'type check the dashboard (tsc, checkJs)',
    () =>
      npx(['tsx', 'scripts/dashboardApiTypes.ts']) &&
      npx(['tsc', '--noEmit', '-p', 'src/dashboard/public/tsconfig.json']),
  );
  await phase('lint (eslint)', () => npx(['eslint', '--max-warnings', '0', '.']));
  await phase('dependencies (no import cycle, no two folders importing each other: .dependency-cruiser.cjs)', () =>
    npx(['tsx', 'scripts/checkDependencies.ts']),
  );
  await phase('format (prettier --check)', () => npx(['prettier', '--check', '--log-level', 'warn', '.']));
  await phase('bundle workflows (bundleWorkflowCode)', async () => {
    try {
      const bundle = await bundleWorkflows();
      process.stdout.write(`workflow bundle: ${(bundle.code.length / 1024).toFixed(0)} KiB\n`);
      return true;
    } catch (error) {
      process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
      return false;
    }
  });
  // test/builtServer.test.ts runs the build: it is brought up to date here (incremental, seconds when
  // little changed). Under TEST_SKIP_CHECKS=1 that test says when the build is stale.
  await phase('build (npm run build: the server as JavaScript in dist/)', () =>
    npx(['tsx', 'scripts/build.ts', '--no-bundle']),
  );
}

const UNIT_CONFIG = 'vitest.unit.config.ts';
const STACK_CONFIG = 'vitest.config.ts';

/** Whether `vitestArgs` select a test file of `config` (`vitest list` starts no server). */
function selectsFilesOf(config: string): boolean {
  const result = spawnSync(
    'npx',
    ['--no-install', 'vitest', 'list', '--filesOnly', '--config', config, ...vitestArgs],
    {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  if (result.status !== 0) {
    process.stderr.write(result.stdout);
    process.stderr.write(`vitest list --config ${config} ${vitestArgs.join(' ')} failed\n`);
    process.exit(1);
  }
  return result.stdout.split('\n').some((line) => line.trim().endsWith('.test.ts'));
}

const runUnit = vitestArgs.length === 0 || selectsFilesOf(UNIT_CONFIG);
const runStack = vitestArgs.length === 0 || selectsFilesOf(STACK_CONFIG);
if (!runUnit && !runStack) {
  process.stderr.write(`no test file matches ${vitestArgs.join(' ')} in ${UNIT_CONFIG} or ${STACK_CONFIG}\n`);
  process.exit(1);
}
if (runUnit) {
  await phase(`unit tests (vitest, ${UNIT_CONFIG}, no servers)`, () =>
    npx(['vitest', 'run', '--config', UNIT_CONFIG, ...vitestArgs]),
  );
}
if (runStack) {
  await phase(`tests (vitest, ${STACK_CONFIG}, real Temporal and Postgres)`, () =>
    npx(['vitest', 'run', '--config', STACK_CONFIG, ...vitestArgs]),
  );
}
