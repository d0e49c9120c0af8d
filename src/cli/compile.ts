/**
 * `service compile`: generate (models.ts, stubs), check every script's rules, type-check them all with
 * the TypeScript compiler API, then bundle each into one self-contained CommonJS file with esbuild and
 * write build/manifest.json. The bundle format is a contract with the runtime (see BUNDLE_OPTIONS).
 */
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, rm } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { build, type BuildFailure, type BuildOptions, type Location } from 'esbuild';
import ts from 'typescript';
import { RUNTIME_SPECIFIER } from '../config/generateModels.js';
import type { ServiceConfig } from '../config/index.js';
import { PACKAGE_ROOT } from '../packageRoot.js';
import { generateProject } from './generate.js';
import {
  projectPaths,
  scriptPath,
  writeIfChanged,
  type ProjectPaths,
  type ProjectProblem,
  type ScriptKind,
} from './project.js';
import { checkScriptFile } from './scriptChecks.js';
import {
  SCRIPT_GLOBALS_MODULE,
  SCRIPT_GLOBALS_TYPES,
  scriptModulesPlugin,
  typePaths,
  zodSource,
  type ZodSource,
} from './scriptModules.js';
import { SCRIPT_COMPILER_OPTIONS } from './templates.js';

/** One built script in the manifest. */
export interface ManifestScript {
  integration: string;
  kind: ScriptKind;
  name: string;
  /** The bundle, relative to the build folder: `<integration>/<syncs|actions>/<name>.cjs`. */
  file: string;
  /** sha256 (hex) of the bundle's code. */
  hash: string;
  /** The script's source, relative to service-integrations/. */
  source: string;
}

/** service-integrations/build/manifest.json */
export interface BuildManifest {
  version: 1;
  config: ServiceConfig;
  scripts: ManifestScript[];
}

export interface CompileResult {
  ok: boolean;
  /** Config and script problems (errors and warnings), file paths relative to the root. */
  problems: ProjectProblem[];
  /** Config problems printed like a compiler, with source lines (empty when there are none). */
  configReport: string;
  manifest: BuildManifest | null;
  stubsCreated: string[];
}

/**
 * esbuild options of a script bundle. Evaluated as `new Function('module', 'exports', 'require', code)`,
 * a bundle sets `module.exports.default` to the script's function and calls `require` only with
 * 'integration-service/runtime', for which the runtime provides `{ ActionError }`. The script's own
 * files and the allowed packages are bundled in (src/cli/scriptModules.ts).
 */
export const BUNDLE_OPTIONS = {
  bundle: true,
  format: 'cjs',
  platform: 'neutral',
  // Packages of the allow-list that have no `exports` map (buffer) are found by their main field.
  mainFields: ['module', 'main'],
  target: 'es2022',
  external: [RUNTIME_SPECIFIER],
  write: false,
  logLevel: 'silent',
  charset: 'utf8',
} satisfies BuildOptions;

/**
 * The runtime's public module, resolved from this package, so scripts are checked against the runtime that
 * runs them; its TypeScript source also when the CLI runs from the build (dist/src/cli/compile.js).
 */
const RUNTIME_TYPES = join(PACKAGE_ROOT, 'src', 'runtime', 'public.ts');

/** A script of the project: which sync or action, and its file. */
export interface Script {
  integration: string;
  kind: ScriptKind;
  name: string;
  file: string;
}

export async function compileProject(options: {
  root: string;
  /** Progress lines for the long steps. */
  onProgress?: (line: string) => void;
}): Promise<CompileResult> {
  const progress = options.onProgress ?? (() => undefined);
  const paths = projectPaths(options.root);
  const generated = await generateProject({ root: options.root });
  const problems = [...generated.problems];
  const fail = (): CompileResult => ({
    ok: false,
    problems,
    configReport: generated.report,
    manifest: null,
    stubsCreated: generated.stubsCreated,
  });
  const config = generated.config;
  if (config === null) return fail();

  const scripts: Script[] = config.integrations
    .flatMap((integration) => [
      ...integration.syncs.map((sync) => ({ integration: integration.id, kind: 'sync' as const, name: sync.name })),
      ...integration.actions.map((action) => ({
        integration: integration.id,
        kind: 'action' as const,
        name: action.name,
      })),
    ])
    .map((script) => ({ ...script, file: scriptPath(paths, script.integration, script.kind, script.name) }));

  problems.push(...(await orphanScripts(paths, config, scripts)));
  problems.push(...(await checkScripts(paths, scripts)));
  if (problems.some((p) => p.severity === 'error')) return fail();

  const zod = zodSource(paths.root);
  progress(`type-checking ${scripts.length} script${scripts.length === 1 ? '' : 's'}…`);
  problems.push(...typeCheck(paths, scripts, zod));
  if (problems.some((p) => p.severity === 'error')) return fail();

  progress(`bundling ${scripts.length} script${scripts.length === 1 ? '' : 's'}…`);
  await rm(paths.buildDir, { recursive: true, force: true });
  const manifest: BuildManifest = { version: 1, config, scripts: [] };
  for (const script of scripts) {
    const bundled = await bundle(paths, script, zod);
    if ('problems' in bundled) {
      problems.push(...bundled.problems);
      continue;
    }
    const file = `${script.integration}/${script.kind === 'sync' ? 'syncs' : 'actions'}/${script.name}.cjs`;
    await writeIfChanged(`${paths.buildDir}/${file}`, bundled.code);
    manifest.scripts.push({
      integration: script.integration,
      kind: script.kind,
      name: script.name,
      file,
      hash: createHash('sha256').update(bundled.code).digest('hex'),
      source: relative(paths.folder, script.file).split('\\').join('/'),
    });
  }
  if (problems.some((p) => p.severity === 'error')) return fail();
  await writeIfChanged(paths.manifestFile, `${JSON.stringify(manifest, null, 2)}\n`);
  return { ok: true, problems, configReport: generated.report, manifest, stubsCreated: generated.stubsCreated };
}

