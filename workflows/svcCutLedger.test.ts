/**
 * Run model version 9 (SvcContext.cutAsksLedger): a saveCheckpoint at an execution's limit still takes
 * its step, one that stands only if a worker already executed that save. A worker that took a killed
 * one's run over reads the limits later than the killed one did; it now goes on past the saves the
 * killed worker executed (their rows in the step ledger) and ends the execution at the first it did not
 * (a hostile review: ended earlier, the pages between were counted nowhere). A review of a first draft,
 * which asked the ledger before the save, found that the pause moved the step indexes of a script
 * running another operation beside its save: the save now takes its index as any save does. Its own
 * review found an operation started beside a save that then did not stand let through (a page written
 * that the next execution writes again): it is refused, as a cut refuses it.
 *
 * Two saves side by side at a limit after a takeover (a review, 30 November), one of which the killed
 * worker executed and one it did not: two probes, their answers released by the test in either order.
 * Nothing of the script may be sent once the execution's cut is thrown, and an operation waits for every
 * probe still out. Before: a save that stood after the other's cut undid it (its branch sent a request,
 * a page and a save beside the ending execution), and the first probe to answer released the wait on
 * the second.
 */
import { ApplicationFailure } from '@temporalio/common';
import { sentArgs } from './stubbedWorkflow.testing.js';
import { describe, expect, it, vi } from 'vitest';
import type * as Workflow from '@temporalio/workflow';
import { CHECKPOINT_NOT_EXECUTED } from '../src/syncs/checkpoint.js';

const info = { historyLength: 10, historySize: 1000, unsafe: { isReplaying: false }, taskQueue: 'q', workflowId: 'w' };
/** The step ledger's rows of saves, by step index. */
const executed = new Map<number, number>();
const calls: string[] = [];
/** Probes whose answers the test releases by hand (by index), while `holdProbes` is set. */
const held = new Map<number, () => void>();
let holdProbes = false;
vi.mock('@temporalio/workflow', async (original) =>
  (await import('./stubbedWorkflow.testing.js')).stubbedWorkflow(
    await original<typeof Workflow>(),
    info,
    (name, sent) => {
      const args = sentArgs(sent);
      const index = (args.at(-1) as { index?: number } | undefined)?.index ?? -1;
      const probe = name === 'saveCheckpoint' && (args[0] as { onlyIfExecuted?: boolean }).onlyIfExecuted === true;
      calls.push(`${name}${probe ? '?' : ''}@${index}`);
      if (name === 'saveCheckpoint') {
        const answer = executed.get(index) ?? CHECKPOINT_NOT_EXECUTED;
        if (probe && holdProbes) return new Promise((resolve) => held.set(index, () => resolve(answer)));
        if (probe) return answer;
        executed.set(index, 1);
        return 1;
      }
      if (name === 'saveRecords') return { added: 1, updated: 0, deleted: 0, unchanged: 0 };
      if (name === 'httpRequest') return { status: 200, headers: {}, body: '{}', json: true, request: {} };
      return null;
    },
  ),
);

const { createSvc } = await import('./svc.js');
const { ExecutionChain, RUN_CONTINUES } = await import('./runChain.js');

function run(
  options: { near: boolean; cutAsksLedger: boolean },
  chain = new ExecutionChain({ executions: [], canContinue: true }),
) {
  const runtime = createSvc({
    chain,
    kind: 'sync',
    scope: { environmentId: 'e', integrationId: 'i', connectionId: 'c' },
    scriptName: 's',
    runId: 'w:run:0',
    models: ['Record'],
    // A time limit of 0: every saveCheckpoint after the first stored one is at the limit.
    options: options.near ? { executionTimeLimitMs: 0 } : {},
    lastSyncDate: undefined,
    webhook: undefined,
    inline: true,
    cutAsksLedger: options.cutAsksLedger,
  });
  return runtime.scriptOperations;
}

