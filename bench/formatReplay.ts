/**
 * Same records (issue 30, item 4): `npx tsx bench/formatReplay.ts <corpus-folder> [--only a,b] [--json <file>]`.
 *
 * A corpus folder holds integrations written for the field's de-facto product, one folder each with its
 * nango.yaml, scripts, helpers and recorded runs (`mocks/`, src/cli/formatRecordings.ts). Each is
 * converted with only the renames a migrating user makes (the config copied unchanged to
 * service-integrations/service.yaml, the folder under service-integrations/<id>/, `NangoSync` and
 * `NangoAction` renamed in the scripts), compiled with `service compile`, and every recorded run is run
 * on this service's runtime (the run workflow, the script's realm, svc) against its recorded responses:
 * a run reproduces when it stores exactly the recorded records (every batchSave and batchDelete, in
 * order) or answers the recorded output. The limit is every recorded run; the bench prints how many
 * reproduce, the ratio, and why the others do not.
 *
 * When a project does not compile, the scripts with errors are left out and it is compiled once more:
 * their runs count as not compiled, the others still run. Uses TEMPORAL_ADDRESS, else a dev server.
 */
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { parseDocument } from 'yaml';
import { bundle, compileProject, type CompileResult } from '../src/cli/compile.js';
import { recordedRuns, type RecordedRun } from '../src/cli/formatRecordings.js';
import { generateProject } from '../src/cli/generate.js';
import { scriptKey } from '../src/cli/localRun.js';
import { startLocalTemporal } from '../src/cli/localTools.js';
import { FOLDER, projectPaths, type ScriptKind } from '../src/cli/project.js';
import { runRecordedRun } from '../src/cli/scriptTests.js';
import type { CliIo } from '../src/cli/io.js';

/**
 * The recorded runs of one imported integration, replayed: the check bench/migrationCorpus.ts takes as
 * its `replay` (its ImportedIntegration: the project after `service import`, the scripts and which of
 * them compiled). A run whose script did not compile counts, as not reproduced.
 */
export function replayRecordedRuns(temporal: Awaited<ReturnType<typeof startLocalTemporal>>) {
  return async (integration: {
    root: string;
    scripts: readonly { integration: string; kind: ScriptKind; name: string; file: string }[];
    compiled: ReadonlySet<string>;
  }): Promise<{ total: number; reproduced: number; failures: string[] }> => {
    const paths = projectPaths(integration.root);
    const { config } = await generateProject({ root: integration.root, write: false });
    const outcome = { total: 0, reproduced: 0, failures: [] as string[] };
    if (config === null) return outcome;
    for (const id of new Set(integration.scripts.map((script) => script.integration))) {
      const bundles = new Map<string, string>();
      for (const script of integration.scripts.filter((each) => each.integration === id)) {
        if (!integration.compiled.has(script.file)) continue;
        const bundled = await bundle(paths, script);
        if ('code' in bundled) bundles.set(scriptKey(script.kind, script.name), bundled.code);
      }
      const integrationFolder = join(paths.folder, id);
      for (const run of recordedRuns(config, id, integrationFolder)) {
        outcome.total++;
        if (!bundles.has(scriptKey(run.kind, run.name))) {
          outcome.failures.push(`${id}/${run.name}: its script does not compile`);
          continue;
        }
        try {
          const { differences } = await runRecordedRun({ config, bundles, run, integrationFolder, temporal });
          if (differences.length === 0) outcome.reproduced++;
          else outcome.failures.push(`${id}/${run.name}: ${differences.join('; ').slice(0, 300)}`);
        } catch (error) {
          outcome.failures.push(
            `${id}/${run.name}: ${(error instanceof Error ? error.message : String(error)).slice(0, 300)}`,
          );
        }
      }
    }
    return outcome;
  };
}

/** The renames of a migrating user, in a script's text. */
export function renameScript(source: string): string {
  return source.replace(/\bNangoSync\b/g, 'ServiceSync').replace(/\bNangoAction\b/g, 'ServiceAction');
}

function renameTree(folder: string): void {
  for (const entry of readdirSync(folder, { withFileTypes: true })) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'mocks' && entry.name !== 'node_modules') renameTree(path);
    } else if (entry.name.endsWith('.ts')) {
      writeFileSync(path, renameScript(readFileSync(path, 'utf8')));
    }
  }
}

