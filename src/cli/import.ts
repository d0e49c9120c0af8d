/**
 * `service import <folder>`: converts a project in the de-facto format (nango-integrations/ with
 * nango.yaml, a folder per integration with syncs/, actions/, helpers, mappers, types.ts,
 * schema.zod.ts, tests and mocks) into service-integrations/:
 *
 * - nango.yaml → service.yaml, byte for byte but for the edits of importConfig.ts;
 * - each integration's folder is copied to the same relative place, every TypeScript file with the
 *   helper types renamed (importScript.ts); scripts of the older layout (beside nango.yaml, or straight
 *   in the integration's folder) move to `<integration>/syncs|actions/`, their relative imports
 *   rewritten to reach the same files; root files a script imports come along;
 * - models.ts, tsconfig.json and .gitignore are written as `service init` writes them;
 * - then `service compile` runs, and whatever it refuses is listed with what import could not convert.
 *
 * It writes into an empty service-integrations/ only, unless `force` (then each file it replaces is
 * listed). Generated and local-only files of the source (its models.ts, .nango/, dist/,
 * node_modules/, .env) are not copied.
 */
import { existsSync, statSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import { parse } from 'yaml';
import { compileConfig, generateModels, MAX_ALIAS_VALUES, type ServiceConfig } from '../config/index.js';
import { formatPath } from '../config/problems.js';
import { compileProject } from './compile.js';
import { convertConfigText } from './importConfig.js';
import { rewriteScript } from './importScript.js';
import type { CliIo } from './io.js';
import {
  countSummary,
  FOLDER,
  formatProjectProblems,
  projectPaths,
  writeIfChanged,
  type ProjectProblem,
  type ScriptKind,
} from './project.js';
import { GITIGNORE, TSCONFIG } from './templates.js';

export interface ImportOptions {
  /** The folder holding nango.yaml, or a folder holding nango-integrations/. */
  from: string;
  /** The project folder service-integrations/ goes into. */
  root: string;
  /** Write into a non-empty service-integrations/, replacing files of the same name. */
  force?: boolean;
  /** Run `service compile` on the result (default true). */
  compile?: boolean;
  /** Progress lines of the long steps. */
  onProgress?: (line: string) => void;
}

export interface ImportedScript {
  integration: string;
  kind: ScriptKind;
  name: string;
  /** Absolute path of the script in service-integrations/. */
  file: string;
}

export interface ImportResult {
  /** True when nothing was left unconverted and the result compiles. */
  ok: boolean;
  /** Why nothing was written, when nothing was. */
  refused: string | null;
  /** The nango.yaml read. */
  sourceConfig: string | null;
  /** What import changed, one line each. */
  changes: string[];
  /** Files copied unchanged, and what was left behind on purpose. */
  notes: string[];
  /** Files of service-integrations/ that existed and were replaced (only with `force`). */
  overwritten: string[];
  /** What could not be converted (and, after it, what `service compile` refused). */
  problems: ProjectProblem[];
  config: ServiceConfig | null;
  scripts: ImportedScript[];
}

/** Folders and files of the source that are built or local, never part of the integrations. */
const SKIPPED_NAMES = new Set(['node_modules', '.nango', 'dist', 'build', '.git', '.env']);
const isSkipped = (name: string): boolean => SKIPPED_NAMES.has(name) || name.startsWith('.env');
const KINDS: readonly [ScriptKind, string][] = [
  ['sync', 'syncs'],
  ['action', 'actions'],
];
const CODE_FILE = /\.(?:ts|mts|cts)$/;

/** Where the project in the de-facto format is: `from` itself, or its nango-integrations/. */
export function findSourceFolder(from: string): string | null {
  for (const folder of [from, join(from, 'nango-integrations')]) {
    if (existsSync(join(folder, 'nango.yaml'))) return folder;
  }
  return null;
}

/**
 * The files under `folder`, by the path they have there. Symbolic links are followed when they lead to
 * a file or folder inside `root` (the source project), once each; the others are returned apart, never
 * read: a project's link to /etc or to a home folder is not the project's to copy.
 */
async function listFiles(folder: string, root: string): Promise<{ files: string[]; outside: string[] }> {
  const files: string[] = [];
  const outside: string[] = [];
  const realRoot = await realpath(root);
  const seen = new Set<string>();
  const walk = async (dir: string): Promise<void> => {
    const real = await realpath(dir);
    if (seen.has(real)) return;
    seen.add(real);
    for (const entry of (await readdir(dir, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name))) {
      if (isSkipped(entry.name)) continue;
      const path = join(dir, entry.name);
      let kind: 'dir' | 'file' | null = entry.isDirectory() ? 'dir' : entry.isFile() ? 'file' : null;
      if (entry.isSymbolicLink()) {
        const target = await realpath(path).catch(() => null);
        if (target === null || !isInside(realRoot, target)) {
          outside.push(path);
          continue;
        }
        kind = statSync(target).isDirectory() ? 'dir' : 'file';
      }
      if (kind === 'dir') await walk(path);
      else if (kind === 'file') files.push(path);
    }
  };
  if (existsSync(folder)) await walk(folder);
  return { files, outside };
}

/** True when `path` is `folder` or below it. */
function isInside(folder: string, path: string): boolean {
  const inside = relative(folder, path);
  return inside === '' || (!inside.startsWith('..') && !isAbsolute(inside));
}

/** A name from nango.yaml that can be a folder or file name here: no separators, not `.` or `..`. */
const isPlainName = (name: string): boolean => /^[A-Za-z0-9][A-Za-z0-9_.-]*$/.test(name) && !name.includes('..');

/** The names the generated models.ts exports: its models and the helper types it re-exports. */
export function modelsExportsOf(modelsText: string): Set<string> {
  const names = new Set<string>();
  for (const match of modelsText.matchAll(/^export (?:type )?\{([^}]*)\}/gm)) {
    for (const part of (match[1] ?? '').split(',')) {
      const name = part
        .trim()
        .split(/\s+as\s+/)
        .pop()
        ?.trim();
      if (name) names.add(name.replace(/^type\s+/, ''));
    }
  }
  for (const match of modelsText.matchAll(/^export (?:interface|type|class|const|enum) ([A-Za-z_$][\w$]*)/gm)) {
    if (match[1] !== undefined) names.add(match[1]);
  }
  return names;
}

