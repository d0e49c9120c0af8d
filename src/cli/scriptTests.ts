/**
 * `service test`: every fixture under service-integrations/tests/ (recorded by
 * `service dryrun --save-responses`) runs its script with requests answered from the fixture, and
 * what the run saved is compared with snapshot.json beside it (`--update` writes it instead).
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import type { CliIo } from './io.js';
import { differences, MOCKS_FOLDER, recordedBackend, recordedRuns, type RecordedRun } from './formatRecordings.js';
import { runLocally, type LocalRunResult } from './localRun.js';
import {
  FIXTURE_FILE,
  SNAPSHOT_FILE,
  fixtureBackend,
  loadLocalBuild,
  startLocalTemporal,
  type LocalBuild,
  type ScriptFixture,
} from './localTools.js';
import { FOLDER } from './project.js';

export const TESTS_FOLDER = 'tests';

/** What a test compares: everything the run would have changed or answered. */
export function snapshotOf(result: LocalRunResult): Record<string, unknown> {
  return {
    records: result.records,
    deleted: result.deleted,
    metadataWrites: result.metadataWrites,
    ...(result.output === undefined ? {} : { output: result.output }),
    ...(result.failure ? { failure: result.failure } : {}),
    invalid: result.invalid,
  };
}

async function findFixtures(dir: string): Promise<string[]> {
  if (!existsSync(dir)) return [];
  const found: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) found.push(...(await findFixtures(path)));
    else if (entry.name === FIXTURE_FILE) found.push(path);
  }
  return found.sort();
}

function parseFixture(text: string, file: string): ScriptFixture {
  const parsed = JSON.parse(text) as Partial<ScriptFixture>;
  const problems: string[] = [];
  if (parsed.version !== 1) problems.push('version must be 1');
  if (typeof parsed.integration !== 'string') problems.push('integration is missing');
  if (parsed.kind !== 'sync' && parsed.kind !== 'action') problems.push("kind must be 'sync' or 'action'");
  if (typeof parsed.name !== 'string') problems.push('name is missing');
  if (!Array.isArray(parsed.exchanges)) problems.push('exchanges must be a list');
  if (problems.length > 0) throw new Error(`${file}: ${problems.join('; ')}`);
  return {
    connectionId: 'test-connection',
    lastSyncDate: null,
    input: null,
    metadata: {},
    connection: {},
    environmentVariables: [],
    ...parsed,
  } as ScriptFixture;
}

/** The first lines where two JSON texts differ, as `- expected` / `+ received`. */
export function firstDifference(expected: string, received: string, context = 3): string {
  const a = expected.split('\n');
  const b = received.split('\n');
  let index = 0;
  while (index < a.length && index < b.length && a[index] === b[index]) index++;
  const lines = [`  at line ${index + 1} of ${SNAPSHOT_FILE}:`];
  for (const line of a.slice(index, index + context)) lines.push(`  - ${line}`);
  for (const line of b.slice(index, index + context)) lines.push(`  + ${line}`);
  return lines.join('\n');
}

/** The integration folders that hold recordings of the field's format (`<integration>/mocks`). */
async function recordingFolders(root: string): Promise<string[]> {
  const folder = join(root, FOLDER);
  if (!existsSync(folder)) return [];
  const entries = await readdir(folder, { withFileTypes: true });
  return entries
    .filter((entry) => entry.isDirectory() && existsSync(join(folder, entry.name, MOCKS_FOLDER)))
    .map((entry) => entry.name)
    .sort();
}

/** One recorded run of the field's format, run locally against its recordings and compared with them. */
export async function runRecordedRun(options: {
  config: LocalBuild['config'];
  bundles: ReadonlyMap<string, string>;
  run: RecordedRun;
  integrationFolder: string;
  temporal: Awaited<ReturnType<typeof startLocalTemporal>>;
}): Promise<{ result: LocalRunResult; differences: string[] }> {
  const { run } = options;
  const result = await runLocally({
    config: options.config,
    integration: run.integration,
    kind: run.kind,
    name: run.name,
    bundles: options.bundles,
    connectionId: 'recorded',
    backend: recordedBackend({
      integrationFolder: options.integrationFolder,
      integration: run.integration,
      script: run.name,
    }),
    input: run.input,
    temporal: options.temporal.server,
    workflowBundle: options.temporal.workflowBundle,
  });
  return { result, differences: differences(run, result) };
}

