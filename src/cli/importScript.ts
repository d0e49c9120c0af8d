/**
 * One TypeScript file of a project in the de-facto format, rewritten for service-integrations/ by
 * `service import`: the helper types it imports from the generated models file get this service's
 * names (`NangoSync` → `ServiceSync`, `NangoAction` → `ServiceAction`, any `Nango<X>` whose
 * `Service<X>` models.ts exports), imports of the models the format generates (`models.ts`, and
 * `.nango/schema.ts` in its later versions) point at models.ts, and relative imports are rewritten
 * when the file moves (the older layout kept scripts beside nango.yaml). Everything else is left as written. Pure: text in, text and
 * what changed out; names models.ts does not export are reported, not guessed.
 */
import { dirname, isAbsolute, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

export interface ScriptRewriteInput {
  source: string;
  /** Where the file was, absolute. */
  from: string;
  /** Where it goes, absolute. */
  to: string;
  /** The source project's models file without extension (`…/nango-integrations/models`). */
  sourceModels: string;
  /** The target's models file without extension (`…/service-integrations/models`). */
  targetModels: string;
  /** The source project's folder and the target's: a relative import keeps its place between them. */
  sourceRoot: string;
  targetRoot: string;
  /** Names the target's models.ts exports (models and helper types). */
  modelsExports: ReadonlySet<string>;
}

export interface ScriptRewriteProblem {
  line: number;
  column: number;
  message: string;
}

export interface ScriptRewrite {
  text: string;
  /** Type renames done, `NangoSync → ServiceSync`, once per name. */
  renames: string[];
  /** Relative imports rewritten because the file moved. */
  movedImports: number;
  problems: ScriptRewriteProblem[];
}

const withoutExtension = (path: string): string => path.replace(/\.(?:[cm]?[jt]s|tsx?)$/, '');

function relativeSpecifier(fromFile: string, target: string, keepExtension: string): string {
  let spec = relative(dirname(fromFile), target).split(sep).join('/');
  if (!spec.startsWith('.')) spec = `./${spec}`;
  return `${spec}${keepExtension}`;
}

/** What `name` from the models file becomes here, or null when models.ts exports nothing for it. */
export function renamedHelperType(name: string, modelsExports: ReadonlySet<string>): string | null {
  if (modelsExports.has(name)) return name;
  if (name.startsWith('Nango')) {
    const service = `Service${name.slice('Nango'.length)}`;
    if (modelsExports.has(service)) return service;
  }
  return null;
}

/** Identifier nodes that are names of something else (a property, a member): never renamed. */
function isMemberName(node: ts.Identifier): boolean {
  const parent = node.parent;
  return (
    (ts.isPropertyAccessExpression(parent) && parent.name === node) ||
    (ts.isQualifiedName(parent) && parent.right === node) ||
    ((ts.isPropertyAssignment(parent) ||
      ts.isPropertySignature(parent) ||
      ts.isPropertyDeclaration(parent) ||
      ts.isMethodDeclaration(parent) ||
      ts.isMethodSignature(parent) ||
      ts.isEnumMember(parent) ||
      ts.isGetAccessor(parent) ||
      ts.isSetAccessor(parent)) &&
      parent.name === node) ||
    ts.isImportSpecifier(parent) ||
    ts.isExportSpecifier(parent)
  );
}

export function rewriteScript(input: ScriptRewriteInput): ScriptRewrite {
  const file = ts.createSourceFile(input.from, input.source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const edits: { start: number; end: number; text: string }[] = [];
  const problems: ScriptRewriteProblem[] = [];
  const renames = new Set<string>();
  const localRenames = new Map<string, string>();
  let movedImports = 0;
  const moved = input.from !== input.to;
  const at = (node: ts.Node): { line: number; column: number } => {
    const { line, character } = file.getLineAndCharacterOfPosition(node.getStart(file));
    return { line: line + 1, column: character + 1 };
  };

  const visitSpecifier = (literal: ts.StringLiteralLike, clause: ts.ImportClause | undefined): void => {
    const specifier = literal.text;
    if (!specifier.startsWith('.')) return;
    const target = resolve(dirname(input.from), specifier);
    const extension = /\.(?:[cm]?js|ts)$/.exec(specifier)?.[0] ?? '';
    // The format's later versions also generate the models as .nango/schema.ts beside nango.yaml.
    const isModels =
      withoutExtension(target) === input.sourceModels ||
      withoutExtension(target) === join(input.sourceRoot, '.nango', 'schema');
    const inside = relative(input.sourceRoot, target);
    if (!isModels && (inside.startsWith('..') || isAbsolute(inside))) {
      problems.push({
        ...at(literal),
        message: `imports '${specifier}', outside the project folder: copy what it needs into the integration's folder`,
      });
      return;
    }
    if (moved || isModels) {
      const newTarget = isModels ? input.targetModels : resolve(input.targetRoot, inside);
      const rewritten = relativeSpecifier(input.to, isModels ? newTarget : withoutExtension(newTarget), extension);
      const original = specifier;
      if (rewritten !== original && (moved || withoutExtension(rewritten) !== withoutExtension(original))) {
        edits.push({ start: literal.getStart(file) + 1, end: literal.getEnd() - 1, text: rewritten });
        movedImports++;
      }
    }
    if (!isModels || clause === undefined) return;
    const bindings = clause.namedBindings;
    if (bindings === undefined || !ts.isNamedImports(bindings)) return;
    for (const element of bindings.elements) {
      const imported = (element.propertyName ?? element.name).text;
      if (!/^Nango/.test(imported) && input.modelsExports.has(imported)) continue;
      const replacement = renamedHelperType(imported, input.modelsExports);
      if (replacement === null) {
        problems.push({
          ...at(element),
          message: `'${imported}' is not exported by the generated models.ts of this service (neither as '${imported}' nor as 'Service${imported.replace(/^Nango/, '')}')`,
        });
        continue;
      }
      if (replacement === imported) continue;
      renames.add(`${imported} → ${replacement}`);
      const name = element.propertyName ?? element.name;
      edits.push({ start: name.getStart(file), end: name.getEnd(), text: replacement });
      // `NangoSync as Sync` keeps the local name; a plain `NangoSync` is renamed wherever it is used.
      if (element.propertyName === undefined) localRenames.set(imported, replacement);
    }
  };

  const visitImports = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      visitSpecifier(node.moduleSpecifier, node.importClause);
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      visitSpecifier(node.moduleSpecifier, undefined);
    } else if (
      ts.isCallExpression(node) &&
      node.expression.kind === ts.SyntaxKind.ImportKeyword &&
      node.arguments[0] !== undefined &&
      ts.isStringLiteralLike(node.arguments[0])
    ) {
      visitSpecifier(node.arguments[0], undefined);
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      const literal = node.argument.literal;
      if (ts.isStringLiteral(literal)) visitSpecifier(literal, undefined);
    }
    ts.forEachChild(node, visitImports);
  };
  visitImports(file);

  if (localRenames.size > 0) {
    const visitNames = (node: ts.Node): void => {
      if (ts.isIdentifier(node) && !isMemberName(node)) {
        const replacement = localRenames.get(node.text);
        if (replacement !== undefined)
          edits.push({ start: node.getStart(file), end: node.getEnd(), text: replacement });
      }
      ts.forEachChild(node, visitNames);
    };
    visitNames(file);
  }

  let text = input.source;
  for (const edit of edits.sort((a, b) => b.start - a.start)) {
    text = text.slice(0, edit.start) + edit.text + text.slice(edit.end);
  }
  return { text, renames: [...renames], movedImports, problems };
}
