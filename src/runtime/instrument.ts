/**
 * Loop protection for deployed scripts (docs/architecture.md "Runaway scripts"). Before a bundle is
 * evaluated in the workflow sandbox, a call to a budget function is inserted at the top of every loop
 * body and every function body. The sandbox side (workflows/scriptBudget.ts) counts those calls and
 * ends a run whose script has run too long without awaiting a svc operation: an endless loop then
 * fails its own run with `script_timeout` instead of hitting the isolate timeout, which takes the
 * whole worker process down with every other run on it.
 *
 * This runs on the host, in the step that loads the bundle, so the instrumented code is what the
 * run's history records: a replay evaluates exactly the same code.
 */
import { parse, type Node } from 'acorn';
import { simple } from 'acorn-walk';
import MagicString from 'magic-string';

/** The parameter name the instrumented code calls; chosen so no bundle clashes with it. */
export function budgetFunctionName(code: string): string {
  let name = '__svcBudget';
  while (code.includes(name)) name += '_';
  return name;
}

type AnyNode = Node & Record<string, unknown>;

/**
 * Returns the bundle with budget calls inserted, or throws a SyntaxError (with its position) when the
 * bundle does not parse.
 *
 * The walk visits a node after its children, so a nested loop's insertions are made before its
 * parent's. Where two insertions meet at one position, an opener goes before the openers already there
 * (the outer brace outside the inner one) and after every closer (the previous node's `}` or `)`), and
 * a closer goes after the closers already there (inner first).
 */
export function instrumentScript(code: string, budget: string): string {
  const call = `${budget}();`;
  // The bundle becomes the body of a function (workflows/runScript.ts): `return` at its top is legal.
  const program = parse(code, {
    ecmaVersion: 'latest',
    sourceType: 'script',
    allowHashBang: true,
    allowReturnOutsideFunction: true,
  });
  const output = new MagicString(code);
  const open = (at: number, text: string): void => void output.prependRight(at, text);
  const close = (at: number, text: string): void => void output.appendLeft(at, text);

  // A statement body: inside its braces, or wrapped in braces of its own.
  function guardStatement(body: Node): void {
    if (body.type === 'BlockStatement') {
      open(body.start + 1, call);
    } else {
      open(body.start, `{${call}`);
      close(body.end, '}');
    }
  }

  // A function body: after its directive prologue ("use strict" must stay first to count).
  function guardFunction(body: AnyNode): void {
    if (body.type !== 'BlockStatement') {
      // An expression-bodied arrow: (budget(), expression).
      open(body.start, `(${budget}(),`);
      close(body.end, ')');
      return;
    }
    let at = body.start + 1;
    let afterDirective = false;
    for (const statement of body['body'] as AnyNode[]) {
      if (statement.type !== 'ExpressionStatement' || typeof statement['directive'] !== 'string') break;
      at = statement.end;
      afterDirective = true;
    }
    // A directive may end without a semicolon ('use strict' then a new line): supply one.
    open(at, afterDirective ? `;${call}` : call);
  }

  const loop = (node: Node & { body: Node }): void => guardStatement(node.body);
  const fn = (node: Node & { body: Node }): void => guardFunction(node.body as AnyNode);
  simple(program, {
    ForStatement: loop,
    ForInStatement: loop,
    ForOfStatement: loop,
    WhileStatement: loop,
    DoWhileStatement: loop,
    // FunctionDeclaration, FunctionExpression and ArrowFunctionExpression all walk as `Function`.
    Function: fn,
  });
  return output.toString();
}
