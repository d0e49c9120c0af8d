/**
 * The reliability suite in one command: `npx tsx test/chaos/run.ts [--short] [--no-load] [--connections N]`.
 *
 * Runs every test/chaos/*.test.ts on the real stack (full sizes unless --short: 200,000 records and 10
 * worker kills in the faults part, longer fuzzing, bigger flaky sync), then bench/load.ts (1,000
 * connections unless --connections), and writes the figures of this run into docs/reliability.md
 * between its figures markers. Exits non-zero when a part failed; the figures are written anyway.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const REPORT = join(ROOT, 'docs', 'reliability.md');
const START = '<!-- figures:start (written by test/chaos/run.ts) -->';
const END = '<!-- figures:end -->';

const { values } = parseArgs({
  options: {
    short: { type: 'boolean', default: false },
    'no-load': { type: 'boolean', default: false },
    connections: { type: 'string', default: '1000' },
  },
});
const results = mkdtempSync(join(tmpdir(), 'chaos-results-'));
const env = { ...process.env, CHAOS_RESULTS_DIR: results, CHAOS_FULL: values.short ? '0' : '1' };
const began = new Date();

const tests = spawnSync(
  'npx',
  [
    '--no-install',
    'vitest',
    'run',
    '--config',
    'test/chaos/vitest.config.ts',
    '--reporter=default',
    '--reporter=json',
    `--outputFile.json=${join(results, 'vitest.json')}`,
  ],
  { cwd: ROOT, env, stdio: 'inherit' },
);
let load = { status: 0 as number | null, skipped: values['no-load'] };
if (!values['no-load']) {
  const run = spawnSync('npx', ['--no-install', 'tsx', 'bench/load.ts', '--connections', values.connections], {
    cwd: ROOT,
    env,
    stdio: 'inherit',
  });
  load = { status: run.status, skipped: false };
}

interface VitestJson {
  testResults: { name: string; assertionResults: { fullName: string; status: string; duration?: number }[] }[];
}
const outcomes: string[] = [];
if (existsSync(join(results, 'vitest.json'))) {
  const report = JSON.parse(readFileSync(join(results, 'vitest.json'), 'utf8')) as VitestJson;
  for (const file of report.testResults) {
    for (const test of file.assertionResults) {
      const seconds = test.duration === undefined ? '' : ` (${Math.round(test.duration / 1000)} s)`;
      outcomes.push(
        `| ${test.status === 'passed' ? 'pass' : `**${test.status.toUpperCase()}**`} | ${test.fullName}${seconds} |`,
      );
    }
  }
}
const parts = readdirSync(results)
  .filter((name) => name.endsWith('.json') && name !== 'vitest.json')
  .sort()
  .map(
    (name) =>
      JSON.parse(readFileSync(join(results, name), 'utf8')) as { part: string; figures: Record<string, unknown> },
  );

const figures = [
  START,
  `Last run: ${began.toISOString().slice(0, 16).replace('T', ' ')} UTC, ${values.short ? '--short sizes' : 'full sizes'}` +
    `${load.skipped ? ', load skipped' : `, load at ${values.connections} connections`}; ` +
    `tests ${tests.status === 0 ? 'passed' : 'FAILED'}${load.skipped ? '' : `, load ${load.status === 0 ? 'completed' : 'FAILED'}`}.`,
  '',
  '| Result | Test |',
  '| --- | --- |',
  ...outcomes,
  '',
  ...parts.flatMap((part) => [
    `**${part.part}**`,
    '',
    '| Figure | Value |',
    '| --- | --- |',
    ...Object.entries(part.figures).map(([name, value]) => `| ${name} | ${String(value).replace(/\|/g, '\\|')} |`),
    '',
  ]),
  END,
].join('\n');

const current = existsSync(REPORT)
  ? readFileSync(REPORT, 'utf8')
  : `# Reliability\n\n## Figures of the last run\n\n${START}\n${END}\n`;
const at = current.indexOf(START);
const end = current.indexOf(END);
const next =
  at >= 0 && end > at
    ? `${current.slice(0, at)}${figures}${current.slice(end + END.length)}`
    : `${current}\n${figures}\n`;
writeFileSync(REPORT, next);
rmSync(results, { recursive: true, force: true });
console.log(`figures written to ${REPORT}`);
process.exit(tests.status === 0 && (load.skipped || load.status === 0) ? 0 : 1);
