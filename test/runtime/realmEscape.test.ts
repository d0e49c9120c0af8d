/**
 * Routes out of a script's own realm that isolation.test.ts and sandbox.test.ts do not take (issue 15's
 * second attack pass wrote them): errors of the workflow realm, callers, and code that runs outside
 * every drain and activation. Each case attacks and asserts the OUTCOME the threat model promises (no
 * secret obtained, the worker alive, the time limit enforced); a failing case is an open route. The worker-killing case leaves an unhandled "Workflow Worker Thread exited
 * prematurely" from the harness's workers.run(): that is the attack's effect, not a harness fault.
 */
import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import type { ConnectionScope } from '../../src/connections/types.js';
import type { ConnectionRecord } from '../../src/runtime/public.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { TestConnections } from '../kit/testConnections.js';

const VICTIM_ENV = 'victim-env';

class PerEnvironmentKeys extends TestConnections {
  override async getConnection(scope: ConnectionScope): Promise<ConnectionRecord> {
    const record = await super.getConnection(scope);
    return { ...record, credentials: { type: 'API_KEY', apiKey: `secret-of-${scope.environmentId}` } };
  }
}

/**
 * Source of `escape()`: recurses to the stack limit and, at every depth on the way back, calls
 * `attempt` (source text), which makes the script realm call a function of the bridge. When the stack
 * runs out inside that function (a function of the workflow realm, or a builtin it calls), V8 creates
 * the RangeError in the workflow realm. `attempt` puts every error that is not of the script realm in
 * `candidates`; `escape()` answers the first whose constructor's constructor compiles code.
 */
function escapeSource(attempt: string, window = 300, rounds = 20): string {
  return `
  async function escape() {
    const candidates = [];
    const keep = (e) => { if (!(e instanceof Error) && candidates.length < 50) candidates[candidates.length] = e; };
    const attempt = ${attempt};
    // On the way back from the deepest frame of a pass, attempt only in the last frames (window).
    let deepest = 0;
    function f0(d) { if (d > deepest) deepest = d; try { f0(d + 1); } catch (e) {} if (d >= deepest - ${window}) attempt(); }
    function f1(d, a) { if (d > deepest) deepest = d; try { f1(d + 1, a); } catch (e) {} if (d >= deepest - ${window}) attempt(); }
    function f2(d, a, b) { if (d > deepest) deepest = d; try { f2(d + 1, a, b); } catch (e) {} if (d >= deepest - ${window}) attempt(); }
    function f3(d, a, b, c, x) { if (d > deepest) deepest = d; try { f3(d + 1, a, b, c, x); } catch (e) {} if (d >= deepest - ${window}) attempt(); }
    const passes = [() => f0(0), () => f1(0, 1), () => f2(0, 1, 2), () => f3(0, 1, 2, 3, 4)];
    for (let round = 0; round < ${rounds}; round++) {
      deepest = 0;
      passes[round % passes.length]();
      await new Promise((resolve) => setTimeout(resolve, 1));
      for (const error of candidates.splice(0)) {
        try { if (error.constructor.constructor('return 1')() === 1) return error; } catch (e) {}
      }
    }
    return null;
  }
`;
}

/**
 * Source that registers objects with `registry` and churns the heap (awaiting a svc operation between
 * steps) until `until` (source) holds or 300 steps passed: collections run, and with them the
 * registry's cleanup callbacks. Leaves `step` defined.
 */
function churn(until: string): string {
  return `
    const ring = [];
    let step = 0;
    for (; step < 300 && !(${until}); step++) {
      for (let i = 0; i < 20; i++) registry.register({ step, i }, step);
      const junk = [];
      for (let j = 0; j < 20000; j++) junk.push({ j, text: 'x' + j });
      ring[step % 4] = junk;
      await svc.getMetadata();
    }`;
}

/** Through `new URL()`: the bridge's parseUrl (its JSON.stringify) overflows. */
const ESCAPE = escapeSource(`() => { const U = URL; try { new U('http://a/'); } catch (e) { keep(e); } }`);

