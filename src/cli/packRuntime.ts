/**
 * Builds the files behind the package exports before `npm pack` (package.json "prepack"), and removes
 * them after ("postpack" passes --clean); the rest of dist/ (the server's build, `npm run build`, which
 * prepack runs next, and the workflow bundle) stays:
 *   dist/runtime/public.js, public.d.ts   `integration-service/runtime`: what scripts and their tests load
 *   dist/client/index.js, index.d.ts      `integration-service/client`: the typed Node client of the REST API
 * Declarations rather than pointing "types" at the .ts sources: tsc type-checks a .ts file found in
 * node_modules with the user's own compiler options, so a stricter user config could fail on our file.
 *
 * The client's types come from the API routes' zod schemas through type-only imports of server modules
 * (src/client/index.ts). Its declaration file must not import those (they would drag in the whole server
 * and its dev-only type packages), so every type it takes from outside src/client/ is written out in
 * full (`flattenDeclaration`), and the result is checked to compile on its own.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildSync } from 'esbuild';
import ts from 'typescript';

const root = fileURLToPath(new URL('../../', import.meta.url));

interface Entry {
  source: string;
  outDir: string;
  /** The file name in outDir: `<name>.js` and `<name>.d.ts`. */
  name: string;
  platform: 'neutral' | 'node';
  /** Write the types it takes from outside its own folder out in full. */
  flatten: boolean;
}

const ENTRIES: Entry[] = [
  { source: 'src/runtime/public.ts', outDir: 'dist/runtime', name: 'public', platform: 'neutral', flatten: false },
  { source: 'src/client/index.ts', outDir: 'dist/client', name: 'index', platform: 'node', flatten: true },
];

const COMPILER_OPTIONS: ts.CompilerOptions = {
  strict: true,
  exactOptionalPropertyTypes: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  skipLibCheck: true,
  types: ['node'],
};

