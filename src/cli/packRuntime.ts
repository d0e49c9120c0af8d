/**
 * Builds the files behind the package export `integration-service/runtime` before `npm pack`
 * (package.json "prepack"), and removes them after ("postpack" passes --clean):
 *   dist/runtime/public.js    ESM, for whatever loads the module at run time (a user's tests, say)
 *   dist/runtime/public.d.ts  the types, for the user's tsc and editor
 * A .d.ts rather than pointing "types" at src/runtime/public.ts: tsc type-checks a .ts file found in
 * node_modules with the user's own compiler options, so a stricter user config could fail on our file.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));
const source = `${root}src/runtime/public.ts`;
const outDir = `${root}dist/runtime`;

export function buildRuntime(): void {
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  // Bundled, so the module stays one file even if public.ts comes to import siblings.
  buildSync({
    entryPoints: [source],
    outfile: `${outDir}/public.js`,
    bundle: true,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    logLevel: 'error',
  });

  const program = ts.createProgram([source], {
    declaration: true,
    emitDeclarationOnly: true,
    strict: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    skipLibCheck: true,
    types: [],
  });
  let declaration: string | undefined;
  const result = program.emit(undefined, (fileName, text) => {
    if (fileName.endsWith('.d.ts')) declaration = text;
  });
  const errors = result.diagnostics.filter((d) => d.category === ts.DiagnosticCategory.Error);
  if (errors.length > 0 || declaration === undefined) {
    throw new Error(
      `declarations of src/runtime/public.ts failed: ${errors.map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')).join('; ')}`,
    );
  }
  writeFileSync(`${outDir}/public.d.ts`, declaration);
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--clean')) rmSync(`${root}dist`, { recursive: true, force: true });
  else buildRuntime();
}