describe('a script stays inside its realm', () => {
  it("a stack overflow inside the bridge hands the script no workflow-realm error: another environment's API key stays unread", async () => {
    const h = await useRuntime({ connections: () => new PerEnvironmentKeys() });
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // The attacker (environment "test"): escapes, plants getters on the workflow realm's
    // Object.prototype that copy every connection record passing through any run on the thread,
    // and answers what was copied so far.
    const attacker = await h.scripts.put(
      bundle(`async function (svc) {
        ${ESCAPE}
        const found = await escape();
        if (!found) return { escaped: false };
        const WorkflowFunction = found.constructor.constructor;
        const loot = WorkflowFunction(\`
          const key = Symbol.for('realmEscape.loot');
          if (!Object.prototype.hasOwnProperty(key)) {
            const loot = [];
            Object.defineProperty(Object.prototype, key, { value: loot });
            let busy = false;
            const grab = function () {
              if (!busy && this !== null && typeof this === 'object' && Object.prototype.hasOwnProperty.call(this, 'credentials')) {
                busy = true;
                try { loot.push(JSON.stringify(this.credentials)); } catch (e) {} finally { busy = false; }
              }
              return undefined;
            };
            Object.defineProperty(Object.prototype, 'then', { get: grab, configurable: true });
            Object.defineProperty(Object.prototype, 'toJSON', { get: grab, configurable: true });
          }
          return {
            activator: typeof globalThis.__TEMPORAL_ACTIVATOR__,
            loot: Object.prototype[key].slice(),
          };
        \`)();
        return { escaped: true, activator: loot.activator, loot: loot.loot };
      }`),
    );
    // The victim (another environment): reads its connection, returns nothing secret.
    const victim = await createPostgresScriptStore({ db: h.pool }).put(
      bundle(
        `async function (svc) { const c = await svc.getConnection(); return { key: typeof c.credentials.apiKey }; }`,
      ),
      VICTIM_ENV,
    );
    const victimDefinition = { ...actionDefinition('victim', victim), environmentId: VICTIM_ENV };
    const attack = () =>
      control.runAction({ definition: actionDefinition('attacker', attacker), connectionId: 'c', input: {} });
    // Two at once land on both workflow threads of the action worker.
    const planted = await Promise.all([attack(), attack()]);
    console.log('[realmEscape] planted:', JSON.stringify(planted));
    for (let i = 0; i < 3; i++) {
      expect(await control.runAction({ definition: victimDefinition, connectionId: 'v', input: {} })).toEqual({
        ok: true,
        output: { key: 'string' },
      });
    }
    const read = await Promise.all([attack(), attack()]);
    console.log('[realmEscape] read:', JSON.stringify(read));
    expect(JSON.stringify(read)).not.toContain(`secret-of-${VICTIM_ENV}`);
    expect(read).toEqual([
      { ok: true, output: { escaped: false } },
      { ok: true, output: { escaped: false } },
    ]);
  }, 120_000);
  it('a stack overflow inside console.log (bridge.log) hands the script no workflow-realm error either', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // bridge.log calls String(), String.prototype.slice and the run's bufferLog (Date, Array.prototype.includes)
    // of the workflow realm, synchronously.
    const escape = escapeSource(`() => { try { console.log('x'); } catch (e) { keep(e); } }`);
    const hash = await h.scripts.put(
      bundle(`async function (svc) {
        ${escape}
        const found = await escape();
        if (!found) return { escaped: false };
        return { escaped: true, reached: found.constructor.constructor('return typeof globalThis.__TEMPORAL_ACTIVATOR__')() };
      }`),
    );
    const outcome = await control.runAction({
      definition: actionDefinition('log', hash),
      connectionId: 'c',
      input: {},
    });
    console.log(`[realmEscape] escape through bridge.log: ${JSON.stringify(outcome)}`);
    expect(outcome).toEqual({ ok: true, output: { escaped: false } });
  }, 120_000);

  it('a sloppy-mode caller walk from any callback the bootstrap or the workflow invokes reaches none of their functions', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // A bundle without "use strict": each callback asks who called it (fn.caller, arguments.callee.caller).
    const probe = await h.scripts.put(`const seen = [];
function look(where, caller) {
  let reached = null;
  try { reached = caller ? typeof caller.constructor('return globalThis')() : null; } catch (e) { reached = 'refused'; }
  seen.push(where + ':' + (caller ? 'caller ' + reached : 'null'));
}
module.exports.default = async function (svc) {
  Object.defineProperty(Object.prototype, 'then', { configurable: true, get: function thenGetter() { look('then getter', thenGetter.caller); return undefined; } });
  await svc.getMetadata();
  delete Object.prototype.then;
  await svc.log({ toJSON: function toJSON() { look('toJSON', toJSON.caller); return 1; } }).catch(function () {});
  await new Promise(function (resolve) { setTimeout(function timer() { look('setTimeout', timer.caller); resolve(); }, 1); });
  const config = {}; Object.defineProperty(config, 'endpoint', { enumerable: true, get: function endpointGetter() { look('config getter', endpointGetter.caller); return 'http://127.0.0.1:1/'; } }); await svc.get(config).catch(function () {});
  console.log({ toJSON: function logged() { look('console', logged.caller); return 'x'; } });
  await svc.getMetadata().then(function settled() { look('then callback', settled.caller); });
  return { seen: seen.slice(0, 20) };
};
`);
    const outcome = await control.runAction({
      definition: actionDefinition('caller', probe),
      connectionId: 'c',
      input: {},
    });
    console.log(`[realmEscape] caller walks: ${JSON.stringify(outcome)}`);
    expect(JSON.stringify(outcome)).not.toContain('caller object');
  }, 120_000);

  it('a throw in a FinalizationRegistry callback, outside every drain and activation, kills neither the workflow thread nor the worker', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // No escape needed: the script's own realm has FinalizationRegistry. Its callbacks are V8 tasks on
    // the worker thread's event loop; an exception there is an uncaught exception of the thread.
    const attacker = await h.scripts.put(
      bundle(`async function (svc) {
        const registry = new FinalizationRegistry((held) => { throw new Error('thrown outside any run: ' + held); });
        ${churn('false')}
        return { survived: true };
      }`),
    );
    let attackOutcome: unknown;
    void control
      .runAction(
        { definition: actionDefinition('collector', attacker), connectionId: 'c', input: {} },
        { timeoutMs: 90_000 },
      )
      .then(
        (outcome) => (attackOutcome = outcome),
        (error: unknown) => (attackOutcome = String(error)),
      );
    const state = await eventually(
      () =>
        Promise.resolve(
          attackOutcome !== undefined || h.actionWorker.getState() !== 'RUNNING'
            ? h.actionWorker.getState()
            : undefined,
        ),
      100_000,
      'the attack to end or the worker to stop',
    );
    console.log(`[realmEscape] FinalizationRegistry throw: worker ${state}, attack ${JSON.stringify(attackOutcome)}`);
    expect(state).toBe('RUNNING');
    const bystander = await h.scripts.put(bundle(`async function (svc, input) { return input; }`));
    expect(
      await control.runAction(
        { definition: actionDefinition('bystander', bystander), connectionId: 'b', input: { n: 1 } },
        { timeoutMs: 30_000 },
      ),
    ).toEqual({ ok: true, output: { n: 1 } });
  }, 150_000);

  it('a FinalizationRegistry callback that computes outside every drain makes no bystander wait', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // One catastrophic regex (bounded: ~3-10 s on the shared machine) in a cleanup callback: not in a
    // drain (2 s), not in an activation (isolate timeout 3 s), no loop for loop protection.
    const attacker = await h.scripts.put(
      bundle(`async function (svc) {
        let fired = false;
        const registry = new FinalizationRegistry(() => {
          if (fired) return;
          fired = true;
          /^(a+)+$/.test('a'.repeat(26) + '!');
        });
        ${churn('fired')}
        return { fired, step };
      }`),
    );
    const bystander = await h.scripts.put(bundle(`async function (svc, input) { return input; }`));
    let attackOutcome: unknown;
    const started = Date.now();
    const attack = control
      .runAction(
        { definition: actionDefinition('stall', attacker), connectionId: 'c', input: {} },
        { timeoutMs: 100_000 },
      )
      .then(
        (outcome) => (attackOutcome = outcome),
        (error: unknown) => (attackOutcome = { code: (error as { code?: string }).code }),
      );
    // Bursts of three bystanders while the attack runs: some land on the attacker's thread.
    let slowest = 0;
    while (attackOutcome === undefined && Date.now() - started < 110_000) {
      const burst = await Promise.all(
        [1, 2, 3].map(async (n) => {
          const t = Date.now();
          await control.runAction(
            { definition: actionDefinition('bystander', bystander), connectionId: 'b', input: { n } },
            { timeoutMs: 60_000 },
          );
          return Date.now() - t;
        }),
      );
      slowest = Math.max(slowest, ...burst);
    }
    await attack;
    console.log(
      `[realmEscape] FinalizationRegistry stall: attack ${JSON.stringify(attackOutcome)}, slowest bystander ${slowest} ms`,
    );
    // Scripts have no FinalizationRegistry any more (script_error: not defined); were it back, the
    // stall would have to end as script_timeout. Either way no bystander waits.
    expect(attackOutcome).toEqual({ code: expect.stringMatching(/^script_(error|timeout)$/) as unknown });
    expect(slowest).toBeLessThan(3000);
  }, 150_000);

  it("a getter on the script realm's Object.prototype that runs as the bridge answers is stopped as script_timeout, and the worker lives", async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // resolve(parse(answer)) reads answer.then synchronously, inside the workflow's activation but
    // outside context.drain(): only the isolate timeout (3 s) is left to interrupt it. A regex far over
    // 3 s is stopped that way (this case); one of 2-3 s per answer gets through (measured: a 26-'a' run
    // finished "ok" in 3.7 s), where the same regex inside a drain fails the run.
    const attacker = await h.scripts.put(
      bundle(`async function (svc) {
        let once = false;
        Object.defineProperty(Object.prototype, 'then', { configurable: true, get() {
          if (!once) { once = true; /^(a+)+$/.test('a'.repeat(28) + '!'); }
          return undefined;
        } });
        await svc.getMetadata();
        delete Object.prototype.then;
        return 'finished';
      }`),
    );
    const started = Date.now();
    const outcome = await control
      .runAction(
        { definition: actionDefinition('answer-getter', attacker), connectionId: 'c', input: {} },
        { timeoutMs: 100_000 },
      )
      .catch((error: unknown) => ({ code: (error as { code?: string }).code }));
    const seconds = (Date.now() - started) / 1000;
    console.log(
      `[realmEscape] getter on the answer: ${JSON.stringify(outcome)} in ${seconds.toFixed(1)} s, worker ${h.actionWorker.getState()}`,
    );
    expect(outcome).toEqual({ code: 'script_timeout' });
    expect(h.actionWorker.getState()).toBe('RUNNING');
  }, 150_000);
});
