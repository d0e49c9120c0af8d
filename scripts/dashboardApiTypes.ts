/**
 * The API types of the dashboard (src/dashboard/types/api.d.ts), written from the ones src/client derives
 * from the routes' zod schemas. The dashboard is plain JavaScript type-checked through JSDoc with the
 * DOM's types, which cannot load the server's modules; it reads these types as `Api.<Name>` instead,
 * each written out in full here. `npm run typecheck` (and the type-check phase of `npm test`) runs this
 * before checking the dashboard, so a route whose answer changes under the dashboard fails the check.
 *
 * @example
 * npx tsx scripts/dashboardApiTypes.ts           # writes the file, says whether it changed
 * npx tsx scripts/dashboardApiTypes.ts --check   # exits 1 when the file is not what the routes say
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import prettier from 'prettier';
import ts from 'typescript';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));
const CLIENT = join(REPO_ROOT, 'src/client/index.ts');
export const DASHBOARD_API_TYPES = join(REPO_ROOT, 'src/dashboard/types/api.d.ts');

/** The client's types the dashboard reads (src/client/index.ts exports each). */
const NAMES = [
  'ConnectionRecord',
  'ConnectionSummary',
  'EnvironmentVariable',
  'EnvironmentView',
  'Integration',
  'LogLine',
  'SyncRun',
  'SyncStatus',
  'WebhookDelivery',
] as const;

export async function dashboardApiTypes(): Promise<string> {
  const config = ts.getParsedCommandLineOfConfigFile(join(REPO_ROOT, 'tsconfig.json'), undefined, {
    ...ts.sys,
    onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
      throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
    },
  });
  if (!config) throw new Error('tsconfig.json could not be read');
  const program = ts.createProgram({ rootNames: [CLIENT], options: config.options });
  const checker = program.getTypeChecker();
  const file = program.getSourceFile(CLIENT);
  const module = file && checker.getSymbolAtLocation(file);
  if (!module) throw new Error(`${CLIENT} was not found`);
  const exported = new Map(checker.getExportsOfModule(module).map((symbol) => [symbol.name, symbol]));
  const lines = NAMES.map((name) => {
    const symbol = exported.get(name);
    if (!symbol) throw new Error(`src/client/index.ts exports no type ${name}`);
    const target = symbol.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(symbol) : symbol;
    const text = checker.typeToString(
      checker.getDeclaredTypeOfSymbol(target),
      undefined,
      ts.TypeFormatFlags.NoTruncation | ts.TypeFormatFlags.InTypeAlias | ts.TypeFormatFlags.UseStructuralFallback,
    );
    return `  type ${name} = ${text};`;
  });
  const source = [
    "// Written by scripts/dashboardApiTypes.ts from src/client/index.ts (the routes' schemas): do not edit.",
    '// `npm run typecheck` writes it again before checking the dashboard.',
    'declare namespace Api {',
    ...lines,
    '}',
    '',
  ].join('\n');
  const options = await prettier.resolveConfig(DASHBOARD_API_TYPES);
  return prettier.format(source, { ...options, parser: 'typescript' });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const next = await dashboardApiTypes();
  let current: string | undefined;
  try {
    current = readFileSync(DASHBOARD_API_TYPES, 'utf8');
  } catch {
    current = undefined;
  }
  if (process.argv.includes('--check')) {
    if (current !== next) {
      process.stderr.write(
        'src/dashboard/types/api.d.ts is not what the routes say: run `npx tsx scripts/dashboardApiTypes.ts`\n',
      );
      process.exit(1);
    }
  } else if (current !== next) {
    writeFileSync(DASHBOARD_API_TYPES, next);
    process.stdout.write('src/dashboard/types/api.d.ts written again from the routes\n');
  }
}
