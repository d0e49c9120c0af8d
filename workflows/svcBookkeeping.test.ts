/**
 * A run whose script returned just as its execution reached the history budget (hostile review of
 * issue 32, item 5): the run's own bookkeeping after the script (tracked deletes, the record count,
 * the last logs: runScript.ts runSyncScript) has a reserve past the budget, so the run finishes a
 * success; before, the first bookkeeping step met the history guard and the finished run failed
 * (run_history_limit, or run_continues outside the script). Activities stubbed, history length set.
 */
import { ApplicationFailure } from '@temporalio/common';
import { beforeEach, describe, expect, it, vi } from 'vitest';
import type * as Workflow from '@temporalio/workflow';

const info = { historyLength: 10, historySize: 1000, unsafe: { isReplaying: false }, taskQueue: 'q', workflowId: 'w' };
vi.mock('@temporalio/workflow', async (original) =>
  (await import('./stubbedWorkflow.testing.js')).stubbedWorkflow(await original<typeof Workflow>(), info),
);

const { createSvc, BOOKKEEPING_RESERVE_EVENTS } = await import('./svc.js');
const { ExecutionChain, RUN_CONTINUES } = await import('./runChain.js');

const BUDGET = 100;
const scope = { environmentId: 'e', integrationId: 'i', connectionId: 'c' };
function run(bookkeepingReserve: boolean) {
  const chain = new ExecutionChain({ executions: [], canContinue: true });
  return createSvc({
    chain,
    bookkeepingReserve,
    kind: 'sync',
    scope,
    scriptName: 's',
    runId: 'w:run:1',
    models: ['Record'],
    options: { historyEventBudget: BUDGET },
    lastSyncDate: undefined,
    webhook: undefined,
    inline: true,
  });
}

/** The script's last page, then the history at `length` as it returns; then what runSyncScript does. */
async function finish(runtime: ReturnType<typeof run>, length: number): Promise<unknown> {
  await runtime.scriptOperations['batchSave']!([{ id: 'r1' }], 'Record');
  await runtime.scriptOperations['saveCheckpoint']!({ cursor: 'end' });
  await runtime.scriptOperations['clearCheckpoint']!();
  runtime.bufferLog('info', 'done');
  info.historyLength = length; // the script returned here
  try {
    await runtime.step('markUnseenDeleted', 'trackDeletes Record', [
      { ...scope, syncName: 's', runId: 'w:run:1', model: 'Record' },
    ]);
    await runtime.step('countRecords', 'countRecords', [{ ...scope, models: ['Record'] }]);
    await runtime.flushLogs();
    return 'success';
  } catch (error) {
    return error instanceof ApplicationFailure ? error.type : error;
  }
}

describe('the bookkeeping of a run whose script returned at the history budget', () => {
  beforeEach(() => {
    info.historyLength = 10;
  });

  it('finishes a success at the budget and a little past it', async () => {
    for (const length of [BUDGET, BUDGET + 1, BUDGET + 10, BUDGET + BOOKKEEPING_RESERVE_EVENTS - 3]) {
      info.historyLength = 10;
      expect(await finish(run(true), length), `history ${length}`).toBe('success');
    }
  });

  it("the script's own operations are still held by the budget", async () => {
    const runtime = run(true);
    await runtime.scriptOperations['batchSave']!([{ id: 'r1' }], 'Record');
    await runtime.scriptOperations['saveCheckpoint']!({ cursor: 'p2' });
    info.historyLength = BUDGET + 1;
    const error = await runtime.scriptOperations['batchSave']!([{ id: 'r2' }], 'Record').catch((e: unknown) => e);
    expect((error as ApplicationFailure).type).toBe(RUN_CONTINUES);
  });

  it('past the reserve too, the run fails run_history_limit (it can no longer continue: the script returned)', async () => {
    expect(await finish(run(true), BUDGET + BOOKKEEPING_RESERVE_EVENTS + 1)).toBe('run_history_limit');
  });

  it('a run recorded without the reserve (version 2) replays as it ran: its bookkeeping met the budget', async () => {
    expect(await finish(run(false), BUDGET + 1)).not.toBe('success');
  });
});