const continues = (error: unknown) => error instanceof ApplicationFailure && error.type === RUN_CONTINUES;

describe('a saveCheckpoint at a limit (version 9)', () => {
  it('goes on past the saves a worker executed, and ends the execution at the first it did not', async () => {
    executed.clear();
    calls.length = 0;
    // The killed worker's saves at steps 2 and 4 (its rows); 6 it never reached.
    executed.set(2, 1).set(4, 1);
    const ops = run({ near: true, cutAsksLedger: true });
    await ops['batchSave']!([{ id: 1 }], 'Record'); // 0
    await ops['getCheckpoint']!(); // 1
    let ended: unknown;
    try {
      for (let page = 1; page <= 3; page++) {
        await ops['saveCheckpoint']!({ page }); // 2, 4, 6
        await ops['batchSave']!([{ id: page + 1 }], 'Record'); // 3, 5
      }
    } catch (error) {
      ended = error;
    }
    expect(continues(ended)).toBe(true);
    expect(calls).toEqual([
      'saveRecords@0',
      'getCheckpoint@1',
      // The first save of an execution is never a cut (nothing stored by it yet): saved as usual.
      'saveCheckpoint@2',
      'saveRecords@3',
      'saveCheckpoint?@4',
      'saveRecords@5',
      'saveCheckpoint?@6',
    ]);
  });

  it('a save the script calls after catching the cut sends nothing', async () => {
    executed.clear();
    calls.length = 0;
    // A later step of the run is recorded (the killed worker's): a probe sent now would stand and save.
    executed.set(9, 1);
    const ops = run({ near: true, cutAsksLedger: true });
    await ops['saveCheckpoint']!({ page: 0 }); // 0: the execution's first save
    await ops['batchSave']!([{ id: 1 }], 'Record'); // 1
    const first = await ops['saveCheckpoint']!({ page: 1 }).then(
      () => 'stood',
      (error: unknown) => error,
    ); // 2: not executed, the cut
    const again = await ops['saveCheckpoint']!({ page: 2 }).then(
      () => 'stood',
      (error: unknown) => error,
    );
    expect(continues(first)).toBe(true);
    expect(continues(again)).toBe(true);
    expect(calls).toEqual(['saveCheckpoint@0', 'saveRecords@1', 'saveCheckpoint?@2']);
  });

  it('without the version, ends the execution at the first save at the limit, with no step', async () => {
    executed.clear();
    calls.length = 0;
    executed.set(4, 1);
    const ops = run({ near: true, cutAsksLedger: false });
    let ended: unknown;
    try {
      for (let page = 1; page <= 3; page++) {
        await ops['saveCheckpoint']!({ page });
        await ops['batchSave']!([{ id: page }], 'Record');
      }
    } catch (error) {
      ended = error;
    }
    expect(continues(ended)).toBe(true);
    expect(calls).toEqual(['saveCheckpoint@0', 'saveRecords@1']);
  });

  it('refuses an operation the script starts beside a save at the limit that no worker executed, as a cut does', async () => {
    executed.clear();
    calls.length = 0;
    const ops = run({ near: true, cutAsksLedger: true });
    await ops['batchSave']!([{ id: 1 }], 'Record');
    await ops['saveCheckpoint']!({ page: 1 });
    calls.length = 0;
    const [save, beside] = await Promise.allSettled([
      ops['saveCheckpoint']!({ page: 2 }),
      ops['batchSave']!([{ id: 2 }], 'Record'),
    ]);
    expect(save.status === 'rejected' && continues(save.reason)).toBe(true);
    expect(beside.status === 'rejected' && continues(beside.reason)).toBe(true);
    // Only the save's own step was sent: the page beside it is written by the next execution, once.
    expect(calls).toEqual(['saveCheckpoint?@2']);
  });

  for (const near of [false, true]) {
    it(`a save and a request issued together take their indexes in the order asked (${near ? 'at' : 'before'} the limit)`, async () => {
      executed.clear();
      calls.length = 0;
      const ops = run({ near, cutAsksLedger: true });
      await ops['batchSave']!([{ id: 1 }], 'Record');
      await ops['saveCheckpoint']!({ page: 1 });
      calls.length = 0;
      executed.set(2, 1); // at the limit, the save below stands (a worker executed it)
      await Promise.all([ops['saveCheckpoint']!({ page: 2 }), ops['get']!({ endpoint: '/x' })]);
      expect(calls.map((call) => call.replace('?', ''))).toEqual(['saveCheckpoint@2', 'httpRequest@3']);
    });
  }
});

