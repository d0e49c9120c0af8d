/**
 * What a run spends is charged to its limits, whichever way it spends it: buffer memory copied through
 * the species default, history events of durable timers. Each case was a route around a limit (issue
 * 15's second attack pass) and asserts that the run fails with the limit's code.
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { rootActionId } from '../../src/temporal/runAuthority.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';

describe("a run's limits count every way of spending", () => {
  it('buffer memory: copies made through the species default (constructor undefined) are charged, and the run fails with script_memory_limit', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // 40 MiB charged, then seven uncharged copies: 320 MiB held, over the 256 MiB per run. (A timer
    // between copies: on a loaded machine 320 MiB of copying may outlast loop protection's 1 s.)
    const hoarder = await h.scripts.put(
      bundle(`async function () {
        const base = new Uint8Array(40 * 1024 * 1024);
        Object.defineProperty(base, 'constructor', { value: undefined });
        const kept = [base];
        for (let i = 0; i < 7; i++) {
          const copy = base.slice(); copy.fill(i + 1); kept.push(copy);
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
        let held = 0;
        for (const buffer of kept) held += buffer.byteLength;
        return { heldMiB: held / 1048576 };
      }`),
    );
    const outcome = await control
      .runAction({ definition: actionDefinition('hoarder', hoarder), connectionId: 'c', input: {} })
      .catch((error: unknown) => ({ code: (error as { code?: string }).code }));
    console.log(`[limitAccounting] species copies: ${JSON.stringify(outcome)}`);
    expect(outcome).toEqual({ code: 'script_memory_limit' });
  }, 120_000);

  it('history budget: durable timers (setTimeout) are counted, and a run of 300 timers fails with run_history_limit', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const ids: Record<string, string> = {};
    const run = async (name: string, source: string) => {
      const hash = await h.scripts.put(bundle(source));
      const definition = actionDefinition(name, hash);
      const workflowId = rootActionId({ ...definition, connectionId: 'c' }, randomUUID());
      ids[name] = workflowId;
      return control
        .runAction({ definition, connectionId: 'c', input: {}, options: { historyEventBudget: 60 } }, { workflowId })
        .catch((error: unknown) => ({ code: (error as { code?: string }).code }));
    };
    // The guard works for svc operations...
    expect(
      await run(
        'operations',
        `async function (svc) { for (let i = 0; i < 100; i++) await svc.getMetadata(); return 'done'; }`,
      ),
    ).toEqual({
      code: 'run_history_limit',
    });
    // ...but 300 timers (600+ events, ten times the budget) go through.
    const timers = await run(
      'timers',
      `async function () { await Promise.all(Array.from({ length: 300 }, () => new Promise((resolve) => setTimeout(resolve, 1)))); return 'done'; }`,
    );
    const { historyLength } = await h.client.workflow.getHandle(ids['timers']!).describe();
    console.log(`[limitAccounting] timers: ${JSON.stringify(timers)} with ${historyLength} events (budget 60)`);
    expect(timers).toEqual({ code: 'run_history_limit' });
  }, 120_000);
});
