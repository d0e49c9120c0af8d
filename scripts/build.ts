/**
 * `npm run build`: the server as plain JavaScript, so that production runs `node dist/src/main.js`
 * (`npm run serve`) instead of TypeScript through tsx (docs/operations.md, "Processes").
 *
 *   1. tsc -p tsconfig.build.json: src/, workflows/ and activities/ (tests left out) to dist/src/…,
 *      dist/workflows/…, dist/activities/…, the same folders as the sources, incrementally (only what
 *      changed since the last build is emitted again).
 *   2. Every other file of those folders (SQL migrations, the dashboard's static files, the providers
 *      catalog, the failure converter) copied beside the built modules, which read them relative to
 *      their own path (`import.meta.url`).
 *      dist/.built-at then bears the time the build started: a source changed after it is newer than the
 *      build (test/builtServer.test.ts checks; tsc's incremental build leaves unchanged modules' files
 *      as they were, so their own times say nothing).
 *   3. The workflow bundle (dist/workflow-bundle.js), when missing or stale: a worker then loads it instead
 *      of bundling at start (`npm run bundle:workflows -- --if-stale`).
 *
 *   npm run build
 *   npm run build -- --no-bundle   # the JavaScript only
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, utimesSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { PACKAGE_ROOT } from '../src/packageRoot.js';

const { values } = parseArgs({
  options: {
    'no-bundle': { type: 'boolean', default: false },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  process.stdout.write('usage: npm run build -- [--no-bundle]\n  --no-bundle  skip the workflow bundle\n');
  process.exit(0);
}

/** The folders the build compiles, as tsconfig.build.json includes them. */
const SOURCE_FOLDERS = ['src', 'workflows', 'activities'];
const OUT = join(PACKAGE_ROOT, 'dist');
/** Its modification time is when the last complete build started. */
const BUILT_AT_FILE = join(OUT, '.built-at');
const started = new Date();

function run(step: string, command: string, args: string[]): void {
  const started = Date.now();
  const result = spawnSync(command, args, { cwd: PACKAGE_ROOT, stdio: 'inherit' });
  if (result.status !== 0) {
    process.stderr.write(`build failed at ${step} (${command} ${args.join(' ')} exited ${result.status})\n`);
    process.exit(1);
  }
  process.stdout.write(`${step}: ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

/** Files of `folder` that tsc does not emit: everything but TypeScript (tests, declarations, sources). */
function assetsOf(folder: string): string[] {
  return readdirSync(join(PACKAGE_ROOT, folder), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile() && !/\.(ts|mts|cts)$/.test(entry.name))
    .map((entry) => relative(PACKAGE_ROOT, join(entry.parentPath, entry.name)));
}

run('compile (tsc -p tsconfig.build.json)', process.execPath, [
  join(PACKAGE_ROOT, 'node_modules/typescript/bin/tsc'),
  '-p',
  'tsconfig.build.json',
]);

const assets = SOURCE_FOLDERS.flatMap(assetsOf);
let copied = 0;
for (const asset of assets) {
  const source = join(PACKAGE_ROOT, asset);
  const target = join(OUT, asset);
  // An unchanged copy is left alone: a server running from dist/ meanwhile never reads half a file.
  if (existsSync(target) && readFileSync(target).equals(readFileSync(source))) continue;
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(source, target);
  copied++;
}
process.stdout.write(
  `copied ${copied} of ${assets.length} files kept beside the modules (SQL migrations, dashboard, catalogs)\n`,
);
writeFileSync(BUILT_AT_FILE, `${started.toISOString()}\n`);
utimesSync(BUILT_AT_FILE, started, started);

if (!values['no-bundle']) {
  run('workflow bundle', process.execPath, [
    '--import',
    'tsx',
    join(PACKAGE_ROOT, 'scripts/bundleWorkflows.ts'),
    '--if-stale',
  ]);
}
process.stdout.write(`built: node ${relative(process.cwd(), join(OUT, 'src/main.js'))}\n`);
