/**
 * Migration corpus (issue 30). `npx tsx bench/migrationCorpus.ts <folder> [<folder> …] [--json <file>] [--verbose]`.
 *
 * Takes integrations written in the de-facto format and measures what a migrating user gets from
 * `service import`: how many configurations are valid, how many scripts compile (type-check with
 * the scripts' compiler options, the script rules of `service compile`, and the esbuild bundle), and,
 * when a replay check is plugged in (`measureCorpus(…, { replay })`), how many recorded runs reproduce.
 * Goals: ≥ 90 % configs valid, ≥ 90 % scripts compile, ≥ 80 % recorded runs reproduce.
 *
 * A <folder> is either one project (it holds nango.yaml: nango-integrations/) or a collection of
 * integrations each with its own nango.yaml (the layout of the format's public templates). Each
 * integration is imported on its own into a temporary folder outside the project: its nango.yaml,
 * then its folder under its integration id. Two things of the templates repository are undone first,
 * as its own tooling does: the integration id `${PWD}` is the folder's name, and a file whose whole
 * content is a relative path to another file or folder of the collection (a symbolic link stored as
 * text) is that file or folder.
 *
 * A script compiles when nothing refuses it: no script-rule problem in it, no type error in it, in
 * models.ts or in any local file it imports, and esbuild bundles it. Scripts of an integration whose
 * config is invalid are counted as not compiling (there is no models.ts to check them against), and
 * shown apart. Every failure is counted by its cause (the first error's code and message, with
 * names replaced by `…`), so the table says which part of the service refused it.
 */
import { existsSync, lstatSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { parseArgs } from 'node:util';
import { bundle, typeCheck } from '../src/cli/compile.js';
import { importProject, relativeImports, resolveImport, type ImportedScript } from '../src/cli/import.js';
import { projectPaths, type ProjectPaths, type ProjectProblem } from '../src/cli/project.js';
import { checkScript } from '../src/cli/scriptChecks.js';

/** One integration as imported, for a replay check to run its recorded runs against. */
export interface ImportedIntegration {
  /** The integration's folder in the corpus (its recorded `mocks/` are there). */
  sourceFolder: string;
  /** The project folder holding service-integrations/ after the import. */
  root: string;
  scripts: readonly ImportedScript[];
  /** Scripts that compiled, by file. */
  compiled: ReadonlySet<string>;
}

/** How many recorded runs of an integration reproduce their recorded outputs (s30run's replay plugs in here). */
export type ReplayCheck = (integration: ImportedIntegration) => Promise<{
  total: number;
  reproduced: number;
  /** One line per run that did not reproduce. */
  failures: string[];
}>;

export interface CorpusResult {
  integrations: number;
  configsValid: number;
  scripts: number;
  scriptsCompiled: number;
  /** Scripts of integrations whose config is invalid (counted as not compiling). */
  scriptsOfInvalidConfigs: number;
  /** Per failing integration, its first config errors. */
  configFailures: { integration: string; problems: string[] }[];
  /** Cause (first error, normalized) → scripts it stopped. */
  compileCauses: Map<string, { count: number; example: string }>;
  runs: { total: number; reproduced: number; failures: string[] } | null;
}

/** A file that only holds a relative path to something of the collection: a symbolic link stored as text. */
function linkTarget(file: string, collection: string): string | null {
  const stats = lstatSync(file);
  if (!stats.isFile() || stats.size > 300) return null;
  const text = readFileSync(file, 'utf8').trim();
  if (!/^\.{1,2}\/[^\n]*$/.test(text)) return null;
  const target = resolve(dirname(file), text);
  return target.startsWith(collection + sep) && existsSync(target) ? target : null;
}

/** Copies `from` to `to`, materializing the links stored as text. */
async function copyResolved(from: string, to: string, collection: string): Promise<void> {
  const target = linkTarget(from, collection);
  const real = target ?? from;
  if (statSync(real).isDirectory()) {
    await mkdir(to, { recursive: true });
    for (const name of readdirSync(real)) {
      if (name === 'node_modules') continue;
      await copyResolved(join(real, name), join(to, name), collection);
    }
    return;
  }
  await mkdir(dirname(to), { recursive: true });
  // A symbolic link of the collection (a sandbox's `types.ts -> ../bill/types.ts`) is copied as its file:
  // the sibling it points to is not part of this integration's temporary project.
  await cp(real, to, { dereference: true });
}

/** The integrations of a folder: itself when it holds nango.yaml, else each sub-folder that does. */
function integrationFolders(folder: string): string[] {
  if (existsSync(join(folder, 'nango.yaml'))) return [folder];
  return readdirSync(folder)
    .map((name) => join(folder, name))
    .filter((path) => statSync(path).isDirectory() && existsSync(join(path, 'nango.yaml')))
    .sort();
}

/** The first error's cause with the names taken out, so equal causes group. */
function cause(problem: ProjectProblem): string {
  const message = problem.message
    .split('\n')[0]!
    .replace(/'[^']*'/g, '…')
    .replace(/"[^"]*"/g, '…')
    .slice(0, 110);
  return `${problem.code} ${message}`;
}

/** The local files a script imports, transitively (models.ts excluded: its errors count for every script). */
function localImports(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file) || !existsSync(file)) return seen;
  seen.add(file);
  for (const specifier of relativeImports(readFileSync(file, 'utf8'))) {
    const found = resolveImport(file, specifier);
    if (found !== null) localImports(found, seen);
  }
  return seen;
}

