/**
 * Where things are in a user's project, and problems of a project (config and scripts) in one shape
 * so the CLI prints them alike: `file:line:column severity code message`.
 */
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { compileConfig, formatProblems, type ServiceConfig } from '../config/index.js';
import { formatPath } from '../config/problems.js';

export const FOLDER = 'service-integrations';

export interface ProjectPaths {
  root: string;
  folder: string;
  configFile: string;
  modelsFile: string;
  buildDir: string;
  manifestFile: string;
}

export function projectPaths(root: string): ProjectPaths {
  const folder = join(root, FOLDER);
  return {
    root,
    folder,
    configFile: join(folder, 'service.yaml'),
    modelsFile: join(folder, 'models.ts'),
    buildDir: join(folder, 'build'),
    manifestFile: join(folder, 'build', 'manifest.json'),
  };
}

export type ScriptKind = 'sync' | 'action';

/** service-integrations/<integration>/<syncs|actions>/<name>.ts */
export function scriptPath(paths: ProjectPaths, integration: string, kind: ScriptKind, name: string): string {
  return join(paths.folder, integration, kind === 'sync' ? 'syncs' : 'actions', `${name}.ts`);
}

export interface ProjectProblem {
  severity: 'error' | 'warning';
  code: string;
  message: string;
  /** Relative to the project root. */
  file: string;
  line: number;
  column: number;
}

export function formatProjectProblems(problems: readonly ProjectProblem[]): string {
  return problems.map((p) => `${p.file}:${p.line}:${p.column} ${p.severity} ${p.code} ${p.message}`).join('\n');
}

export function countSummary(problems: readonly { severity: string }[]): string {
  const errors = problems.filter((p) => p.severity === 'error').length;
  const warnings = problems.length - errors;
  return `${errors} error${errors === 1 ? '' : 's'}, ${warnings} warning${warnings === 1 ? '' : 's'}`;
}

export interface ReadConfigResult {
  config: ServiceConfig | null;
  problems: ProjectProblem[];
  /** The problems printed like a compiler, with source lines and carets. */
  report: string;
}

/** Reads and compiles service.yaml; a missing file is a problem, not an exception. */
export async function readProjectConfig(paths: ProjectPaths): Promise<ReadConfigResult> {
  const file = relative(paths.root, paths.configFile) || paths.configFile;
  if (!existsSync(paths.configFile)) {
    const problem: ProjectProblem = {
      severity: 'error',
      code: 'config_not_found',
      message: `no ${FOLDER}/service.yaml here; run \`service init\` to create one, or pass --root`,
      file,
      line: 0,
      column: 0,
    };
    return { config: null, problems: [problem], report: formatProjectProblems([problem]) };
  }
  const text = await readFile(paths.configFile, 'utf8');
  const result = compileConfig(text);
  const problems = result.problems.map((p) => ({
    severity: p.severity,
    code: p.code,
    message: `${p.message} (at ${formatPath(p.path)})`,
    file,
    line: p.line,
    column: p.column,
  }));
  return { config: result.config, problems, report: formatProblems(file, result.problems, text) };
}

/** Writes a file only when its content changes, so watchers and editors see no spurious change. */
export async function writeIfChanged(file: string, content: string): Promise<boolean> {
  if (existsSync(file) && (await readFile(file, 'utf8')) === content) return false;
  await mkdir(dirname(file), { recursive: true });
  await writeFile(file, content);
  return true;
}
