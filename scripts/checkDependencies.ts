/**
 * The dependency check (`npm run check:deps`, and a phase of `npm test`): the rules of
 * .dependency-cruiser.cjs over the code. dependency-cruiser builds the module graph (type-only imports
 * included) and checks the module-level rules of the config's `forbidden` list (no import cycle); the
 * folder rule, which dependency-cruiser cannot express, is applied here over the same graph: no two
 * folders (the config's `reporterOptions.archi.collapsePattern`) import each other in both directions.
 * Prints every violation with the files that make it and what to do; exits 1 when there is one.
 *
 * @example
 * npm run check:deps
 * npx tsx scripts/checkDependencies.ts --base-dir some/other/tree
 */
import { createRequire } from 'node:module';
import { isAbsolute, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise, type ICruiseResult, type IConfiguration } from 'dependency-cruiser';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
const CONFIG_NAME = '.dependency-cruiser.cjs';
export const CONFIG_FILE = join(REPO_ROOT, CONFIG_NAME);

export interface DependencyViolation {
  rule: 'no-circular' | 'no-bidirectional-folders';
  /** The two folders of a no-bidirectional-folders violation, `a ↔ b` in name order. */
  pair?: string;
  /** One line: what is wrong. */
  summary: string;
  /** The imports that make the violation, `from → to`, one per entry. */
  imports: string[];
  /** What to do about it. */
  advice: string;
}

export interface CheckOptions {
  /** The tree to check; paths in the rules are relative to it. @default the repository */
  baseDir?: string;
  /** @default <baseDir>/tsconfig.json */
  tsConfigFile?: string;
}

/** The rules of .dependency-cruiser.cjs (a CommonJS module: dependency-cruiser's own config format). */
function loadConfig(): IConfiguration {
  return createRequire(import.meta.url)(CONFIG_FILE) as IConfiguration;
}

/** The folder a module belongs to, per the config's collapse pattern; undefined outside the code. */
export function folderOf(path: string, collapsePattern: RegExp): string | undefined {
  return collapsePattern.exec(path)?.[0];
}

const isTest = (path: string) => path.endsWith('.test.ts');
const pairKey = (a: string, b: string) => [a, b].sort().join(' ↔ ');

type FolderViolation = DependencyViolation & { pair: string };

/** Pairs of folders that import each other, with the imports of each direction. */
export function bidirectionalFolders(result: ICruiseResult, collapsePattern: RegExp): FolderViolation[] {
  const edges = new Map<string, Map<string, string[]>>();
  for (const module of result.modules) {
    if (isTest(module.source)) continue;
    const from = folderOf(module.source, collapsePattern);
    if (from === undefined) continue;
    for (const dependency of module.dependencies) {
      if (dependency.coreModule || dependency.couldNotResolve) continue;
      const to = folderOf(dependency.resolved, collapsePattern);
      if (to === undefined || to === from) continue;
      const targets = edges.get(from) ?? new Map<string, string[]>();
      edges.set(from, targets);
      const imports = targets.get(to) ?? [];
      targets.set(to, imports);
      const typeOnly = dependency.dependencyTypes.includes('type-only') ? ' (type-only)' : '';
      imports.push(`${module.source} → ${dependency.resolved}${typeOnly}`);
    }
  }
  const violations: FolderViolation[] = [];
  for (const [a, targets] of [...edges].sort(([x], [y]) => x.localeCompare(y))) {
    for (const [b, forward] of [...targets].sort(([x], [y]) => x.localeCompare(y))) {
      const backward = edges.get(b)?.get(a);
      if (!backward || a.localeCompare(b) >= 0) continue;
      violations.push({
        rule: 'no-bidirectional-folders',
        pair: pairKey(a, b),
        summary: `${a} and ${b} import each other`,
        imports: [...forward, ...backward],
        advice:
          `decide which of ${a} and ${b} depends on the other, and remove the imports of the other direction: ` +
          'move the piece both need into the folder that is depended on (or a folder of its own), or move a file ' +
          'to the folder it belongs to, or pass the dependency in.',
      });
    }
  }
  return violations;
}

export interface DependencyReport {
  /** What fails the check. */
  violations: DependencyViolation[];
  /** Folder pairs listed in the config's `knownViolations`: printed, not failing. */
  known: DependencyViolation[];
  /** Pairs listed in `knownViolations` that no longer import each other: the list must lose them. */
  staleKnown: string[];
}

