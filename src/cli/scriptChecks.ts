/**
 * Rules a script must follow beyond type-checking, checked on its syntax tree so the error names the
 * exact place: imports only of the generated models and `integration-service/runtime` (a script is
 * bundled alone and runs sandboxed), no sync-only helpers in actions, a default export.
 */
import { dirname, resolve } from 'node:path';
import ts from 'typescript';
import { RUNTIME_SPECIFIER } from '../config/generateModels.js';
import type { ProjectProblem, ScriptKind } from './project.js';

const SYNC_ONLY_HELPERS = new Set(['batchSave', 'batchDelete']);

export interface ScriptCheckInput {
  /** Absolute path of the script. */
  file: string;
  /** Path printed in problems (relative to the project root). */
  displayFile: string;
  source: string;
  kind: ScriptKind;
  /** Absolute path of models.ts. */
  modelsFile: string;
}

function importsModels(specifier: string, file: string, modelsFile: string): boolean {
  if (!specifier.startsWith('.')) return false;
  const target = resolve(dirname(file), specifier).replace(/\.(?:js|ts)$/, '');
  return target === modelsFile.replace(/\.ts$/, '');
}

export function checkScript(input: ScriptCheckInput): ProjectProblem[] {
  const sourceFile = ts.createSourceFile(input.file, input.source, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const problems: ProjectProblem[] = [];
  const report = (node: ts.Node, code: string, message: string): void => {
    const { line, character } = sourceFile.getLineAndCharacterOfPosition(node.getStart(sourceFile));
    problems.push({ severity: 'error', code, message, file: input.displayFile, line: line + 1, column: character + 1 });
  };
  const checkSpecifier = (node: ts.Node, specifier: string): void => {
    if (specifier === RUNTIME_SPECIFIER || importsModels(specifier, input.file, input.modelsFile)) return;
    report(
      node,
      'forbidden_import',
      `scripts cannot import '${specifier}': only the generated models ('../../models') and '${RUNTIME_SPECIFIER}' (each script is bundled alone and runs sandboxed; share code through svc.triggerAction)`,
    );
  };
  let hasDefault = false;

  const visit = (node: ts.Node): void => {
    if ((ts.isImportDeclaration(node) || ts.isExportDeclaration(node)) && node.moduleSpecifier !== undefined) {
      if (ts.isStringLiteral(node.moduleSpecifier)) checkSpecifier(node.moduleSpecifier, node.moduleSpecifier.text);
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
        checkSpecifier(argument.literal, argument.literal.text);
    }

    if (input.kind === 'action') {
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

  if (!hasDefault) {
    problems.push({
      severity: 'error',
      code: 'missing_default_export',
      message: `a ${input.kind} script must default-export its async function (export default async function …)`,
      file: input.displayFile,
      line: 1,
      column: 1,
    });
  }
  return problems;
}
