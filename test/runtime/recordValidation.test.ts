/**
 * `record_validation` in a deployed run (issue 22): `warn` stores every record and logs each bad field
 * with its path; `refuse` fails the batchSave with invalid_record and stores nothing of that batch.
 */
import { describe, expect, it } from 'vitest';
import { compileConfig } from '../../src/config/validate.js';
import type { RunSyncInput } from '../../src/runtime/definitions.js';
import { createPostgresLogStore } from '../../src/runtime/logStore.js';
import { executeSync, syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';

const { config } = compileConfig(
  `integrations:\n  tracker:\n    syncs: {}\nmodels:\n  Issue:\n    id: string\n    state: open | closed\n    title: string\n`,
);
const models = config!.models;

const SCRIPT = bundle(`async function (svc) {
  await svc.batchSave([{ id: '1', state: 'open', title: 'fine' }], 'Issue');
  try {
    await svc.batchSave([{ id: '2', state: 'merged', title: 'bad state' }, { id: '3', state: 'closed' }], 'Issue');
  } catch (error) {
    await svc.log('caught ' + error.code + ': ' + error.message);
  }
}`);

describe('record validation at run time', () => {
  it('warn stores and logs each bad field; refuse saves nothing of the batch and says why', async () => {
    const h = await useRuntime();
    const scriptHash = await h.scripts.put(SCRIPT);
    const run = async (mode: 'warn' | 'refuse') => {
      const input: RunSyncInput = {
        definition: {
          ...syncDefinition({ syncName: `validate-${mode}`, models: ['Issue'], scriptHash }),
          recordValidation: { mode, models },
        },
        connectionId: `validate-${mode}`,
        mode: 'incremental',
      };
      const { result } = await executeSync(h, input);
      const logs = await createPostgresLogStore({ db: h.pool }).search({
        environmentId: 'test',
        connectionId: input.connectionId,
      });
      return { result, messages: logs.map((log) => `${log.level} ${log.message}`) };
    };

    const warned = await run('warn');
    expect(warned.result.models['Issue']?.added).toBe(3);
    expect(warned.messages).toEqual(
      expect.arrayContaining([
        'warn record_validation: Issue record 0 (id "2"): state: expected "open" | "closed", got "merged"',
        expect.stringMatching(/^warn record_validation: Issue record 1 \(id "3"\): title: /) as unknown,
      ]),
    );

    const refused = await run('refuse');
    expect(refused.result.models['Issue']?.added).toBe(1);
    expect(refused.result.recordCounts).toEqual({ Issue: 1 });
    const caught = refused.messages.find((message) => message.includes('caught'));
    expect(caught).toMatch(/caught invalid_record: svc\.batchSave: 2 record\(s\) of Issue break the model/);
    expect(caught).toContain('state: expected "open" | "closed", got "merged"');
  }, 120_000);

  it('refuse answers a deeply nested record at once', async () => {
    // FINDING (fixed in src/config/checkRecord.ts): this test failed before the fix.
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
        ...syncDefinition({ syncName: 'deep', models: ['TreeNode'], scriptHash }),
        recordValidation: { mode: 'refuse', models: config!.models },
      },
      connectionId: 'deep-1',
      mode: 'incremental',
    };
    const { result } = await executeSync(h, input);
    expect(result.recordCounts).toEqual({ TreeNode: 0 });
  }, 120_000);
});
