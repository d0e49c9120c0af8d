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

/** The parameter name the instrumented code calls; chosen so no bundle clashes with it. */
export function budgetFunctionName(code: string): string {
  let name = '__svcBudget';
  while (code.includes(name)) name += '_';
  return name;
}

interface Insertion {
  at: number;
  text: string;
  /** Order among insertions at one position: closers (1) before openers (0) of a following node. */
  order: number;
}

type AnyNode = Node & Record<string, unknown>;

function isNode(value: unknown): value is AnyNode {
  return typeof value === 'object' && value !== null && typeof (value as { type?: unknown }).type === 'string';
}

function children(node: AnyNode): AnyNode[] {
  const found: AnyNode[] = [];
  for (const key of Object.keys(node)) {
    if (key === 'type' || key === 'start' || key === 'end' || key === 'loc') continue;
    const value = node[key];
    if (Array.isArray(value)) {
      for (const item of value) if (isNode(item)) found.push(item);
    } else if (isNode(value)) {
      found.push(value);
    }
  }
  return found;
}

/**
 * Returns the bundle with budget calls inserted, or throws a SyntaxError (with its position) when the
 * bundle does not parse.
 */
export function instrumentScript(code: string, budget: string): string {
  const call = `${budget}();`;
  // The bundle becomes the body of a function (workflows/runScript.ts): `return` at its top is legal.
  const program = parse(code, {
    ecmaVersion: 'latest',
    sourceType: 'script',
    allowHashBang: true,
    allowReturnOutsideFunction: true,
  }) as unknown as AnyNode;
  const insertions: Insertion[] = [];

  // A statement body: inside its braces, or wrapped in braces of its own.
  function guardStatement(body: AnyNode): void {
    if (body.type === 'BlockStatement') {
      insertions.push({ at: body.start + 1, text: call, order: 0 });
    } else {
      insertions.push({ at: body.start, text: `{${call}`, order: 0 }, { at: body.end, text: '}', order: 1 });
    }
  }

  // A function body: after its directive prologue ("use strict" must stay first to count).
  function guardFunction(body: AnyNode): void {
    if (body.type !== 'BlockStatement') {
      // An expression-bodied arrow: (budget(), expression).
      insertions.push({ at: body.start, text: `(${budget}(),`, order: 0 }, { at: body.end, text: ')', order: 1 });
      return;
    }
    const statements = body['body'] as AnyNode[];
    let at = body.start + 1;
    let afterDirective = false;
    for (const statement of statements) {
      if (statement.type !== 'ExpressionStatement' || typeof statement['directive'] !== 'string') break;
      at = statement.end;
      afterDirective = true;
    }
    // A directive may end without a semicolon ('use strict' then a new line): supply one.
    insertions.push({ at, text: afterDirective ? `;${call}` : call, order: 0 });
  }

  const stack: AnyNode[] = [program];
  while (stack.length > 0) {
    const node = stack.pop()!;
    switch (node.type) {
      case 'ForStatement':
      case 'ForInStatement':
      case 'ForOfStatement':
      case 'WhileStatement':
      case 'DoWhileStatement':
        guardStatement(node['body'] as AnyNode);
        break;
      case 'FunctionDeclaration':
      case 'FunctionExpression':
      case 'ArrowFunctionExpression':
        guardFunction(node['body'] as AnyNode);
        break;
    }
    stack.push(...children(node));
  }

  insertions.sort((a, b) => b.at - a.at || a.order - b.order);
  let result = code;
  for (const { at, text } of insertions) result = result.slice(0, at) + text + result.slice(at);
  return result;
}