/**
 * An integration of the corpus as a project of this service: the config unchanged, the folder under
 * each integration id it declares. Returns the ids.
 */
export function convertIntegration(source: string, root: string): string[] {
  const configText = readFileSync(join(source, 'nango.yaml'), 'utf8');
  const folder = join(root, FOLDER);
  mkdirSync(folder, { recursive: true });
  writeFileSync(join(folder, 'service.yaml'), configText);
  const integrations = parseDocument(configText).toJS() as { integrations?: Record<string, unknown> } | null;
  const ids = Object.keys(integrations?.integrations ?? {});
  for (const id of ids) {
    cpSync(source, join(folder, id), { recursive: true, filter: (path) => !path.endsWith('nango.yaml') });
    renameTree(join(folder, id));
  }
  return ids;
}

/** Leaves out of service.yaml the scripts whose own files have errors; answers the names left out. */
function dropBroken(root: string, compiled: CompileResult): string[] {
  const paths = projectPaths(root);
  const broken = new Set(
    compiled.problems
      .filter((problem) => problem.severity === 'error')
      .map((problem) => /^service-integrations\/([^/]+)\/(syncs|actions)\/([^/]+)\.ts$/.exec(problem.file))
      .filter((match): match is RegExpExecArray => match !== null)
      .map((match) => `${match[1]}/${match[2]}/${match[3]}`),
  );
  if (broken.size === 0) return [];
  const document = parseDocument(readFileSync(paths.configFile, 'utf8'));
  for (const key of broken) {
    const [integration, kind, name] = key.split('/');
    document.deleteIn(['integrations', integration, kind, name]);
  }
  writeFileSync(paths.configFile, document.toString());
  return [...broken];
}

const quiet: CliIo = {
  out: () => undefined,
  err: (text: string) => void process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
};

interface Outcome {
  integration: string;
  script: string;
  kind: 'sync' | 'action';
  status: 'reproduced' | 'differs' | 'failed' | 'not_compiled';
  why?: string;
}