async function compileScripts(
  paths: ProjectPaths,
  scripts: readonly ImportedScript[],
  everyError?: (problem: ProjectProblem) => void,
): Promise<Map<string, ProjectProblem | null>> {
  const outcome = new Map<string, ProjectProblem | null>(scripts.map((script) => [script.file, null]));
  const present = scripts.filter((script) => existsSync(script.file));
  for (const script of scripts) {
    if (!existsSync(script.file)) {
      outcome.set(script.file, {
        severity: 'error',
        code: 'script_not_found',
        message: 'no script file',
        file: script.file,
        line: 0,
        column: 0,
      });
    }
  }
  for (const script of present) {
    const first = checkScript({
      file: script.file,
      displayFile: relative(paths.root, script.file),
      source: await readFile(script.file, 'utf8'),
      kind: script.kind,
      modelsFile: paths.modelsFile,
    }).find((problem) => problem.severity === 'error');
    if (first !== undefined) outcome.set(script.file, first);
  }
  const diagnostics = typeCheck(paths, present).filter((problem) => problem.severity === 'error');
  diagnostics.forEach((problem) => everyError?.(problem));
  const byFile = new Map<string, ProjectProblem>();
  for (const problem of diagnostics) {
    const file = resolve(paths.root, problem.file);
    if (!byFile.has(file)) byFile.set(file, problem);
  }
  const modelsProblem = byFile.get(paths.modelsFile);
  for (const script of present) {
    if (outcome.get(script.file) !== null) continue;
    const files = localImports(script.file);
    const first = modelsProblem ?? [...files].map((file) => byFile.get(file)).find((p) => p !== undefined);
    if (first !== undefined) {
      outcome.set(script.file, first);
      continue;
    }
    const bundled = await bundle(paths, script);
    if ('problems' in bundled && bundled.problems[0] !== undefined) outcome.set(script.file, bundled.problems[0]);
  }
  return outcome;
}

