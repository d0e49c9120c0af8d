/**
 * What a script sees when its execution reaches the history budget while its run may continue
 * (ExecutionChain.atLimit; found by a hostile review of issue 32): the continuation's failure ends the
 * run whatever the script does (an ApplicationFailure, which the realm's bridge turns into `fatal`),
 * never an ordinary error the script can catch, and an operation the script starts after it is refused
 * too. workflowInfo and the activity proxies are stubbed: the history is made longer than the budget
 * after a checkpoint moved. Before the fix the script got OperationError operation_failed "batchSave
 * Record failed: the run continues in a next execution: … (run_continues)", and once chain.continuing
 * was set every later operation went through.
 */
import { ApplicationFailure } from '@temporalio/common';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type * as Workflow from '@temporalio/workflow';

const info = { historyLength: 10, historySize: 1000, unsafe: { isReplaying: false }, taskQueue: 'q', workflowId: 'w' };
vi.mock('@temporalio/workflow', async (original) =>
  (await import('./stubbedWorkflow.testing.js')).stubbedWorkflow(await original<typeof Workflow>(), info),
);

const { createSvc } = await import('./svc.js');
const { ExecutionChain, RUN_CONTINUES } = await import('./runChain.js');

const scope = { environmentId: 'e', integrationId: 'i', connectionId: 'c' };
function svcWithChain() {
  const chain = new ExecutionChain({ executions: [], canContinue: true });
  const runtime = createSvc({
    chain,
    kind: 'sync',
    scope,
    scriptName: 's',
    runId: 'w:run:1',
    models: ['Record'],
    options: { historyEventBudget: 100 },
    lastSyncDate: undefined,
    webhook: undefined,
    inline: true,
  });
  return { chain, ops: runtime.scriptOperations };
}

describe('a run at the history budget with a checkpoint that moved', () => {
  beforeEach(() => {
    info.historyLength = 10;
  });

  it('ends the execution with run_continues, an ApplicationFailure the script cannot catch (batchSave)', async () => {
    const { chain, ops } = svcWithChain();
    await ops['batchSave']!([{ id: 'r0' }], 'Record'); // a page saved: the execution made progress
    await ops['saveCheckpoint']!({ cursor: 'p2' }); // 10 events: far from the budget, no cut
    info.historyLength = 150; // the script's next step finds the budget passed (no save since 90%)
    const error = await ops['batchSave']!([{ id: 'r1' }], 'Record').catch((e: unknown) => e);
    // What the realm's bridge needs to end the run (scriptRealm.ts: `error instanceof ApplicationFailure`).
    expect(error).toBeInstanceOf(ApplicationFailure);
    expect((error as ApplicationFailure).type).toBe(RUN_CONTINUES);
    expect(chain.continuing).toBe(true);
  });

  it('a script that catches the error and goes on is still held by the history budget', async () => {
    const { ops } = svcWithChain();
    await ops['saveCheckpoint']!({ cursor: 'p2' });
    info.historyLength = 150;
    await ops['batchSave']!([{ id: 'r1' }], 'Record').catch(() => undefined); // the script swallows it
    info.historyLength = 60_000; // past Temporal's own limit of 51,200 events
    // Every later operation must still fail: else nothing stops the history before Temporal terminates the entity.
    await expect(ops['batchSave']!([{ id: 'r2' }], 'Record')).rejects.toBeDefined();
  });
});
