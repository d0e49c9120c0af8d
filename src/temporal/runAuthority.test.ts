import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { createRunAuthorities, requireConnection, rootActionId } from './runAuthority.js';
import { holdingExecutions, runningExecution, type HeldWorkflowInfo } from './runningExecutions.js';

interface Execution {
  type: string;
  parent?: { workflowId: string; runId: string };
}

/** A Temporal that knows these executions (by workflow id and run id) and counts its describes. */
function temporal(executions: Record<string, Execution>) {
  const described: string[] = [];
  const client = {
    workflow: {
      getHandle: (workflowId: string, runId: string) => ({
        describe: () => {
          described.push(`${workflowId}/${runId}`);
          const execution = executions[`${workflowId}/${runId}`];
          if (!execution) return Promise.reject(new Error('not found'));
          return Promise.resolve({ type: execution.type, parentExecution: execution.parent });
        },
      }),
    },
  } as unknown as Client;
  return { client, described };
}

/** A workflow creator as the SDK's, over nothing: what the registry sees of a Worker's workflows. */
function worker() {
  const creator = holdingExecutions({
    createWorkflow: (options: { info: HeldWorkflowInfo }) =>
      Promise.resolve({ id: options.info.runId, dispose: () => Promise.resolve() }),
    destroy: () => Promise.resolve(),
  });
  return (info: HeldWorkflowInfo) => creator.createWorkflow({ info });
}

const victim = { environmentId: 'victim', integrationId: 'github', connectionId: 'victim-conn', actionName: 'steal' };
const victimRoot = rootActionId(victim, 'b0b');
const attackerEntity = 'sync:attacker:github:attacker-conn:issues';

describe('run authority: executions the worker holds', () => {
  it('verifies a held root action without asking Temporal, and forgets it when disposed', async () => {
    const { client, described } = temporal({ [`${victimRoot}/run-1`]: { type: 'runAction' } });
    const workflow = await worker()({ workflowId: victimRoot, runId: 'run-1', workflowType: 'runAction' });
    const authority = await createRunAuthorities({ client }).verify({
      workflowId: victimRoot,
      runId: 'run-1',
      workflowType: 'runAction',
    });
    expect(authority).toMatchObject({ rootId: victimRoot, rootType: 'runAction', environmentId: 'victim', depth: 0 });
    expect(described).toEqual([]);
    expect(() => requireConnection(authority, victim)).not.toThrow();
    await workflow.dispose();
    expect(runningExecution(victimRoot, 'run-1')).toBeUndefined();
    await createRunAuthorities({ client }).verify({
      workflowId: victimRoot,
      runId: 'run-1',
      workflowType: 'runAction',
    });
    expect(described).toEqual([`${victimRoot}/run-1`]);
  });

  it("a child reusing a root action's id is verified under its parent, held or not", async () => {
    // A script of another environment starts a child with the id of the victim's root action (closed):
    // Temporal gives it a run id of its own and its parent, and so does the worker's registry.
    const create = worker();
    const held = [
      await create({ workflowId: victimRoot, runId: 'run-1', workflowType: 'runAction' }),
      await create({ workflowId: attackerEntity, runId: 'entity-run', workflowType: 'manageSync' }),
      await create({
        workflowId: victimRoot,
        runId: 'child-run',
        workflowType: 'runAction',
        parent: { workflowId: attackerEntity, runId: 'entity-run' },
      }),
    ];
    const { client, described } = temporal({});
    const authority = await createRunAuthorities({ client }).verify({
      workflowId: victimRoot,
      runId: 'child-run',
      workflowType: 'runAction',
    });
    expect(authority).toMatchObject({ rootId: attackerEntity, environmentId: 'attacker', depth: 1 });
    expect(described).toEqual([]);
    expect(() => requireConnection(authority, victim)).toThrow(/own connection/);
    await Promise.all(held.map((workflow) => workflow.dispose()));
  });

  it('the caller type Temporal gives the activity must be the held execution type', async () => {
    const workflow = await worker()({ workflowId: victimRoot, runId: 'run-2', workflowType: 'runSync' });
    const { client } = temporal({});
    await expect(
      createRunAuthorities({ client }).verify({ workflowId: victimRoot, runId: 'run-2', workflowType: 'runAction' }),
    ).rejects.toMatchObject({ code: 'scope_denied' });
    await workflow.dispose();
  });

  it('an execution created twice (evicted and recreated) is held until both instances are disposed', async () => {
    const create = worker();
    const info = { workflowId: victimRoot, runId: 'run-3', workflowType: 'runAction' };
    const first = await create(info);
    const second = await create(info);
    await first.dispose();
    await first.dispose();
    expect(runningExecution(victimRoot, 'run-3')).toEqual({ type: 'runAction', parent: undefined });
    await second.dispose();
    expect(runningExecution(victimRoot, 'run-3')).toBeUndefined();
  });
});
