/**
 * `service test`: every fixture under service-integrations/tests/ (recorded by
 * `service dryrun --save-responses`) runs its script with requests answered from the fixture, and
 * what the run saved is compared with snapshot.json beside it (`--update` writes it instead).
 */
import { existsSync } from 'node:fs';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import type { CliIo } from './io.js';
import { runLocally, type LocalRunResult } from './localRun.js';
import {
  FIXTURE_FILE,
  SNAPSHOT_FILE,
  fixtureBackend,
  loadLocalBuild,
  startLocalTemporal,
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

export async function runScriptTests(options: { root: string; update: boolean }, io: CliIo): Promise<number> {
  const testsDir = join(options.root, FOLDER, TESTS_FOLDER);
  const fixtures = await findFixtures(testsDir);
  if (fixtures.length === 0) {
    io.err(
      `service test: no ${FIXTURE_FILE} under ${relative(io.cwd, testsDir) || '.'}; record one with 'service dryrun <script> <connection-id> --save-responses ${FOLDER}/${TESTS_FOLDER}/<integration>/<script>/<case>'\n`,
    );
    return 1;
  }
  const build = await loadLocalBuild(options.root, io);
  if (build === null) return 1;
  const temporal = await startLocalTemporal(io);
  let failed = 0;
  try {
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
  io.out(`\n${fixtures.length - failed} passed, ${failed} failed\n`);
  return failed === 0 ? 0 : 1;
}