export async function measureCorpus(
  folders: readonly string[],
  options: {
    replay?: ReplayCheck;
    verbose?: boolean;
    log?: (line: string) => void;
    /** Every type error of every file (not only a script's first), to see all that one cause hides. */
    everyError?: (integration: string, problem: ProjectProblem) => void;
  } = {},
): Promise<CorpusResult> {
  const log = options.log ?? ((line: string) => console.log(line));
  const result: CorpusResult = {
    integrations: 0,
    configsValid: 0,
    scripts: 0,
    scriptsCompiled: 0,
    scriptsOfInvalidConfigs: 0,
    configFailures: [],
    compileCauses: new Map(),
    runs: options.replay === undefined ? null : { total: 0, reproduced: 0, failures: [] },
  };
  const work = await mkdtemp(join(tmpdir(), 'migration-corpus-'));
  try {
    for (const collection of folders.map((folder) => resolve(folder))) {
      for (const folder of integrationFolders(collection)) {
        const name = folder === collection ? 'project' : relative(collection, folder);
        const source = join(work, name, 'nango-integrations');
        const root = join(work, name, 'project');
        await rm(join(work, name), { recursive: true, force: true });
        await mkdir(source, { recursive: true });
        const yamlFile = linkTarget(join(folder, 'nango.yaml'), collection) ?? join(folder, 'nango.yaml');
        const yaml = (await readFile(yamlFile, 'utf8')).replaceAll('${PWD}', name);
        await writeFile(join(source, 'nango.yaml'), yaml);
        if (folder === collection) await copyResolved(folder, source, collection);
        else {
          const ids = integrationIds(yaml);
          for (const id of ids.length > 0 ? ids : [name]) {
            for (const entry of readdirSync(folder)) {
              if (entry === 'nango.yaml') continue;
              await copyResolved(join(folder, entry), join(source, id, entry), collection);
            }
          }
        }

        const imported = await importProject({ from: source, root, compile: false });
        result.integrations++;
        const declared =
          imported.scripts.length + imported.problems.filter((p) => p.code === 'script_not_found').length;
        result.scripts += declared;
        if (imported.config === null) {
          result.scriptsOfInvalidConfigs += declared;
          result.configFailures.push({
            integration: name,
            problems: imported.problems
              .filter((p) => p.file.endsWith('service.yaml'))
              .slice(0, 3)
              .map((p) => `${p.line}:${p.column} ${p.code} ${p.message}`),
          });
          if (options.verbose === true) log(`${name}: config invalid`);
          continue;
        }
        result.configsValid++;
        const paths = projectPaths(root);
        const outcome = await compileScripts(
          paths,
          imported.scripts,
          options.everyError === undefined ? undefined : (problem) => options.everyError?.(name, problem),
        );
        const missing = declared - imported.scripts.length;
        for (let i = 0; i < missing; i++) addCause(result, 'script_not_found (no file for a declared script)', name);
        const compiled = new Set<string>();
        for (const [file, problem] of outcome) {
          if (problem === null) {
            compiled.add(file);
            result.scriptsCompiled++;
          } else {
            addCause(
              result,
              cause(problem),
              `${relative(paths.folder, file)}: ${problem.file}:${problem.line} ${problem.message.split('\n')[0]!.slice(0, 160)}`,
            );
          }
        }
        if (options.verbose === true) log(`${name}: ${compiled.size}/${declared} scripts compile`);
        if (options.replay !== undefined && result.runs !== null) {
          const runs = await options.replay({ sourceFolder: folder, root, scripts: imported.scripts, compiled });
          result.runs.total += runs.total;
          result.runs.reproduced += runs.reproduced;
          result.runs.failures.push(...runs.failures.map((line) => `${name}: ${line}`));
        }
      }
    }
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  return result;
}

function addCause(result: CorpusResult, key: string, example: string): void {
  const entry = result.compileCauses.get(key);
  if (entry === undefined) result.compileCauses.set(key, { count: 1, example });
  else entry.count++;
}

/** The integration ids directly under `integrations:` (two or four spaces deep, as the format's files indent). */
function integrationIds(yaml: string): string[] {
  const lines = yaml.split('\n');
  const start = lines.findIndex((line) => /^integrations:\s*$/.test(line));
  if (start < 0) return [];
  const ids: string[] = [];
  let indent: number | null = null;
  for (const line of lines.slice(start + 1)) {
    if (/^\S/.test(line)) break;
    const match = /^( +)([^\s#:][^:]*):\s*(?:#.*)?$/.exec(line);
    if (match === null) continue;
    const depth = match[1]!.length;
    indent ??= depth;
    if (depth === indent) ids.push(match[2]!.trim());
  }
  return ids;
}

const percent = (part: number, whole: number): string =>
  whole === 0 ? 'n/a' : `${((100 * part) / whole).toFixed(1)} %`;

function printResult(label: string, result: CorpusResult): void {
  console.log(`\n== ${label}`);
  console.log(
    `configs valid:   ${result.configsValid} of ${result.integrations} = ${percent(result.configsValid, result.integrations)} (goal ≥ 90 %)`,
  );
  console.log(
    `scripts compile: ${result.scriptsCompiled} of ${result.scripts} = ${percent(result.scriptsCompiled, result.scripts)} (goal ≥ 90 %); of valid configs: ${result.scriptsCompiled} of ${result.scripts - result.scriptsOfInvalidConfigs} = ${percent(result.scriptsCompiled, result.scripts - result.scriptsOfInvalidConfigs)}`,
  );
  console.log(
    result.runs === null
      ? 'recorded runs:   not measured (no replay check plugged in: measureCorpus(folders, { replay }))'
      : `recorded runs:   ${result.runs.reproduced} of ${result.runs.total} reproduce = ${percent(result.runs.reproduced, result.runs.total)} (goal ≥ 80 %)`,
  );
  if (result.configFailures.length > 0) {
    console.log('\ninvalid configs:');
    for (const failure of result.configFailures)
      console.log(`  ${failure.integration}: ${failure.problems.join(' | ')}`);
  }
  if (result.compileCauses.size > 0) {
    console.log('\nscripts that do not compile, by cause (first error):');
    for (const [key, { count, example }] of [...result.compileCauses].sort((a, b) => b[1].count - a[1].count)) {
      console.log(`  ${String(count).padStart(4)}  ${key}\n        e.g. ${example}`);
    }
  }
}

const isMain = process.argv[1] !== undefined && resolve(process.argv[1]) === resolve(new URL(import.meta.url).pathname);
if (isMain) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { verbose: { type: 'boolean' }, json: { type: 'string' }, 'every-error': { type: 'boolean' } },
  });
  if (positionals.length === 0) {
    console.error('usage: npx tsx bench/migrationCorpus.ts <folder> [<folder> …] [--verbose] [--json <file>]');
    process.exit(2);
  }
  const summary: Record<string, unknown> = {};
  for (const folder of positionals) {
    const started = Date.now();
    const every = new Map<string, { count: number; example: string }>();
    const result = await measureCorpus([folder], {
      verbose: values.verbose === true,
      ...(values['every-error'] === true
        ? {
            everyError: (integration: string, problem: ProjectProblem) => {
              const key = cause(problem);
              const entry = every.get(key);
              if (entry === undefined)
                every.set(key, {
                  count: 1,
                  example: `${integration}: ${problem.file}:${problem.line} ${problem.message.split('\n')[0]!.slice(0, 200)}`,
                });
              else entry.count++;
            },
          }
        : {}),
    });
    printResult(`${folder} (${((Date.now() - started) / 1000).toFixed(0)} s)`, result);
    if (every.size > 0) {
      console.log('\nevery type error, by cause (--every-error):');
      for (const [key, { count, example }] of [...every].sort((a, b) => b[1].count - a[1].count))
        console.log(`  ${String(count).padStart(4)}  ${key}\n        e.g. ${example}`);
    }
    summary[folder] = {
      integrations: result.integrations,
      configsValid: result.configsValid,
      scripts: result.scripts,
      scriptsCompiled: result.scriptsCompiled,
      scriptsOfInvalidConfigs: result.scriptsOfInvalidConfigs,
      causes: Object.fromEntries([...result.compileCauses].map(([key, value]) => [key, value.count])),
    };
  }
  if (values.json !== undefined) await writeFile(values.json, `${JSON.stringify(summary, null, 2)}\n`);
}
