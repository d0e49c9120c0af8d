import { describe, expect, it } from 'vitest';
import type { ConnectionScope } from '../../src/connections/types.js';
import type { ConnectionRecord } from '../../src/runtime/public.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, bundle, TestConnections, useRuntime } from './helpers.js';

const VICTIM_ENV = 'victim-env';

class PerEnvironmentKeys extends TestConnections {
  override async getConnection(scope: ConnectionScope): Promise<ConnectionRecord> {
    const record = await super.getConnection(scope);
    return { ...record, credentials: { type: 'API_KEY', apiKey: `secret-of-${scope.environmentId}` } };
  }
}

/**
 * Source of `escape()`: recurses to the stack limit and, at every depth on the way back, builds a
 * URL. The realm's URL calls the bridge's parseUrl, a function of the workflow realm; when the stack
 * runs out inside that function's JSON.stringify, V8 creates the RangeError in the workflow realm.
 * Answers the first such error whose constructor's constructor compiles code.
 */
const ESCAPE = `
  async function escape() {
    const candidates = [];
    const U = URL;
    const attempt = () => { try { new U('http://a/'); } catch (e) { if (!(e instanceof RangeError) && !(e instanceof TypeError) && candidates.length < 50) candidates[candidates.length] = e; } };
    function f0(d) { try { f0(d + 1); } catch (e) {} attempt(); }
    function f1(d, a) { try { f1(d + 1, a); } catch (e) {} attempt(); }
    function f2(d, a, b) { try { f2(d + 1, a, b); } catch (e) {} attempt(); }
    function f3(d, a, b, c, x) { try { f3(d + 1, a, b, c, x); } catch (e) {} attempt(); }
    const passes = [() => f0(0), () => f1(0, 1), () => f2(0, 1, 2), () => f3(0, 1, 2, 3, 4)];
    for (let round = 0; round < 20; round++) {
      passes[round % passes.length]();
      for (const error of candidates.splice(0)) {
        try { if (error.constructor.constructor('return 1')() === 1) return error; } catch (e) {}
      }
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    return null;
  }
`;

describe('hostile 2: routes out of the script realm', () => {
  it("a stack overflow inside the bridge hands the script the workflow realm; it steals another environment's API key", async () => {
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
          const key = Symbol.for('hostile2.loot');
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
    console.log('[hostile2] planted:', JSON.stringify(planted));
    for (let i = 0; i < 3; i++) {
      expect(await control.runAction({ definition: victimDefinition, connectionId: 'v', input: {} })).toEqual({
        ok: true,
        output: { key: 'string' },
      });
    }
    const read = await Promise.all([attack(), attack()]);
    console.log('[hostile2] read:', JSON.stringify(read));
    expect(JSON.stringify(read)).not.toContain(`secret-of-${VICTIM_ENV}`);
    expect(read).toEqual([
      { ok: true, output: { escaped: false } },
      { ok: true, output: { escaped: false } },
    ]);
  }, 120_000);
});