/** A relative import's file: the path itself, with .ts, an index.ts, or .js written for .ts. */
export function resolveImport(fromFile: string, specifier: string): string | null {
  const base = resolve(dirname(fromFile), specifier);
  const candidates = [
    base,
    `${base}.ts`,
    join(base, 'index.ts'),
    base.replace(/\.js$/, '.ts'),
    base.replace(/\.mjs$/, '.mts'),
  ];
  return candidates.find((candidate) => existsSync(candidate) && statSync(candidate).isFile()) ?? null;
}

/** The relative specifiers a TypeScript file imports (`from '…'`, `import('…')`, `import '…'`). */
export function relativeImports(source: string): string[] {
  return [...source.matchAll(/(?:from\s+|import\s*\(\s*|import\s+)['"](\.{1,2}\/[^'"]*)['"]/g)].flatMap((match) =>
    match[1] === undefined ? [] : [match[1]],
  );
}

export async function importProject(options: ImportOptions): Promise<ImportResult> {
  const result: ImportResult = {
    ok: false,
    refused: null,
    sourceConfig: null,
    changes: [],
    notes: [],
    overwritten: [],
    problems: [],
    config: null,
    scripts: [],
  };
  const source = findSourceFolder(options.from);
  if (source === null) {
    result.refused = `no nango.yaml in ${options.from} or in ${join(options.from, 'nango-integrations')}: give the folder that holds it`;
    return result;
  }
  result.sourceConfig = join(source, 'nango.yaml');
  const paths = projectPaths(options.root);
  const display = (file: string): string => relative(paths.root, file) || file;
  if (existsSync(paths.folder) && (await readdir(paths.folder)).length > 0 && options.force !== true) {
    result.refused = `${FOLDER}/ in ${paths.root} is not empty; import writes only into an empty folder. Move it away, or run with --force to write into it (every file it replaces is listed)`;
    return result;
  }

  const write = async (file: string, content: string | Buffer): Promise<void> => {
    // Every path written is built from names of nango.yaml and the source's files: never outside.
    if (!isInside(paths.folder, file)) throw new Error(`refusing to write ${file}: it is outside ${paths.folder}`);
    if (existsSync(file)) {
      const before = await readFile(file);
      if (!before.equals(Buffer.from(content))) result.overwritten.push(display(file));
    }
    if (typeof content === 'string') await writeIfChanged(file, content);
    else {
      await mkdir(dirname(file), { recursive: true });
      await writeFile(file, content);
    }
  };

  // 1. The configuration.
  const yamlText = await readFile(result.sourceConfig, 'utf8');
  const converted = convertConfigText(yamlText);
  await write(paths.configFile, converted.text);
  result.changes.push(
    `nango.yaml → ${FOLDER}/service.yaml${converted.edits.length === 0 ? ' (unchanged)' : `, ${converted.edits.length} edit(s):`}`,
  );
  for (const edit of converted.edits) result.changes.push(`  nango.yaml:${edit.line}: ${edit.message}`);
  const compiled = compileConfig(converted.text);
  const configFile = display(paths.configFile);
  for (const problem of compiled.problems) {
    const entry: ProjectProblem = {
      severity: problem.severity,
      code: problem.code,
      message: `${problem.message} (at ${formatPath(problem.path)})`,
      file: configFile,
      line: problem.line,
      column: problem.column,
    };
    if (problem.severity === 'error') result.problems.push(entry);
    else result.notes.push(`${entry.file}:${entry.line}:${entry.column} warning ${entry.code} ${entry.message}`);
  }
  result.config = compiled.config;
  const modelsText = compiled.config === null ? null : generateModels(compiled.config);
  // With an invalid config there is no models.ts yet: its helper types are always there, and its
  // models are the ones nango.yaml declares.
  const modelsExports = modelsExportsOf(modelsText ?? generateModels({ integrations: [], models: [] }));
  if (modelsText === null) for (const name of declaredModelNames(yamlText)) modelsExports.add(name);

  // 2. What goes where: every file of each integration's folder, scripts of the older layouts moved.
  const integrationIds = integrationIdsOf(yamlText).filter(isPlainName);
  const moves = new Map<string, string>();
  for (const id of integrationIds) {
    const { files, outside } = await listFiles(join(source, id), source);
    for (const file of files) moves.set(file, join(paths.folder, relative(source, file)));
    for (const link of outside) {
      result.notes.push(`not copied: ${relative(source, link)}, a symbolic link to something outside ${source}`);
    }
  }
  const declared = declaredScriptsOf(yamlText).filter(
    (script) => isPlainName(script.integration) && isPlainName(script.name),
  );
  for (const script of declared) {
    const target = join(paths.folder, script.integration, script.folder, `${script.name}.ts`);
    const nested = join(source, script.integration, script.folder, `${script.name}.ts`);
    const candidates = [
      nested,
      join(source, script.integration, `${script.name}.ts`),
      join(source, `${script.name}.ts`),
    ];
    const found = candidates.find((candidate) => existsSync(candidate));
    if (found === undefined) {
      result.problems.push({
        severity: 'error',
        code: 'script_not_found',
        message: `nango.yaml declares ${script.kind} '${script.name}' of '${script.integration}', but there is no script for it (looked for ${candidates.map((c) => relative(source, c)).join(', ')})`,
        file: display(target),
        line: 0,
        column: 0,
      });
      continue;
    }
    if (found === nested && !moves.has(nested)) {
      result.problems.push({
        severity: 'error',
        code: 'script_not_found',
        message: `the ${script.kind} script ${relative(source, nested)} is a symbolic link to something outside ${source}: copy the file itself into the project`,
        file: display(target),
        line: 0,
        column: 0,
      });
      continue;
    }
    if (found !== nested) {
      moves.set(found, target);
      result.changes.push(`moved ${relative(source, found)} → ${display(target)} (the layout scripts have here)`);
    }
    result.scripts.push({ integration: script.integration, kind: script.kind, name: script.name, file: target });
  }

  // 3. Root files the scripts import (shared helpers) come along, at the same relative place.
  const pending = [...moves.keys()].filter((file) => CODE_FILE.test(file));
  const sourceModels = join(source, 'models');
  // The models the format generates (models.ts, .nango/schema.ts): imports of them point at models.ts.
  const generatedModels = new Set([sourceModels, join(source, '.nango', 'schema')]);
  while (pending.length > 0) {
    const file = pending.pop() ?? '';
    const text = await readFile(file, 'utf8');
    for (const specifier of relativeImports(text)) {
      const target = resolveImport(file, specifier);
      if (target === null || moves.has(target) || generatedModels.has(target.replace(/\.ts$/, ''))) continue;
      if (relative(source, target).split(sep).some(isSkipped)) continue;
      if (!isInside(source, target) || !isInside(await realpath(source), await realpath(target))) continue;
      moves.set(target, join(paths.folder, relative(source, target)));
      if (CODE_FILE.test(target)) pending.push(target);
    }
  }

  // 4. Copy, rewriting the TypeScript files.
  const copied = new Map<string, number>();
  for (const [from, to] of [...moves].sort(([a], [b]) => a.localeCompare(b))) {
    const integration = relative(source, from).split(sep)[0] ?? '';
    if (!CODE_FILE.test(from) || from.endsWith('.d.ts')) {
      await write(to, await readFile(from));
      copied.set(integration, (copied.get(integration) ?? 0) + 1);
      continue;
    }
    const rewrite = rewriteScript({
      source: await readFile(from, 'utf8'),
      from,
      to,
      sourceModels,
      targetModels: join(paths.folder, 'models'),
      sourceRoot: source,
      targetRoot: paths.folder,
      modelsExports,
    });
    await write(to, rewrite.text);
    copied.set(integration, (copied.get(integration) ?? 0) + 1);
    if (rewrite.renames.length > 0) result.changes.push(`${display(to)}: ${rewrite.renames.join(', ')}`);
    if (rewrite.movedImports > 0) {
      result.changes.push(`${display(to)}: ${rewrite.movedImports} relative import(s) rewritten to the new place`);
    }
    for (const problem of rewrite.problems) {
      result.problems.push({ severity: 'error', code: 'import_not_converted', ...problem, file: display(to) });
    }
  }
  for (const [integration, count] of copied) result.notes.push(`copied ${count} file(s) of ${integration}/`);
  const tests = [...moves.keys()].filter((file) =>
    /(^|[/\\])(tests?|mocks|__tests__)[/\\]|\.test\.ts$/.test(relative(source, file)),
  );
  if (tests.length > 0) {
    result.notes.push(
      `${tests.length} test and mock file(s) copied as they are: 'service test' runs fixtures recorded with 'service dryrun --save-responses', not the de-facto format's vitest tests`,
    );
  }
  const leftBehind = (await readdir(source)).filter(
    (name) =>
      name !== 'nango.yaml' &&
      !integrationIds.includes(name) &&
      ![...moves.keys()].some((file) => relative(source, file).split(sep)[0] === name),
  );
  const secrets = leftBehind.filter((name) => name.startsWith('.env'));
  const others = leftBehind.filter((name) => !name.startsWith('.env'));
  if (others.length > 0)
    result.notes.push(`not copied (built, local or the de-facto product's own): ${others.sort().join(', ')}`);
  if (secrets.length > 0)
    result.notes.push(
      `not copied: ${secrets.sort().join(', ')} (secrets stay out of the project: define them as environment variables of the environment, read with svc.getEnvironmentVariables())`,
    );

  // 5. The project files `service init` writes, and models.ts.
  await write(join(paths.folder, 'tsconfig.json'), TSCONFIG);
  await write(join(paths.folder, '.gitignore'), GITIGNORE);
  if (modelsText !== null) await write(paths.modelsFile, modelsText);
  result.changes.push(
    `wrote ${FOLDER}/tsconfig.json and .gitignore${modelsText === null ? '' : ', and models.ts from service.yaml'}`,
  );

  // 6. What the service makes of the result.
  if (result.problems.length === 0 && options.compile !== false) {
    const compile = await compileProject({
      root: options.root,
      ...(options.onProgress === undefined ? {} : { onProgress: options.onProgress }),
    });
    for (const problem of compile.problems) {
      if (problem.severity === 'error') result.problems.push(problem);
    }
  }
  result.ok = result.problems.length === 0;
  return result;
}

/** The command: runs the import and prints what it did, then what is left; exit 1 when anything is. */
export async function importCommand(options: ImportOptions, io: CliIo): Promise<number> {
  const result = await importProject({
    ...options,
    onProgress: (line) => io.out(`${line}\n`),
  });
  if (result.refused !== null) {
    io.err(`service import: ${result.refused}\n`);
    return 1;
  }
  const from = relative(io.cwd, result.sourceConfig ?? '') || (result.sourceConfig ?? '');
  io.out(`Imported ${from} into ${relative(io.cwd, projectPaths(options.root).folder) || FOLDER}/.\n\nChanged:\n`);
  for (const line of result.changes) io.out(`  ${line}\n`);
  if (result.overwritten.length > 0) {
    io.out(`\nReplaced (they existed in ${FOLDER}/ and --force was given):\n`);
    for (const file of result.overwritten) io.out(`  ${file}\n`);
  }
  if (result.notes.length > 0) {
    io.out('\nNotes:\n');
    for (const line of result.notes) io.out(`  ${line}\n`);
  }
  if (result.problems.length > 0) {
    io.err(`\nNot converted (${result.problems.length}):\n${formatProjectProblems(result.problems)}\n`);
    io.err(`${countSummary(result.problems)}\n`);
    io.err(`\nFix these in ${FOLDER}/, then run 'npx service compile'.\n`);
    return 1;
  }
  io.out(`\n${result.scripts.length} script(s) compile. Next: 'npx service deploy --dry-run'.\n`);
  return 0;
}

function integrationsNode(yamlText: string): Record<string, unknown> {
  const { value } = loadLoose(yamlText);
  if (typeof value !== 'object' || value === null) return {};
  const integrations = (value as Record<string, unknown>)['integrations'];
  return typeof integrations === 'object' && integrations !== null ? (integrations as Record<string, unknown>) : {};
}

function integrationIdsOf(yamlText: string): string[] {
  return Object.keys(integrationsNode(yamlText));
}

function declaredModelNames(yamlText: string): string[] {
  const { value } = loadLoose(yamlText);
  const models = typeof value === 'object' && value !== null ? (value as Record<string, unknown>)['models'] : null;
  return typeof models === 'object' && models !== null ? Object.keys(models) : [];
}

function declaredScriptsOf(
  yamlText: string,
): { integration: string; kind: ScriptKind; folder: string; name: string }[] {
  const out: { integration: string; kind: ScriptKind; folder: string; name: string }[] = [];
  for (const [integration, body] of Object.entries(integrationsNode(yamlText))) {
    if (typeof body !== 'object' || body === null) continue;
    for (const [kind, folder] of KINDS) {
      const scripts = (body as Record<string, unknown>)[folder];
      if (typeof scripts !== 'object' || scripts === null) continue;
      for (const name of Object.keys(scripts)) out.push({ integration, kind, folder, name });
    }
  }
  return out;
}

function loadLoose(text: string): { value: unknown } {
  try {
    // As service.yaml is read (src/config/load.ts); the config check that follows says what is wrong.
    return { value: parse(text, { maxAliasCount: MAX_ALIAS_VALUES, merge: true }) as unknown };
  } catch {
    return { value: null };
  }
}