/** The rules of .dependency-cruiser.cjs over the tree. */
export async function checkDependencies(options: CheckOptions = {}): Promise<DependencyReport> {
  const baseDir = resolve(options.baseDir ?? REPO_ROOT);
  const tsConfigFile = options.tsConfigFile ?? join(baseDir, 'tsconfig.json');
  const { forbidden = [], options: cruiseOptions = {} } = loadConfig();
  const collapse = cruiseOptions.reporterOptions?.archi?.collapsePattern;
  if (typeof collapse !== 'string') {
    throw new Error(`${CONFIG_FILE}: options.reporterOptions.archi.collapsePattern (the folders) must be a string`);
  }
  const reported = await cruise(
    ['.'],
    {
      ...cruiseOptions,
      baseDir,
      tsConfig: { fileName: isAbsolute(tsConfigFile) ? tsConfigFile : resolve(baseDir, tsConfigFile) },
      validate: true,
      ruleSet: { forbidden },
      outputType: 'json',
    },
    {},
    { tsConfig: extractTSConfig(tsConfigFile) },
  );
  const result = (typeof reported.output === 'string' ? JSON.parse(reported.output) : reported.output) as ICruiseResult;
  const moduleViolations = result.summary.violations
    .filter((violation) => violation.rule.severity === 'error' || violation.rule.severity === 'warn')
    .map((violation): DependencyViolation => ({
      rule: 'no-circular',
      summary: `import cycle through ${violation.from}`,
      imports: [violation.from, ...(violation.cycle ?? []).map((step) => step.name)]
        .slice(0, -1)
        .map((from, index, chain) => `${from} → ${chain[index + 1] ?? violation.from}`),
      advice:
        violation.rule.name === 'no-circular'
          ? 'break the cycle: move what both sides need into a module of its own, or pass it in.'
          : `rule ${violation.rule.name} of ${CONFIG_NAME}`,
    }));
  const listed = new Set(
    (cruiseOptions.knownViolations ?? [])
      .filter((known) => known.rule.name === 'no-bidirectional-folders')
      .map((known) => pairKey(known.from, known.to)),
  );
  const folderViolations = bidirectionalFolders(result, new RegExp(collapse));
  const isListed = (violation: FolderViolation) => listed.has(violation.pair);
  const found = new Set(folderViolations.map((violation) => violation.pair));
  return {
    violations: [...moduleViolations, ...folderViolations.filter((violation) => !isListed(violation))],
    known: folderViolations.filter(isListed),
    staleKnown: [...listed].filter((pair) => !found.has(pair)),
  };
}

/** The report `npm run check:deps` prints. */
export function formatReport({ violations, known, staleKnown }: DependencyReport): string {
  const lines: string[] = [];
  const describe = (violation: DependencyViolation, mark: string) => {
    lines.push('', `${mark} ${violation.rule}: ${violation.summary}`);
    for (const line of violation.imports) lines.push(`    ${line}`);
    lines.push(`  what to do: ${violation.advice}`);
  };
  for (const violation of known) describe(violation, '! known, listed in knownViolations:');
  for (const violation of violations) describe(violation, '✗');
  for (const pair of staleKnown) {
    lines.push('', `✗ knownViolations lists ${pair}, which no longer import each other: remove it from the list.`);
  }
  const failed = violations.length + staleKnown.length;
  lines.push(
    '',
    failed === 0
      ? `dependencies: ok (no import cycle; no two folders importing each other${known.length > 0 ? ` except the ${known.length} listed in ${CONFIG_NAME}` : ''})`
      : `dependencies: ${failed} problem(s) against the rules of ${CONFIG_NAME}`,
  );
  return `${lines.join('\n').trimStart()}\n`;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  if (args.includes('--help')) {
    process.stdout.write(
      'Usage: npm run check:deps [-- --base-dir <dir>]\n' +
        'Checks the rules of .dependency-cruiser.cjs: no import cycle, no two folders importing each other.\n' +
        'Example: npm run check:deps\n',
    );
    process.exit(0);
  }
  const at = args.indexOf('--base-dir');
  const baseDir = at >= 0 ? args[at + 1] : undefined;
  const report = await checkDependencies(baseDir === undefined ? {} : { baseDir });
  process.stdout.write(formatReport(report));
  process.exit(report.violations.length + report.staleKnown.length === 0 ? 0 : 1);
}
