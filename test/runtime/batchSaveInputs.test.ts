/**
 * What a script sends the other way (docs/architecture.md "What remains best-effort"): an activity's
 * input is decoded by the SDK on the worker's main thread (then each record is encoded there again for
 * the records store), and that thread serves every environment's workflow tasks and activities. One
 * environment's sync `batchSave`s 16 records of 1 MiB of `{},` each (the limits: 16 MiB a call, records
 * up to 1 MiB), 8 a call, then all 16 in one call; what must hold: another environment's trivial action
 * completes within its idle p99 plus 5 s meanwhile (as for a request's answer,
 * test/runtime/requestAnswers.test.ts). Not fixed: this measures what remains (see the docs).
 */
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { RunSyncInput, SyncRunResult } from '../../src/runtime/definitions.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { percentile, quietNeighbour } from '../kit/neighbour.js';
import { syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';

const RECORDS = 16;
// Empty objects a record holds: its JSON just under 1 MiB (src/runtime/definitions.ts recordBytes).
const ELEMENTS = Math.floor((1024 * 1024 - 64) / 3);
// As for a request's answer (test/runtime/requestAnswers.test.ts). Measured at load 5-6: 2.1-3.0 s at
// 8 MiB a call (1.4 s at 4 MiB); the main thread's share grows with the values a call carries and with
// the machine's load, so this bound does not hold at load 12 (13.2 s of JSON.parse for 16 MiB there).
const MARGIN_MS = 5000;

describe("a script's batchSave of 16 MiB of empty objects", () => {
  it("does not hold another environment's actions past its idle p99 + 5 s", async () => {
    const h = await useRuntime();
    const neighbour = await quietNeighbour(h, MARGIN_MS);
    const sync = async (perCall: number) => {
      const scriptHash = await h.scripts.put(
        // One array shared by the records: 16 of 350,000 objects built apart pass the isolate's 3 s.
        bundle(`async function (svc) {
          const v = JSON.parse('[' + '{},'.repeat(${ELEMENTS - 1}) + '{}]');
          for (let call = 0; call < ${RECORDS / perCall}; call++) {
            const records = [];
            for (let i = 0; i < ${perCall}; i++) records.push({ id: 'r' + (call * ${perCall} + i), v });
            await svc.batchSave(records, 'Record');
          }
        }`),
        'noisy',
      );
      const definition = syncDefinition({ syncName: `empties-${perCall}`, models: ['Record'], scriptHash });
      const input: RunSyncInput = {
        definition: { ...definition, environmentId: 'noisy' },
        connectionId: 'c',
        mode: 'incremental',
      };
      const saved = await neighbour.beside(() =>
        h.client.workflow.execute<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
          taskQueue: h.taskQueue,
          workflowId: syncRunId({ ...input.definition, connectionId: input.connectionId }, randomUUID()),
          args: [input],
          workflowExecutionTimeout: '10 minutes',
        }),
      );
      console.log(
        `[batchSave inputs] ${neighbour.idleText}; beside ${RECORDS} x 1 MiB of {} at ${perCall} a call: ` +
          `${saved.times.length} actions, p50/max ${percentile(saved.times, 50).toFixed(0)}/${Math.max(...saved.times).toFixed(0)} ms, ` +
          `the sync ${saved.code.slice(0, 120)} in ${saved.ms} ms ${JSON.stringify(saved.outcome?.models)}`,
      );
      return saved;
    };

    const halves = await sync(8);
    expect(halves.outcome?.models['Record']).toEqual({ added: RECORDS, updated: 0, deleted: 0, unchanged: 0 });
    expect(Math.max(...halves.times)).toBeLessThanOrEqual(neighbour.bound);
    // All 16 MiB in one call: saved, or stopped as its own script's runaway (handing the call from the
    // realm to the workflow is the run's own CPU, 3 s at most in one statement); never a stall of others.
    const whole = await sync(16);
    if (whole.code === 'completed') {
      expect(whole.outcome?.models['Record']).toEqual({ added: 0, updated: 0, deleted: 0, unchanged: RECORDS });
    } else {
      expect(whole.code).toMatch(/script_timeout/);
    }
    expect(Math.max(...whole.times)).toBeLessThanOrEqual(neighbour.bound);
    const after: number[] = [];
    for (let n = 0; n < 10; n++) after.push(await neighbour.once(n));
    expect(Math.max(...after)).toBeLessThanOrEqual(neighbour.bound);
  }, 900_000);
});