/** Scripts in an integration's folders that service.yaml does not declare: not built, so say so (a rename, usually). */
async function orphanScripts(
  paths: ProjectPaths,
  config: ServiceConfig,
  scripts: readonly Script[],
): Promise<ProjectProblem[]> {
  const declared = new Set(scripts.map((s) => s.file));
  const problems: ProjectProblem[] = [];
  for (const integration of config.integrations) {
    for (const kind of ['sync', 'action'] as const) {
      const folder = join(paths.folder, integration.id, kind === 'sync' ? 'syncs' : 'actions');
      const names = existsSync(folder) ? await readdir(folder) : [];
      for (const name of names.filter((n) => n.endsWith('.ts')).sort()) {
        const file = join(folder, name);
        if (declared.has(file)) continue;
        problems.push({
          severity: 'warning',
          code: 'orphan_script',
          message: `service.yaml declares no ${kind} '${name.slice(0, -3)}' in integration '${integration.id}', so this script is not built`,
          file: relative(paths.root, file),
          line: 1,
          column: 1,
        });
      }
    }
  }
  return problems;
}

/**
 * The import rules (src/cli/scriptChecks.ts) of every script and of every project file they import,
 * each file once: a helper that imports `fs` is named, not only the script that imports the helper.
 */
async function checkScripts(paths: ProjectPaths, scripts: readonly Script[]): Promise<ProjectProblem[]> {
  const problems: ProjectProblem[] = [];
  const seen = new Set<string>(scripts.map((script) => script.file));
  const queue: { file: string; kind: ScriptKind; role: 'script' | 'helper' }[] = scripts.map((script) => ({
    file: script.file,
    kind: script.kind,
    role: 'script',
  }));
  for (let next = queue.shift(); next !== undefined; next = queue.shift()) {
    const checked = checkScriptFile({
      ...next,
      displayFile: relative(paths.root, next.file),
      source: await readFile(next.file, 'utf8'),
      folder: paths.folder,
    });
    problems.push(...checked.problems);
    for (const file of checked.imports) {
      if (seen.has(file) || file === paths.modelsFile) continue;
      seen.add(file);
      queue.push({ file, kind: next.kind, role: 'helper' });
    }
  }
  return problems;
}

/** One TypeScript program over models.ts and the scripts (and what they import), with the scripts' options. */
export function typeCheck(
  paths: ProjectPaths,
  scripts: readonly Pick<Script, 'file'>[],
  zod: ZodSource = zodSource(paths.root),
): ProjectProblem[] {
  const { options, errors } = ts.convertCompilerOptionsFromJson(SCRIPT_COMPILER_OPTIONS, paths.folder);
  if (errors.length > 0) throw new Error(ts.flattenDiagnosticMessageText(errors[0]?.messageText, '\n'));
  const program = ts.createProgram({
    rootNames: [paths.modelsFile, SCRIPT_GLOBALS_TYPES, ...scripts.map((s) => s.file)],
    options: { ...options, paths: typePaths(RUNTIME_TYPES, zod) },
  });
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const message = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n');
    const severity = diagnostic.category === ts.DiagnosticCategory.Error ? 'error' : 'warning';
    if (diagnostic.file === undefined || diagnostic.start === undefined) {
      return {
        severity,
        code: `TS${diagnostic.code}`,
        message,
        file: relative(paths.root, paths.folder),
        line: 0,
        column: 0,
      };
    }
    const { line, character } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    return {
      severity,
      code: `TS${diagnostic.code}`,
      message,
      file: relative(paths.root, diagnostic.file.fileName),
      line: line + 1,
      column: character + 1,
    };
  });
}

function isBuildFailure(error: unknown): error is BuildFailure {
  return error instanceof Error && 'errors' in error && Array.isArray(error.errors);
}

/** The script's bundle (BUNDLE_OPTIONS), or what esbuild refused. */
export async function bundle(
  paths: ProjectPaths,
  script: Pick<Script, 'file'>,
  zod: ZodSource = zodSource(paths.root),
): Promise<{ code: string } | { problems: ProjectProblem[] }> {
  const problem = (message: string, location: Location | null): ProjectProblem => ({
    severity: 'error',
    code: 'bundle_failed',
    message,
    file: location === null ? relative(paths.root, script.file) : location.file,
    line: location?.line ?? 0,
    column: location === null ? 0 : location.column + 1,
  });
  try {
    const result = await build({
      ...BUNDLE_OPTIONS,
      entryPoints: [script.file],
      absWorkingDir: paths.root,
      plugins: [scriptModulesPlugin({ folder: paths.folder, zod })],
      inject: [SCRIPT_GLOBALS_MODULE],
    });
    const output = result.outputFiles?.[0];
    return output === undefined ? { problems: [problem('esbuild produced no output', null)] } : { code: output.text };
  } catch (error) {
    if (isBuildFailure(error) && error.errors.length > 0) {
      return { problems: error.errors.map((failure) => problem(failure.text, failure.location)) };
    }
    return { problems: [problem(error instanceof Error ? error.message : String(error), null)] };
  }
}
