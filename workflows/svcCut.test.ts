/**
 * Where a run's execution is cut (issue 32, hostile review): a script may save its checkpoint after
 * the batchSave of the page it points past (order A) or before it (order B: saveCheckpoint(next), then
 * batchSave(page)). Cut right after a saveCheckpoint, order B lost the page in between: the next
 * execution began from the newer checkpoint. The cut now comes when the script calls saveCheckpoint
 * at a limit, refusing that save, so the stored checkpoint's page was saved in either order. Each
 * case forces the limit before every operation of the first execution, then runs the next execution
 * from the checkpoint it left, with the activities stubbed by an in-memory store.
 */
import { ApplicationFailure } from '@temporalio/common';
import { sentArgs } from './stubbedWorkflow.testing.js';
import { describe, expect, it, vi } from 'vitest';
import type * as Workflow from '@temporalio/workflow';
import type { Checkpoint } from '../src/syncs/checkpoint.js';
import type { ChainHandOff } from '../src/runtime/definitions.js';

const info = { historyLength: 10, historySize: 1000, unsafe: { isReplaying: false }, taskQueue: 'q', workflowId: 'w' };
const store: { checkpoint: Checkpoint | null; saved: Map<number, number> } = { checkpoint: null, saved: new Map() };
vi.mock('@temporalio/workflow', async (original) =>
  (await import('./stubbedWorkflow.testing.js')).stubbedWorkflow(
    await original<typeof Workflow>(),
    info,
    (name, sent) => {
      const args = sentArgs(sent);
      if (name === 'getCheckpoint') return store.checkpoint;
      if (name === 'saveCheckpoint') {
        store.checkpoint = args[1] as Checkpoint | null;
        return 1;
      }
      if (name === 'saveRecords') {
        for (const record of (args[0] as { records: { id: number }[] }).records) {
          store.saved.set(record.id, (store.saved.get(record.id) ?? 0) + 1);
        }
        return { added: 1, updated: 0, deleted: 0, unchanged: 0 };
      }
      return 1;
    },
  ),
);

const { createSvc } = await import('./svc.js');
const { ExecutionChain, RUN_CONTINUES } = await import('./runChain.js');

const PAGES = 6;
type Order = 'save-then-checkpoint' | 'checkpoint-then-save';

/** One execution of the script; before its operation number `cutAt` the history is past 90% of its budget. */
async function execution(order: Order, executions: string[], handOff: ChainHandOff | undefined, cutAt: number) {
  info.historyLength = 10;
  const chain = new ExecutionChain({ executions, canContinue: true, ...handOff });
  const runtime = createSvc({
    chain,
    kind: 'sync',
    scope: { environmentId: 'e', integrationId: 'i', connectionId: 'c' },
    scriptName: 's',
    runId: `w:run:${executions.length}`,
    models: ['Record'],
    options: { historyEventBudget: 100 },
    lastSyncDate: undefined,
    webhook: undefined,
    inline: true,
  });
  let count = 0;
  const op = (name: string, ...args: unknown[]): Promise<unknown> => {
    if (count++ === cutAt) info.historyLength = 95;
    return runtime.scriptOperations[name]!(...args);
  };
  let fetched = 0;
  try {
    const checkpoint = (await op('getCheckpoint')) as { page: number } | null;
    for (let page = checkpoint?.page ?? 1; page <= PAGES; page++) {
      fetched++; // the page's request
      const records = [{ id: page }];
      if (order === 'save-then-checkpoint') {
        await op('batchSave', records, 'Record');
        if (page < PAGES) await op('saveCheckpoint', { page: page + 1 });
      } else {
        if (page < PAGES) await op('saveCheckpoint', { page: page + 1 });
        await op('batchSave', records, 'Record');
      }
    }
    await op('clearCheckpoint');
    return { end: 'finished', fetched, handOff: undefined };
  } catch (error) {
    if (!(error instanceof ApplicationFailure) || error.type !== RUN_CONTINUES) throw error;
    return { end: RUN_CONTINUES, fetched, handOff: chain.handOff() };
  }
}

describe('a cut at any operation loses no page, whichever order the script saves its checkpoint in', () => {
  for (const order of ['save-then-checkpoint', 'checkpoint-then-save'] as const) {
    it(order, async () => {
      // 1 getCheckpoint + 2 operations per page: the limit reached before each of them in turn.
      let continued = 0;
      for (let cutAt = 0; cutAt <= 1 + 2 * PAGES; cutAt++) {
        store.checkpoint = null;
        store.saved = new Map();
        const first = await execution(order, [], undefined, cutAt);
        let fetched = first.fetched;
        if (first.end === RUN_CONTINUES) {
          continued++;
          const second = await execution(order, ['w:run:0'], first.handOff, Number.POSITIVE_INFINITY);
          expect(second.end).toBe('finished');
          fetched += second.fetched;
        }
        const pages = Array.from({ length: PAGES }, (_, i) => i + 1);
        expect(
          [...store.saved.keys()].sort((a, b) => a - b),
          `cut before operation ${cutAt}`,
        ).toEqual(pages);
        // At most one page fetched (and saved) again per cut.
        expect(fetched, `cut before operation ${cutAt}`).toBeLessThanOrEqual(PAGES + 1);
      }
      // Every cut after the first stored checkpoint and before the last continued the run.
      expect(continued).toBeGreaterThanOrEqual(2 * PAGES - 4);
    });
  }
});