function readBundles(root: string, integration: string): Map<string, string> {
  const { buildDir } = projectPaths(root);
  const bundles = new Map<string, string>();
  for (const kind of ['syncs', 'actions']) {
    const folder = join(buildDir, integration, kind);
    if (!existsSync(folder)) continue;
    for (const file of readdirSync(folder).filter((entry) => entry.endsWith('.cjs'))) {
      bundles.set(`${kind}/${file.slice(0, -4)}`, readFileSync(join(folder, file), 'utf8'));
    }
  }
  return bundles;
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const flag = (name: string): string | undefined => {
    const at = args.indexOf(name);
    return at >= 0 ? args[at + 1] : undefined;
  };
  const corpus = args.find(
    (arg, index) => !arg.startsWith('--') && !['--only', '--json'].includes(args[index - 1] ?? ''),
  );
  if (corpus === undefined || !existsSync(corpus)) {
    console.error('usage: npx tsx bench/formatReplay.ts <corpus-folder> [--only integration,…] [--json <file>]');
    process.exit(2);
  }
  const only = flag('--only')?.split(',');
  const jsonOut = flag('--json');

  const folders = readdirSync(corpus, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && existsSync(join(corpus, entry.name, 'nango.yaml')))
    .map((entry) => entry.name)
    .filter((name) => existsSync(join(corpus, name, 'mocks')))
    .filter((name) => only === undefined || only.includes(name))
    .sort();

  console.log(`same records: ${folders.length} integrations with recorded runs in ${resolve(corpus)}`);
  const started = Date.now();
  const temporal = await startLocalTemporal(quiet);
  const outcomes: Outcome[] = [];
  try {
    for (const name of folders) {
      const root = mkdtempSync(join(tmpdir(), 'format-replay-'));
      try {
        const ids = convertIntegration(join(corpus, name), root);
        let compiled = await compileProject({ root });
        let dropped: string[] = [];
        if (!compiled.ok && compiled.manifest === null) {
          dropped = dropBroken(root, compiled);
          if (dropped.length > 0) compiled = await compileProject({ root });
        }
        const config = compiled.manifest?.config;
        for (const id of ids) {
          const integrationFolder = join(root, FOLDER, id);
          // Runs are listed from the config as written, so that a script left out still counts.
          const original = parseDocument(readFileSync(join(corpus, name, 'nango.yaml'), 'utf8'));
          const declared = original.toJS() as { integrations?: Record<string, { syncs?: object; actions?: object }> };
          const scripts = declared.integrations?.[id] ?? {};
          const runs: RecordedRun[] = config ? recordedRuns(config, id, integrationFolder) : [];
          const ran = new Set(runs.map((run) => `${run.kind}:${run.name}`));
          // Recorded runs of scripts that did not compile (or whose config did not load).
          for (const [kind, names] of [
            ['sync', Object.keys(scripts.syncs ?? {})],
            ['action', Object.keys(scripts.actions ?? {})],
          ] as const) {
            for (const script of names) {
              if (ran.has(`${kind}:${script}`)) continue;
              const recorded =
                kind === 'sync'
                  ? existsSync(join(integrationFolder, 'mocks', script)) &&
                    readdirSync(join(integrationFolder, 'mocks', script)).some((model) =>
                      existsSync(join(integrationFolder, 'mocks', script, model, 'batchSave.json')),
                    )
                  : existsSync(join(integrationFolder, 'mocks', script, 'output.json'));
              if (!recorded) continue;
              const problem = compiled.problems.find(
                (p) => p.severity === 'error' && (p.file.includes(`/${script}.ts`) || !p.file.includes('/syncs/')),
              );
              outcomes.push({
                integration: id,
                script,
                kind,
                status: 'not_compiled',
                why: config
                  ? `${problem?.code ?? 'compile'}: ${problem?.message.split('\n')[0] ?? 'left out'}`
                  : `config: ${compiled.problems.find((p) => p.severity === 'error')?.code ?? 'invalid'}`,
              });
            }
          }
          for (const run of runs) {
            try {
              const { differences } = await runRecordedRun({
                config: config!,
                bundles: readBundles(root, id),
                run,
                integrationFolder,
                temporal,
              });
              outcomes.push({
                integration: id,
                script: run.name,
                kind: run.kind,
                status:
                  differences.length === 0
                    ? 'reproduced'
                    : differences[0]!.startsWith('the run failed')
                      ? 'failed'
                      : 'differs',
                ...(differences.length === 0 ? {} : { why: differences.join('; ').slice(0, 300) }),
              });
            } catch (error) {
              outcomes.push({
                integration: id,
                script: run.name,
                kind: run.kind,
                status: 'failed',
                why: (error instanceof Error ? error.message : String(error)).slice(0, 300),
              });
            }
          }
        }
        const mine = outcomes.filter((outcome) => ids.includes(outcome.integration));
        console.log(
          `  ${name}: ${mine.filter((o) => o.status === 'reproduced').length}/${mine.length} reproduced` +
            (dropped.length > 0 ? ` (left out, not compiling: ${dropped.join(', ')})` : '') +
            (compiled.manifest === null ? ' (project does not compile)' : ''),
        );
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    }
  } finally {
    await temporal.stop();
  }

  const count = (status: Outcome['status']): number => outcomes.filter((outcome) => outcome.status === status).length;
  const total = outcomes.length;
  const reproduced = count('reproduced');
  console.log(
    `\nrecorded runs: ${total}; reproduced: ${reproduced} (${total === 0 ? 0 : ((100 * reproduced) / total).toFixed(1)} %, ratio ${total === 0 ? 0 : (reproduced / total).toFixed(3)} of the limit, every recorded run); ` +
      `differ: ${count('differs')}; failed: ${count('failed')}; did not compile: ${count('not_compiled')}; ${((Date.now() - started) / 1000).toFixed(0)} s`,
  );
  const reasons = new Map<string, number>();
  for (const outcome of outcomes.filter((o) => o.status !== 'reproduced')) {
    const key = `${outcome.status}: ${(outcome.why ?? '').replace(/\d+/g, 'N').slice(0, 110)}`;
    reasons.set(key, (reasons.get(key) ?? 0) + 1);
  }
  for (const [reason, n] of [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 25))
    console.log(`  ${String(n).padStart(3)} × ${reason}`);
  if (jsonOut) {
    writeFileSync(
      jsonOut,
      `${JSON.stringify({ corpus: relative(process.cwd(), resolve(corpus)), total, reproduced, outcomes }, null, 2)}\n`,
    );
  }
}

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname);
if (isMain) await main();
