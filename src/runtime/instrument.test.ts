import { describe, expect, it } from 'vitest';
import { blame } from '../temporal/scriptThreads.js';
import { budgetFunctionName, instrumentScript } from './instrument.js';

/** Runs instrumented CommonJS code with a counting budget; returns its default export's result and the count. */
function run(code: string, ...args: unknown[]): { result: unknown; calls: number } {
  const budget = budgetFunctionName(code);
  const instrumented = instrumentScript(code, budget);
  let calls = 0;
  const module: { exports: { default?: (...a: unknown[]) => unknown } } = { exports: {} };
  // eslint-disable-next-line @typescript-eslint/no-implied-eval -- evaluating the instrumented bundle is the point
  const factory = new Function('module', budget, instrumented) as (m: typeof module, b: () => void) => void;
  factory(module, () => {
    calls++;
  });
  return { result: module.exports.default?.(...args), calls };
}

describe('loop protection (instrumentScript)', () => {
  it('counts every loop turn and every function call, and keeps what the code does', () => {
    const { result, calls } = run(
      `
      module.exports.default = function (n) {
        let sum = 0;
        for (let i = 0; i < n; i++) sum += i;           // n turns
        let j = 0; while (j < n) j++;                    // n turns
        do j--; while (j > 0);                           // n turns, no braces
        for (const k of [1, 2]) sum += k;                // 2 turns
        for (const k in { a: 1 }) sum += k.length;       // 1 turn
        const twice = (x) => x * 2;                      // expression-bodied arrow
        const obj = () => ({ v: 1 });                    // object literal body keeps its parentheses
        return [sum, twice(3), obj().v];
      };`,
      10,
    );
    expect(result).toEqual([45 + 3 + 1, 6, 1]);
    // default export (1) + 3 loops of 10 + 2 + 1 + twice (1) + obj (1)
    expect(calls).toBe(1 + 30 + 3 + 2);
  });

  it('leaves a function\'s "use strict" directive first, so strictness is unchanged', () => {
    const { result } = run(
      `module.exports.default = function () { 'use strict'; return (function () { return this; })() === undefined; };`,
    );
    expect(result).toBe(true);
  });

  it('a directive without a semicolon and a return at the top of the bundle stay valid', () => {
    const { result } = run(
      "module.exports.default = function () {\n  'use strict'\n  return (function () { return this; })() === undefined;\n};\nreturn;",
    );
    expect(result).toBe(true);
  });

  it('labels, continue and nested single-statement loops stay valid', () => {
    const { result } = run(`module.exports.default = function () {
      let n = 0;
      outer: for (let i = 0; i < 3; i++) for (let j = 0; j < 3; j++) { if (j === 1) continue outer; n++; }
      return n;
    };`);
    expect(result).toBe(3);
  });

  it('picks a budget name that the bundle does not use', () => {
    expect(budgetFunctionName('const x = 1;')).toBe('__svcBudget');
    expect(budgetFunctionName('const __svcBudget = 1;')).toBe('__svcBudget_');
  });

  it('refuses a bundle that does not parse, with the position', () => {
    expect(() => instrumentScript('function (', '__b')).toThrow(/\(1:9\)/);
  });
});

describe('blame for a dead worker (thread marks)', () => {
  it('names the run that grew the heap the most when it grew it by 8 MB or more, else the run executing', () => {
    expect(blame(`sync:a\nsync:hog\n${80 * 1024 * 1024}    `)).toEqual({ workflowId: 'sync:hog', heavy: true });
    expect(blame(`sync:a\nsync:b\n${1024}   `)).toEqual({ workflowId: 'sync:a', heavy: false });
    expect(blame(`\nsync:hog\n${9 * 1024 * 1024}`)).toEqual({ workflowId: 'sync:hog', heavy: true });
    expect(blame(`\n\n0      `)).toBeUndefined();
    expect(blame('')).toBeUndefined();
  });

  it("names the execution (run id, then workflow id) that a thread marks since issue 31, so that a sync entity's next run is never blamed for its previous one", () => {
    expect(blame(`r1\tsync:e:i:c:s\n\n0`)).toEqual({ workflowId: 'sync:e:i:c:s', runId: 'r1', heavy: false });
    expect(blame(`r1\tsync:a\nr2\tsync:hog\n${80 * 1024 * 1024}`)).toEqual({
      workflowId: 'sync:hog',
      runId: 'r2',
      heavy: true,
    });
  });
});
