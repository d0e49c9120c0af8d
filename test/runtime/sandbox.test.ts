/**
 * The script sandbox: what a script cannot reach (workflows/scriptRealm.ts), and loop protection
 * (workflows/scriptBudget.ts, src/runtime/instrument.ts). Every case runs on the in-process test worker: an escape or an endless
 * loop that got past the guards would break this very worker, and the cases after it would fail.
 */
import { describe, expect, it } from 'vitest';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';

describe('the script sandbox', () => {
  it('no route from a script reaches the worker process or the workflow runtime', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // Each probe walks from something the script holds to a function constructor, then asks it for
    // the process or the workflow runtime. The script's realm cannot compile code, and nothing of
    // another realm is ever handed to it.
    const probes: Record<string, string> = {
      'URL.constructor': `URL.constructor('return process')()`,
      'console.log.constructor': `console.log.constructor('return process')()`,
      'TextEncoder result': `new TextEncoder().encode('x').constructor.constructor.constructor('return process')()`,
      'URLSearchParams method': `new URLSearchParams('a=1').get.constructor('return process')()`,
      'svc method': `svc.get.constructor('return process')()`,
      'svc promise': `svc.getMetadata().constructor.constructor('return globalThis.__TEMPORAL_ACTIVATOR__')()`,
      'svc error': `await svc.get({ endpoint: 'http://127.0.0.1:1/' }).catch((error) => error.constructor.constructor('return process')())`,
      'this.constructor': `this.constructor.constructor('return process')()`,
      'global lookup': `globalThis.__TEMPORAL_ACTIVATOR__ ?? globalThis.__webpack_module_cache__ ?? globalThis.__TEMPORAL__ ?? globalThis.process ?? (() => { throw new ReferenceError('nothing there'); })()`,
      eval: `eval('process')`,
      'dynamic import': `await import('node:fs')`,
      'stack trace hook': `(() => { Error.prepareStackTrace = (_, frames) => frames.map((frame) => frame.getFunction()); return new Error().stack; })()`,
      'caller walk': `(function walk() { return walk.caller && walk.caller.constructor('return process')(); })()`,
      WebAssembly: `WebAssembly.Module`,
    };
    const hashes = await Promise.all(
      Object.values(probes).map((expression) =>
        h.scripts.put(
          bundle(`async function (svc) {
            let found;
            try { found = ${expression}; } catch (error) { return { refused: String(error && error.name) }; }
            return { reached: typeof found, pid: found && typeof found === 'object' ? typeof found.pid : undefined };
          }`),
        ),
      ),
    );
    const outcomes = await Promise.all(
      hashes.map((hash, index) =>
        control.runAction({ definition: actionDefinition(`probe${index}`, hash), connectionId: 'c', input: {} }),
      ),
    );
    Object.keys(probes).forEach((name, index) => {
      expect({ name, outcome: outcomes[index] }).toEqual({
        name,
        outcome: {
          ok: true,
          output: { refused: expect.stringMatching(/^(EvalError|TypeError|ReferenceError|Error)$/) as unknown },
        },
      });
    });
  });

  it('an endless loop fails its own run with script_timeout, caught or not, and the worker carries on', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const cases = {
      plain: `async function (svc) { await svc.getMetadata(); for (;;) {} }`,
      // Swallowing the budget's error does not help: the run ends anyway.
      caught: `async function (svc) { for (;;) { try { for (;;) {} } catch (error) { await svc.getMetadata().catch(() => 1); } } }`,
      'never settles': `async function () { try { while (true) {} } catch { return new Promise(() => {}); } }`,
      'microtask loop': `async function () { const spin = () => Promise.resolve().then(spin); await spin(); }`,
      'at load time': `(() => { for (;;) {} })()`,
      // Each turn takes ~0.1 ms: the budget must not take the time between two looks for waiting.
      'slow turns': `async function () { const s = JSON.stringify(Array.from({ length: 2000 }, (_, i) => ({ i, name: 'item ' + i }))); for (;;) JSON.parse(s); }`,
    };
    const started = Date.now();
    // One after another: several loops at once on one workflow thread would each wait for the
    // others' budgets (the crowd is test/chaos/scripts.test.ts).
    const outcomes: unknown[] = [];
    for (const [name, source] of Object.entries(cases)) {
      outcomes.push(
        await (async () => {
          const hash = await h.scripts.put(bundle(source));
          const outcome = await control
            .runAction({ definition: actionDefinition(name.replace(/ /g, '-'), hash), connectionId: 'c', input: {} })
            .catch((error: unknown) => error);
          console.log(`[sandbox] ${name} after ${((Date.now() - started) / 1000).toFixed(1)} s: ${String(outcome)}`);
          return outcome;
        })(),
      );
    }
    const seconds = (Date.now() - started) / 1000;
    console.log(`[sandbox] ${Object.keys(cases).length} endless loops stopped in ${seconds.toFixed(1)} s`);
    for (const outcome of outcomes) {
      expect(outcome).toMatchObject({
        code: 'script_timeout',
        message: expect.stringMatching(
          /(ran|computed) for more than \d s .*without awaiting a svc operation/,
        ) as unknown,
      });
    }
    // The same worker still runs scripts.
    const ok = await h.scripts.put(
      bundle(`async function (svc, input) { let n = 0; for (let i = 0; i < 1e6; i++) n += i; return { n, input }; }`),
    );
    await expect(
      control.runAction({ definition: actionDefinition('ok', ok), connectionId: 'c', input: 7 }),
    ).resolves.toEqual({ ok: true, output: { n: 499999500000, input: 7 } });
  }, 120_000);
});