function errorsOf(diagnostics: readonly ts.Diagnostic[]): string[] {
  return diagnostics
    .filter((d) => d.category === ts.DiagnosticCategory.Error)
    .map((d) => {
      const at = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : undefined;
      const place = d.file ? `${d.file.fileName}${at ? `:${at.line + 1}:${at.character + 1}` : ''}: ` : '';
      return `${place}${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
    });
}

/** The declaration file tsc writes for one module, its imports as they are. */
function declarationOf(source: string): string {
  const program = ts.createProgram([source], { ...COMPILER_OPTIONS, declaration: true, emitDeclarationOnly: true });
  const expected = source.replace(/\.ts$/, '.d.ts');
  let declaration: string | undefined;
  const result = program.emit(program.getSourceFile(source), (fileName, text) => {
    if (fileName === expected || fileName.endsWith(`/${expected.split('/').pop() ?? ''}`)) declaration = text;
  });
  const errors = errorsOf(result.diagnostics);
  if (errors.length > 0 || declaration === undefined) {
    throw new Error(`declarations of ${source} failed: ${errors.join('; ') || 'nothing was emitted'}`);
  }
  return declaration;
}

/** A program over `files` (path → text, beside the real files). */
function programWith(files: Map<string, string>, options: ts.CompilerOptions = COMPILER_OPTIONS): ts.Program {
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, ...rest) => {
    const text = files.get(fileName);
    return text === undefined
      ? getSourceFile(fileName, languageVersion, ...rest)
      : ts.createSourceFile(fileName, text, languageVersion, true);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (fileName) => files.has(fileName) || fileExists(fileName);
  const readFile = host.readFile.bind(host);
  host.readFile = (fileName) => files.get(fileName) ?? readFile(fileName);
  return ts.createProgram([...files.keys()], options, host);
}

/**
 * Writes a type out in full: object types of this repository become object literals (recursively);
 * types of the standard library and of Node (Date, Buffer, Headers, Record, Promise…) and named types of
 * the module itself keep their names.
 */
function createTypePrinter(program: ts.Program, ownFolder: string): (type: ts.Type) => string {
  const checker = program.getTypeChecker();
  const isLibrary = (declarations: readonly ts.Declaration[] | undefined): boolean =>
    (declarations ?? []).length > 0 &&
    (declarations ?? []).every((d) => {
      const file = d.getSourceFile();
      return program.isSourceFileDefaultLibrary(file) || file.fileName.includes('/node_modules/@types/node/');
    });
  // A symbol that names its type (Date, Buffer, an interface of the module); anonymous object types
  // (`__type`: type literals, mapped types such as Pick's) are written out instead.
  const isNamed = (symbol: ts.Symbol): boolean =>
    (symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.Class | ts.SymbolFlags.TypeAlias)) !== 0;
  const isOwn = (symbol: ts.Symbol): boolean =>
    (symbol.declarations ?? []).some((d) => d.getSourceFile().fileName.startsWith(ownFolder));
  const propertyName = (name: string): string => (/^[A-Za-z_$][\w$]*$/.test(name) ? name : JSON.stringify(name));
  const named = (name: string, args: readonly ts.Type[], seen: ReadonlySet<ts.Type>): string =>
    args.length === 0 ? name : `${name}<${args.map((arg) => print(arg, seen)).join(', ')}>`;

  function print(type: ts.Type, seen: ReadonlySet<ts.Type>): string {
    if (seen.has(type)) throw new Error(`a recursive type cannot be written out: ${checker.typeToString(type)}`);
    const inner = new Set(seen).add(type);
    const alias = type.aliasSymbol;
    if (alias && isLibrary(alias.declarations)) return named(alias.name, type.aliasTypeArguments ?? [], inner);
    if (type.isUnion()) {
      // `boolean` is the union `false | true` to the checker.
      const others = type.types.filter((member) => !(member.flags & ts.TypeFlags.BooleanLiteral));
      const both = others.length === type.types.length - 2;
      return [...(both ? others : type.types).map((member) => wrap(member, inner)), ...(both ? ['boolean'] : [])].join(
        ' | ',
      );
    }
    if (type.isIntersection()) return type.types.map((member) => wrap(member, inner)).join(' & ');
    if (!(type.flags & ts.TypeFlags.Object))
      return checker.typeToString(type, undefined, ts.TypeFormatFlags.NoTruncation);
    if (checker.isArrayType(type)) {
      const [element] = checker.getTypeArguments(type as ts.TypeReference);
      return `${wrap(element ?? checker.getUnknownType(), inner)}[]`;
    }
    if (checker.isTupleType(type)) {
      return `[${checker
        .getTypeArguments(type as ts.TypeReference)
        .map((element) => print(element, inner))
        .join(', ')}]`;
    }
    const symbol = type.getSymbol();
    if (symbol && isNamed(symbol) && (isLibrary(symbol.declarations) || isOwn(symbol))) {
      const reference = ((type as ts.ObjectType).objectFlags & ts.ObjectFlags.Reference) !== 0;
      return named(symbol.name, reference ? checker.getTypeArguments(type as ts.TypeReference) : [], inner);
    }
    if (type.getCallSignatures().length > 0 || type.getConstructSignatures().length > 0) {
      throw new Error(`a function type cannot be written out here: ${checker.typeToString(type)}`);
    }
    const members = checker.getPropertiesOfType(type).map((property) => {
      const optional = (property.flags & ts.SymbolFlags.Optional) !== 0;
      const declaration = property.valueDeclaration ?? property.declarations?.[0];
      const readonly =
        declaration !== undefined && (ts.getCombinedModifierFlags(declaration) & ts.ModifierFlags.Readonly) !== 0;
      return `${readonly ? 'readonly ' : ''}${propertyName(property.name)}${optional ? '?' : ''}: ${print(checker.getTypeOfSymbol(property), inner)};`;
    });
    for (const info of checker.getIndexInfosOfType(type)) {
      members.push(`[key: ${checker.typeToString(info.keyType)}]: ${print(info.type, inner)};`);
    }
    return `{ ${members.join(' ')} }`;
  }

  function wrap(type: ts.Type, seen: ReadonlySet<ts.Type>): string {
    const text = print(type, seen);
    return type.isUnion() || type.isIntersection() ? `(${text})` : text;
  }

  return (type) => print(type, new Set());
}

/**
 * The declaration of a module with every type it takes from another module written out in full, and
 * without those imports: a type reference that names an imported symbol (or holds one) is replaced by
 * the type it denotes. `declarationPath` places it beside its source, so that its imports resolve.
 */
export function flattenDeclaration(declaration: string, declarationPath: string): string {
  const program = programWith(new Map([[declarationPath, declaration]]));
  const file = program.getSourceFile(declarationPath);
  if (!file) throw new Error(`no source file for ${declarationPath}`);
  const checker = program.getTypeChecker();
  const printType = createTypePrinter(program, `${dirname(declarationPath)}/`);

  const imported = new Set<string>();
  const imports: ts.ImportDeclaration[] = [];
  for (const statement of file.statements) {
    if (!ts.isImportDeclaration(statement)) continue;
    const clause = statement.importClause;
    const bindings = clause?.namedBindings;
    if (clause?.name) imported.add(clause.name.text);
    if (bindings && ts.isNamespaceImport(bindings)) imported.add(bindings.name.text);
    if (bindings && ts.isNamedImports(bindings))
      for (const element of bindings.elements) imported.add(element.name.text);
    imports.push(statement);
  }
  const usesImport = (node: ts.Node): boolean =>
    (ts.isIdentifier(node) && imported.has(node.text)) ||
    ts.forEachChild(node, (child) => (usesImport(child) ? true : undefined)) === true;

  const edits: { start: number; end: number; text: string }[] = [];
  const visit = (node: ts.Node): void => {
    // `export type { WebhookDelivery };`: a re-export of an imported type becomes an alias of its own.
    if (
      ts.isExportDeclaration(node) &&
      !node.moduleSpecifier &&
      node.exportClause &&
      ts.isNamedExports(node.exportClause)
    ) {
      const aliases = node.exportClause.elements.map((element) => {
        const symbol = checker.getSymbolAtLocation(element.name);
        const target = symbol ? checker.getAliasedSymbol(symbol) : undefined;
        if (!target || !imported.has(element.name.text))
          throw new Error(`cannot write out the re-export ${element.name.text}`);
        return `export type ${element.name.text} = ${printType(checker.getDeclaredTypeOfSymbol(target))};`;
      });
      edits.push({ start: node.getStart(file), end: node.getEnd(), text: aliases.join('\n') });
      return;
    }
    const replaceable =
      ts.isTypeReferenceNode(node) ||
      ts.isTypeQueryNode(node) ||
      ts.isIndexedAccessTypeNode(node) ||
      ts.isTypeOperatorNode(node);
    if (replaceable && usesImport(node)) {
      edits.push({
        start: node.getStart(file),
        end: node.getEnd(),
        text: printType(checker.getTypeFromTypeNode(node)),
      });
      return;
    }
    ts.forEachChild(node, visit);
  };
  for (const statement of file.statements) if (!ts.isImportDeclaration(statement)) visit(statement);
  // From the import itself: a comment before it (the module's own) stays.
  for (const statement of imports) edits.push({ start: statement.getStart(file), end: statement.getEnd(), text: '' });

  let text = declaration;
  for (const edit of edits.sort((a, b) => b.start - a.start)) {
    text = text.slice(0, edit.start) + edit.text + text.slice(edit.end);
  }
  return text.replace(/\n{3,}/g, '\n\n');
}

/** Compiles a declaration file on its own, as a user's strict project would; throws on any error. */
function checkStandalone(declarationPath: string, text: string): void {
  // skipLibCheck off: a .d.ts is otherwise not checked at all.
  const program = programWith(new Map([[declarationPath, text]]), { ...COMPILER_OPTIONS, skipLibCheck: false });
  const errors = errorsOf(ts.getPreEmitDiagnostics(program)).filter((error) => error.startsWith(declarationPath));
  const imports = [...text.matchAll(/from ['"](\.[^'"]*)['"]/g)].map((match) => `it imports ${match[1] ?? ''}`);
  if (errors.length > 0 || imports.length > 0) {
    throw new Error(
      `the declarations written for ${declarationPath} do not stand on their own: ${[...errors, ...imports].join('; ')}`,
    );
  }
}

/** Removes what buildPackage writes, and nothing else of dist/. */
function clean(): void {
  for (const entry of ENTRIES) rmSync(join(root, entry.outDir), { recursive: true, force: true });
}

export function buildPackage(): void {
  clean();
  for (const entry of ENTRIES) {
    const source = join(root, entry.source);
    const outDir = join(root, entry.outDir);
    mkdirSync(outDir, { recursive: true });
    // Bundled, so the module stays one file whatever it imports at run time (type imports vanish).
    buildSync({
      entryPoints: [source],
      outfile: join(outDir, `${entry.name}.js`),
      bundle: true,
      format: 'esm',
      platform: entry.platform,
      target: 'es2022',
      logLevel: 'error',
    });
    let declaration = declarationOf(source);
    if (entry.flatten) {
      declaration = flattenDeclaration(declaration, source.replace(/\.ts$/, '.d.ts'));
      checkStandalone(join(outDir, `${entry.name}.d.ts`), declaration);
    }
    writeFileSync(join(outDir, `${entry.name}.d.ts`), declaration);
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  if (process.argv.includes('--clean')) clean();
  else buildPackage();
}
