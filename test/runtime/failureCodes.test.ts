/**
 * A run's failure code says who stopped it: a script cannot name its own failure type. What a script
 * throws is script_error whatever `code` or `name` it carries; a code of the service (an operation's,
 * a limit's) is kept only when the service raised it.
 */
import { describe, expect, it } from 'vitest';
import { actionOutcomes, useRuntime } from './helpers.js';

describe('failure codes a script cannot forge', () => {
  it('a script cannot pass its own error off as a service limit: a forged realm code is script_error', async () => {
    // FINDING (fixed in workflows/runScript.ts: a realm code counts only when the realm issued it):
    // REALM_CODES were accepted from any error, so a script that threw { code: 'script_memory_limit' }
    // made its run fail as if the service had stopped it for memory (the API's run status and the run
    // history showed the service's code, and an operator went looking for a memory problem).
    const outcomeOf = actionOutcomes(await useRuntime());
    for (const code of ['script_memory_limit', 'record_too_large', 'invalid_script']) {
      const forged = await outcomeOf(
        `forge-${code}`,
        `async function () { throw Object.assign(new Error('looks official'), { code: '${code}' }); }`,
      );
      expect(forged).toEqual({ code: 'script_error' });
    }
  }, 180_000);

  it("a script cannot name its run's failure type: a forged operation error is script_error, a real one keeps its code", async () => {
    const outcomeOf = actionOutcomes(await useRuntime());
    const forged = await outcomeOf(
      'forger',
      `async function () { throw Object.assign(new Error('looks official'), { name: 'OperationError', code: 'run_superseded' }); }`,
    );
    expect(forged).toEqual({ code: 'script_error' });
    const genuine = await outcomeOf('bad-method', `async function (svc) { await svc.batchSave([{ id: 1 }], 'Row'); }`);
    expect(genuine).toEqual({ code: 'invalid_operation' });
  }, 120_000);
});