export async function runScriptTests(options: { root: string; update: boolean }, io: CliIo): Promise<number> {
  const testsDir = join(options.root, FOLDER, TESTS_FOLDER);
  const fixtures = await findFixtures(testsDir);
  const recorded = await recordingFolders(options.root);
  if (fixtures.length === 0 && recorded.length === 0) {
    io.err(
      `service test: no ${FIXTURE_FILE} under ${relative(io.cwd, testsDir) || '.'} and no recordings in ${FOLDER}/<integration>/${MOCKS_FOLDER}; record one with 'service dryrun <script> <connection-id> --save-responses ${FOLDER}/${TESTS_FOLDER}/<integration>/<script>/<case>'\n`,
    );
    return 1;
  }
  const build = await loadLocalBuild(options.root, io);
  if (build === null) return 1;
  const temporal = await startLocalTemporal(io);
  let failed = 0;
  let total = fixtures.length;
  try {
    // Recordings in the field's format: what each run stored or answered, compared with the recording.
    for (const integration of recorded) {
      const integrationFolder = join(options.root, FOLDER, integration);
      for (const run of recordedRuns(build.config, integration, integrationFolder)) {
        total++;
        const name = `${FOLDER}/${integration}/${MOCKS_FOLDER}/${run.name}`;
        try {
          const outcome = await runRecordedRun({
            config: build.config,
            bundles: build.bundles(integration),
            run,
            integrationFolder,
            temporal,
          });
          if (outcome.differences.length === 0) io.out(`✓ ${name}\n`);
          else {
            failed++;
            io.err(`✗ ${name}: ${outcome.differences.join('; ')}\n`);
          }
        } catch (error) {
          failed++;
          io.err(`✗ ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
        }
      }
    }
    for (const file of fixtures) {
      const name = relative(options.root, dirname(file));
      let fixture: ScriptFixture;
      try {
        fixture = parseFixture(await readFile(file, 'utf8'), relative(options.root, file));
      } catch (error) {
        io.err(`✗ ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
        failed++;
        continue;
      }
      let result: LocalRunResult;
      try {
        result = await runLocally({
          config: build.config,
          integration: fixture.integration,
          kind: fixture.kind,
          name: fixture.name,
          bundles: build.bundles(fixture.integration),
          connectionId: fixture.connectionId,
          backend: fixtureBackend(fixture),
          lastSyncDate: fixture.lastSyncDate ?? undefined,
          input: fixture.input ?? undefined,
          temporal: temporal.server,
          workflowBundle: temporal.workflowBundle,
        });
      } catch (error) {
        io.err(`✗ ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
        failed++;
        continue;
      }
      const received = `${JSON.stringify(snapshotOf(result), null, 2)}\n`;
      const snapshotFile = join(dirname(file), SNAPSHOT_FILE);
      if (options.update) {
        await writeFile(snapshotFile, received);
        io.out(`✓ ${name}: wrote ${SNAPSHOT_FILE}\n`);
        continue;
      }
      if (!existsSync(snapshotFile)) {
        io.err(`✗ ${name}: no ${SNAPSHOT_FILE}; run 'service test --update' to record it\n`);
        failed++;
        continue;
      }
      const expected = await readFile(snapshotFile, 'utf8');
      if (JSON.stringify(JSON.parse(expected)) === JSON.stringify(JSON.parse(received))) {
        io.out(`✓ ${name}\n`);
      } else {
        io.err(`✗ ${name}: the run differs from ${SNAPSHOT_FILE}\n${firstDifference(expected, received)}\n`);
        failed++;
      }
    }
  } finally {
    await temporal.stop();
  }
  io.out(`\n${total - failed} passed, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}
