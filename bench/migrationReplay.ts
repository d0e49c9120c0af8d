/**
 * Recorded runs after a migration (issue 30, item 4). `npx tsx bench/migrationReplay.ts <folder> [--json <file>]`.
 *
 * bench/migrationCorpus.ts imports each integration of <folder> as a migrating user would (`service
 * import`) and compiles it; here its replay hook is bench/formatReplay.ts's replayRecordedRuns, so each
 * recorded run of the integration's `mocks/` replays on the runtime (every request answered from its
 * recording) and passes only when it stores exactly the recorded records or answers the recorded output.
 * Prints how many recorded runs reproduce (goal ≥ 80 %) and the others by cause. One throw-away
 * Temporal dev server on loopback; no request leaves the machine.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { startLocalTemporal } from '../src/cli/localTools.js';
import type { CliIo } from '../src/cli/io.js';
import { replayRecordedRuns } from './formatReplay.js';
import { measureCorpus } from './migrationCorpus.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { json: { type: 'string' } } });
const folder = positionals[0];
if (folder === undefined) {
  console.error('usage: npx tsx bench/migrationReplay.ts <folder> [--json <file>]');
  process.exit(2);
}
const io: CliIo = {
  out: () => undefined,
  err: (text: string) => void process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
};
const started = Date.now();
const temporal = await startLocalTemporal(io);
try {
  const result = await measureCorpus([folder], { replay: replayRecordedRuns(temporal), verbose: true });
  const runs = result.runs ?? { total: 0, reproduced: 0, failures: [] };
  console.log(
    `configs valid ${result.configsValid}/${result.integrations}; scripts compile ${result.scriptsCompiled}/${result.scripts}`,
  );
  console.log(
    `recorded runs: ${runs.reproduced} of ${runs.total} reproduce (${((100 * runs.reproduced) / Math.max(1, runs.total)).toFixed(1)} %, goal ≥ 80 %), ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  const causes = new Map<string, number>();
  for (const line of runs.failures) {
    // "<integration>: <id>/<script>: <why>": counted by why, numbers folded.
    const why = line
      .replace(/^[^:]+: [^:]+: /, '')
      .replace(/: [\w-]+: svc\./, ': svc.')
      .replace(/\d+/g, 'N')
      .slice(0, 120);
    causes.set(why, (causes.get(why) ?? 0) + 1);
  }
  for (const [why, count] of [...causes].sort((a, b) => b[1] - a[1]))
    console.log(`  ${String(count).padStart(4)} × ${why}`);
  for (const line of runs.failures) console.log(`    ${line.slice(0, 200)}`);
  if (values.json !== undefined) {
    writeFileSync(
      values.json,
      `${JSON.stringify({ ...result, compileCauses: Object.fromEntries(result.compileCauses) }, null, 2)}\n`,
    );
  }
} finally {
  await temporal.stop();
}
