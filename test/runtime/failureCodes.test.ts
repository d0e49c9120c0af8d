/**
 * HOSTILE s25: attacks on today's work, on the real stack. Each test says what it attacks; the ones
 * marked FINDING failed before the fix named in them (or still fail, where the fix is in a file the
 * lead owns: see the test's comment).
 */
import { randomBytes } from 'node:crypto';
import { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { describe, expect, it } from 'vitest';
import { compileConfig } from '../../src/config/validate.js';
import { Encryptor } from '../../src/connections/encryption.js';
import type { RunSyncInput } from '../../src/runtime/definitions.js';
import { stack } from '../helpers/stack.js';
import {
  actionOutcomes,
  bundle,
  executeSync,
  json,
  startFakeApi,
  stepSummaries,
  syncDefinition,
  useRuntime,
} from './helpers.js';
import { connectTemporal } from '../../src/temporal/connection.js';
import { deferCleanup } from '../helpers/cleanup.js';

const APPID = '9f8e7d6c5b4a39281706f5e4d3c2b1a0';
const SLACK = 'aB3dE6gH9jK2mN5pQ8sT1vW4';
const PAT = 'ghp_1a2B3c4D5e6F7g8H9i0JkLmNoPqRsTuVwXyZ';
const IN_ACTION_NAME = 'customer-ssn-078051120-card-4111111111111111';

describe('HOSTILE s25 on the real stack', () => {
  it('FINDING (fixed in src/runtime/stepSummary.ts): a script cannot put a credential into the history in clear through a step name', async () => {
    const h = await useRuntime({ encryptor: new Encryptor([randomBytes(32)]) });
    const api = await startFakeApi((_request, response) => json(response, 200, { ok: true }));
    h.connections.setBaseUrl(api.url);
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {
        await svc.get({ endpoint: '/data/2.5/weather', params: { q: 'London', appid: '${APPID}' } });
        await svc.post({ endpoint: '/services/T0AB12CD3/B0EF45GH6/${SLACK}', data: { text: 'hi' } });
        await svc.get({ endpoint: '/user?${PAT}' });
        for (const name of ['${PAT}', '${IN_ACTION_NAME}', 'x'.repeat(100000) + '${APPID}']) {
          try { await svc.triggerAction(name, {}); } catch (error) { if (error.code !== 'action_not_found') throw error; }
        }
      }`),
    );
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: 'hostile-summary', models: ['Issue'], scriptHash }),
      connectionId: 'hostile-summary-1',
      mode: 'incremental',
    };
    const { workflowId } = await executeSync(h, input);
    expect(api.hits).toContain(`GET /user?${PAT}`);

    // Read as the Web UI does: Temporal's default converter, no codec, no key.
    const { temporalAddress, temporalNamespace } = stack();
    const connection = await connectTemporal({ address: temporalAddress });
    deferCleanup(() => connection.close());
    const history = await new Client({ connection, namespace: temporalNamespace }).workflow
      .getHandle(workflowId)
      .fetchHistory();
    const summaries = stepSummaries(history);
    expect(summaries).toEqual(
      expect.arrayContaining([
        'GET /data/2.5/weather?q=London&appid=…',
        'POST /services/T0AB12CD3/B0EF45GH6/…',
        'GET /user?…',
        'triggerAction …',
      ]),
    );
    for (const summary of summaries) expect(summary.length).toBeLessThanOrEqual(200);
    const raw = Buffer.from(proto.temporal.api.history.v1.History.encode(history).finish());
    for (const secret of [APPID, SLACK, PAT, IN_ACTION_NAME, 'x'.repeat(300)]) expect(raw.includes(secret)).toBe(false);
  }, 180_000);

  it("FINDING (open: workflows/runScript.ts, the lead's file): a script cannot pass its own error off as a service limit", async () => {
    // The realm's codes (src/errors.ts, `run: 'realm'`) count from any error, but only when the realm
    // raised that code in this run (realm.issued): a script that throws { code: 'script_memory_limit' }
    // must not make its run fail as if the service had stopped it for memory (the API's run status and
    // the run history would show the service's code, and an operator would look for a memory problem).
    const outcomeOf = actionOutcomes(await useRuntime());
    for (const code of ['script_memory_limit', 'record_too_large', 'invalid_script']) {
      const forged = await outcomeOf(
        `forge-${code}`,
        `async function () { throw Object.assign(new Error('looks official'), { code: '${code}' }); }`,
      );
      expect(forged).toEqual({ code: 'script_error' });
    }
  }, 180_000);

  it('FINDING (fixed in src/config/checkRecord.ts): record validation `refuse` answers a deeply nested record at once', async () => {
    // Before: `child: TreeNode | null` walked each level twice; 40 levels (a 300-byte record) kept the
    // workflow thread busy for longer than any run lives.
    const { config } = compileConfig(
      `integrations:\n  tracker:\n    syncs: {}\nmodels:\n  TreeNode:\n    id: string\n    child: TreeNode | null\n`,
    );
    const h = await useRuntime();
    const scriptHash = await h.scripts.put(
      bundle(`async function (svc) {
        let node = { child: 5 };
        for (let level = 1; level < 40; level++) node = { child: node };
        try {
          await svc.batchSave([{ id: 'deep', ...node }], 'TreeNode');
        } catch (error) {
          await svc.log('caught ' + error.code);
          return;
        }
        throw new Error('saved a record that breaks its model');
      }`),
    );
    const input: RunSyncInput = {
      definition: {
        ...syncDefinition({ syncName: 'hostile-deep', models: ['TreeNode'], scriptHash }),
        recordValidation: { mode: 'refuse', models: config!.models },
      },
      connectionId: 'hostile-deep-1',
      mode: 'incremental',
    };
    const { result } = await executeSync(h, input);
    expect(result.recordCounts).toEqual({ TreeNode: 0 });
  }, 120_000);
});