const settle = async () => {
  for (let i = 0; i < 50; i++) await Promise.resolve();
};

async function scenario(order: [number, number]) {
  executed.clear();
  held.clear();
  calls.length = 0;
  holdProbes = true;
  const chain = new ExecutionChain({ executions: [], canContinue: true });
  const ops = run({ near: true, cutAsksLedger: true }, chain);
  await ops['batchSave']!([{ id: 1 }], 'Record'); // 0
  await ops['saveCheckpoint']!({ a: '0', b: '0' }); // 1: the execution's first save, never a cut
  calls.length = 0;
  // The killed worker executed branch a's save (step 2), not branch b's (3), and recorded nothing past.
  executed.set(2, 1);
  const committed: Record<string, string> = { a: '0', b: '0' };
  // Save after the page (the pattern docs/scripts.md recommends for branches side by side): each branch
  // already saved its page; it saves where it goes on from, then walks its next page.
  const branch = async (key: 'a' | 'b', next: string) => {
    await ops['saveCheckpoint']!({ ...committed, [key]: next });
    committed[key] = next;
    const page = await ops['get']!({ endpoint: `/${key}`, params: { cursor: next } });
    await ops['batchSave']!([{ id: `${key}${next}`, page }], 'Record');
    await ops['saveCheckpoint']!({ ...committed, [key]: `${next}+1` });
  };
  const all = Promise.all([branch('a', '20'), branch('b', '20')]);
  let ended: unknown;
  const outcome = all.then(
    () => undefined,
    (error: unknown) => {
      ended = error;
      // What the workflow sees when the execution ends (runScript.ts returns its result here).
      return { continuing: chain.continuing, sentSoFar: [...calls] };
    },
  );
  await settle();
  const log: string[] = [];
  for (const index of order) {
    log.push(`answer ?@${index} (sent so far: ${calls.join(' ')}; continuing ${chain.continuing})`);
    held.get(index)!();
    await settle();
    log.push(`after ?@${index}: sent ${calls.join(' ')}; continuing ${chain.continuing}`);
  }
  // Any later probe (branch a's next save) answers as no worker executed it.
  for (const [index, release] of held) if (!order.includes(index)) release();
  await settle();
  const atEnd = await outcome;
  holdProbes = false;
  return { ended, atEnd, calls: [...calls], continuingAfter: chain.continuing, log };
}

describe('two probes side by side after a takeover', () => {
  it('the cut first, then the stood save: the other branch goes on after the execution ended', async () => {
    const r = await scenario([3, 2]);
    expect(continues(r.ended)).toBe(true);
    // Nothing of the script is sent once the cut is thrown (guardHistory), and the chain stays continuing.
    const after = r.calls.slice(r.atEnd!.sentSoFar.length);
    expect({ after, continuingAfter: r.continuingAfter }).toEqual({ after: [], continuingAfter: true });
  });

  it('the stood save first: its branch goes on while the other probe is still out', async () => {
    const r = await scenario([2, 3]);
    expect(continues(r.ended)).toBe(true);
    // An operation started beside the probes waits for both: until ?@3 answers, nothing but them is sent.
    expect(r.log[1]).toMatch(/^after \?@2: sent saveCheckpoint\?@2 saveCheckpoint\?@3;/);
  });
});
