/**
 * Rules a script must follow beyond type-checking, checked on its syntax tree so the error names the
 * exact place: imports only of its own files inside service-integrations/, the runtime and the
 * allow-list of src/cli/scriptModules.ts (a script is bundled with what it imports and runs
 * sandboxed), no sync-only helpers in actions, a default export. The files a script imports are
 * checked by the same import rules (`role: 'helper'`).
 */
import { dirname, isAbsolute, relative, resolve } from 'node:path';
import ts from 'typescript';
import type { ProjectProblem, ScriptKind } from './project.js';
import { forbiddenImportMessage, isAllowedPackage, resolveProjectImport } from './scriptModules.js';

const SYNC_ONLY_HELPERS = new Set([
  'batchSave',
  'batchDelete',
  'getCheckpoint',
  'saveCheckpoint',
  'clearCheckpoint',
  'trackDeletesStart',
  'trackDeletesEnd',
]);

export interface ScriptCheckInput {
  /** Absolute path of the script. */
  file: string;
  /** Path printed in problems (relative to the project root). */
  displayFile: string;
  source: string;
  kind: ScriptKind;
  /** A script (its default export, its helpers) or a file a script imports (the import rules only). */
  role?: 'script' | 'helper';
  /** Absolute path of service-integrations/: relative imports must stay inside it (default: models.ts's folder). */
  folder?: string;
  /** Absolute path of models.ts (service-integrations/models.ts), when `folder` is not given. */
  modelsFile?: string;
}

export interface ScriptCheck {
  problems: ProjectProblem[];
  /** The project files the file imports (relative imports that resolve to a file), to check in turn. */
  imports: string[];
}

function insideFolder(folder: string, file: string): boolean {
  const path = relative(folder, file);
  return path !== '' && !path.startsWith('..') && !isAbsolute(path);
}

/** Whether an import or export declaration brings only types (erased: it loads nothing). */
function typeOnly(node: ts.ImportDeclaration | ts.ExportDeclaration): boolean {
  if (ts.isExportDeclaration(node)) {
    if (node.isTypeOnly) return true;
    const clause = node.exportClause;
    return (
      clause !== undefined &&
      ts.isNamedExports(clause) &&
      clause.elements.length > 0 &&
      clause.elements.every((e) => e.isTypeOnly)
    );
  }
  const clause = node.importClause;
  if (clause === undefined) return false;
  if (clause.isTypeOnly) return true;
  if (clause.name !== undefined) return false;
  const bindings = clause.namedBindings;
  return (
    bindings !== undefined &&
    ts.isNamedImports(bindings) &&
    bindings.elements.length > 0 &&
    bindings.elements.every((e) => e.isTypeOnly)
  );
}

/** The problems of one file (checkScriptFile without the imports it names). */
export function checkScript(input: ScriptCheckInput): ProjectProblem[] {
  return checkScriptFile(input).problems;
}

/** The problems of one file, and the project files it imports (to check in turn). */
export function checkScriptFile(input: ScriptCheckInput): ScriptCheck {
  const role = input.role ?? 'script';
  const folder = input.folder ?? (input.modelsFile === undefined ? undefined : dirname(input.modelsFile));
  if (folder === undefined) throw new Error('checkScript needs the folder of service-integrations/ (or models.ts)');
  const imports: string[] = [];
  const sourceFile = ts.createSourceFile(input.file, input.source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const problems: ProjectProblem[] = [];
  const report = (node: ts.Node, code: string, message: string): void => {
    const { line, character } = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile));
    problems.push({ severity: 'error', code, message, file: input.displayFile, line: line + 1, column: character + 1 });
  };
  const checkSpecifier = (node: ts.Node, specifier: string, typesOnly = false): void => {
    if (specifier.startsWith('.') || isAbsolute(specifier)) {
      const target = resolve(dirname(input.file), specifier);
      if (!insideFolder(folder, target)) {
        report(
          node,
          'forbidden_import',
          `scripts cannot import '${specifier}': it is outside service-integrations/ (only the project's files inside that folder are bundled into a script)`,
        );
        return;
      }
      const file = resolveProjectImport(input.file, specifier);
      if (file !== undefined && !typesOnly && !imports.includes(file)) imports.push(file);
      return;
    }
    if (typesOnly || isAllowedPackage(specifier)) return;
    report(node, 'forbidden_import', forbiddenImportMessage(specifier));
  };
  let hasDefault = false;

  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined) {
      if (ts.isStringLiteral(node.moduleSpecifier)) {
        checkSpecifier(node.moduleSpecifier, node.moduleSpecifier.text, typeOnly(node));
      }
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      const expression = node.moduleReference.expression;
      if (ts.isStringLiteral(expression)) checkSpecifier(expression, expression.text);
    } else if (ts.isCallExpression(node)) {
      const isImport = node.expression.kind === ts.SyntaxKind.ImportKeyword;
      const isRequire = ts.isIdentifier(node.expression) && node.expression.text === 'require';
      if (isImport || isRequire) {
        const first = node.arguments[0];
        if (first !== undefined && ts.isStringLiteralLike(first)) checkSpecifier(first, first.text);
        else report(node, 'forbidden_import', 'scripts cannot load modules at run time (dynamic import or require)');
      }
    } else if (ts.isImportTypeNode(node)) {
      const argument = node.argument;
      if (ts.isLiteralTypeNode(argument) && ts.isStringLiteral(argument.literal))
        checkSpecifier(argument.literal, argument.literal.text, true);
    }

    if (input.kind === 'action' && role === 'script') {
      let helper: string | undefined;
      if (ts.isPropertyAccessExpression(node)) helper = node.name.text;
      else if (ts.isElementAccessExpression(node) && ts.isStringLiteralLike(node.argumentExpression))
        helper = node.argumentExpression.text;
      else if (ts.isBindingElement(node)) {
        const key = node.propertyName ?? node.name;
        if (ts.isIdentifier(key) || ts.isStringLiteralLike(key)) helper = key.text;
      }
      if (helper !== undefined && SYNC_ONLY_HELPERS.has(helper)) {
        report(
          node,
          'sync_only_helper',
          `svc.${helper} is for sync scripts only: an action returns its result instead of storing records`,
        );
      }
    }

    if (ts.isExportAssignment(node) && node.isExportEquals !== true) hasDefault = true;
    if (
      (ts.isFunctionDeclaration(node) || ts.isClassDeclaration(node)) &&
      node.modifiers?.some((m) => m.kind === ts.SyntaxKind.DefaultKeyword) === true
    ) {
      hasDefault = true;
    }
    if (ts.isExportSpecifier(node) && node.name.text === 'default') hasDefault = true;
    ts.forEachChild(node, visit);
  };
  visit(sourceFile);

  if (!hasDefault && role === 'script') {
    problems.push({
      severity: 'error',
      code: 'missing_default_export',
      message: `a ${input.kind} script must default-export its async function (export default async function …)`,
      file: input.displayFile,
      line: 1,
      column: 1,
    });
  }
  return { problems, imports };
}
