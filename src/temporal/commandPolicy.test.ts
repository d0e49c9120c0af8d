import { describe, expect, it } from 'vitest';
import {
  policingCommands,
  refusedCommand,
  refusedCompletion,
  refusingCompletion,
  type PolicyCommand,
  type SenderFacts,
} from './commandPolicy.js';
import { childStart, signalTo } from './commandPolicy.testing.js';

const NS = 'default';
const QUEUE = 'runtime';
const UUID = '0b6f0c1e-7d2a-4c1b-9a55-3f1e2d4c5b6a';
const ENTITY = 'sync:env-a:github:conn-1:issues';
const run: SenderFacts = {
  workflowId: `${ENTITY}:run:${UUID}`,
  workflowType: 'runSync',
  namespace: NS,
  taskQueue: QUEUE,
  parent: { workflowId: ENTITY },
};
const action: SenderFacts = {
  workflowId: `action:env-a:github:conn-1:create:${UUID}`,
  workflowType: 'runAction',
  namespace: NS,
  taskQueue: `${QUEUE}-actions`,
};
const entity: SenderFacts = { workflowId: ENTITY, workflowType: 'manageSync', namespace: NS, taskQueue: QUEUE };
const apply: SenderFacts = {
  workflowId: 'deploy:env-a',
  workflowType: 'applyDeployment',
  namespace: NS,
  taskQueue: QUEUE,
};

const child = (workflowType: string, workflowId: string, extra: object = {}): PolicyCommand =>
  childStart(NS, QUEUE, workflowType, workflowId, extra);
const signal = (workflowId: string, signalName: string, namespace = NS): PolicyCommand =>
  signalTo(namespace, workflowId, signalName);

describe('the commands a workflow may send', () => {
  it("allows what the service's workflows send", () => {
    const nested = child('runAction', `action:${UUID}`);
    expect(refusedCommand(run, [{ ...nested }, { scheduleLocalActivity: {} } as PolicyCommand])).toBeUndefined();
    // A sync run's child action goes to the action queue; an action's stays on its own.
    expect(
      refusedCommand(run, [child('runAction', `action:${UUID}`, { taskQueue: `${QUEUE}-actions` })]),
    ).toBeUndefined();
    expect(
      refusedCommand(action, [child('runAction', `action:${UUID}`, { taskQueue: `${QUEUE}-actions` })]),
    ).toBeUndefined();
    expect(refusedCommand(entity, [child('runSync', `${ENTITY}:run:${UUID}`)])).toBeUndefined();
    expect(
      refusedCommand(entity, [child('deliverWebhook', `${ENTITY}:run:${UUID}:webhook`, { parentClosePolicy: 2 })]),
    ).toBeUndefined();
    // A script run inside its entity (issue 31) nests actions from there.
    expect(refusedCommand(entity, [child('runAction', `action:${UUID}`)])).toBeUndefined();
    expect(refusedCommand(apply, [signal('sync:env-a:github:conn-1:issues', 'reconfigure')])).toBeUndefined();
    expect(
      refusedCommand(entity, [{ continueAsNewWorkflowExecution: { workflowType: 'manageSync', taskQueue: QUEUE } }]),
    ).toBeUndefined();
    expect(
      refusedCommand(run, [{ cancelChildWorkflowExecution: { childWorkflowSeq: 1 } } as PolicyCommand]),
    ).toBeUndefined();
  });

  it("refuses a child that could end or take another execution's place", () => {
    // TERMINATE_IF_RUNNING (4), or any reuse policy: the service never sets one.
    for (const policy of [1, 2, 3, 4]) {
      expect(refusedCommand(run, [child('runAction', `action:${UUID}`, { workflowIdReusePolicy: policy })])).toMatch(
        /id reuse policy/,
      );
    }
    // Ids of shapes the sender's type never starts: another environment's root action, entity, run, apply.
    for (const [type, id] of [
      ['runAction', `action:env-b:github:conn-9:reveal:${UUID}`],
      ['runAction', 'action:not-a-uuid'],
      ['runSync', `sync:env-b:github:conn-9:issues:run:forged`],
      ['manageSync', 'sync:env-b:github:conn-9:issues-forged'],
      ['applyDeployment', 'deploy:env-b'],
      ['deliverWebhook', `sync:env-b:github:conn-9:issues:run:${UUID}:webhook`],
    ] as const) {
      expect({ type, id, refusal: refusedCommand(run, [child(type, id)]) }).toEqual({
        type,
        id,
        refusal: expect.stringMatching(/not a child its type starts/) as unknown,
      });
    }
    // An entity starts runs and webhooks of its own only.
    expect(refusedCommand(entity, [child('runSync', `sync:env-b:github:conn-9:issues:run:${UUID}`)])).toBeDefined();
    expect(refusedCommand(entity, [child('runSync', `${ENTITY}:run:${UUID}:more`)])).toBeDefined();
    expect(refusedCommand(entity, [child('deliverWebhook', `${ENTITY}:run::webhook`)])).toBeDefined();
    expect(refusedCommand(entity, [child('runSync', `${ENTITY}:run:`)])).toBeDefined();
    // Only a sender whose own id is an entity's is one.
    for (const workflowId of [
      'sync:env-a::conn-1:issues',
      'sync::github:conn-1:issues',
      'sync:env-a:github:conn-1:',
      'sync:env-a:github:issues',
    ]) {
      expect(refusedCommand({ ...entity, workflowId }, [child('runSync', `${workflowId}:run:${UUID}`)])).toBeDefined();
    }
    // A webhook child abandoned is the entity's; an abandoned action is nobody's.
    expect(refusedCommand(run, [child('runAction', `action:${UUID}`, { parentClosePolicy: 2 })])).toMatch(
      /parent close/,
    );
    // Another namespace, a cron schedule, a queue no worker of the service serves for it.
    expect(refusedCommand(run, [child('runAction', `action:${UUID}`, { namespace: 'other' })])).toMatch(/namespace/);
    expect(refusedCommand(run, [child('runAction', `action:${UUID}`, { cronSchedule: '* * * * *' })])).toMatch(/cron/);
    expect(refusedCommand(run, [child('runAction', `action:${UUID}`, { taskQueue: 'other' })])).toMatch(/task queue/);
    // A forged entity (it has a parent) or an apply with a parent starts and signals nothing.
    const forgedEntity = { ...entity, parent: { workflowId: run.workflowId } };
    expect(refusedCommand(forgedEntity, [child('runSync', `${ENTITY}:run:${UUID}`)])).toBeDefined();
    expect(
      refusedCommand({ ...apply, parent: { workflowId: run.workflowId } }, [
        signal('sync:env-a:github:conn-1:issues', 'reconfigure'),
      ]),
    ).toBeDefined();
    // A refused command anywhere in the completion refuses it.
    expect(
      refusedCommand(run, [child('runAction', `action:${UUID}`), child('runSync', `${ENTITY}:run:x`)]),
    ).toBeDefined();
  });

  it('refuses signals and cancellation requests outside what the sender addresses', () => {
    for (const sender of [run, action, entity]) {
      expect(refusedCommand(sender, [signal('sync:env-b:github:conn-9:issues', 'pause')])).toBeDefined();
      expect(refusedCommand(sender, [signal(ENTITY, 'trigger')])).toBeDefined();
      expect(
        refusedCommand(sender, [
          { signalExternalWorkflowExecution: { childWorkflowId: `action:${UUID}`, signalName: 'x' } },
        ]),
      ).toBeDefined();
    }
    for (const sender of [run, action, entity, apply]) {
      expect(
        refusedCommand(sender, [
          { requestCancelExternalWorkflowExecution: { workflowExecution: { namespace: NS, workflowId: ENTITY } } },
        ]),
      ).toMatch(/cancellation/);
      expect(refusedCommand(sender, [{ scheduleNexusOperation: {} }])).toMatch(/Nexus/);
    }
    // The apply of env-a: reconfigure to its own environment's entities, nothing else.
    expect(refusedCommand(apply, [signal('sync:env-b:github:conn-9:issues', 'reconfigure')])).toBeDefined();
    expect(refusedCommand(apply, [signal('sync:env-a:github:conn-1:issues', 'pause')])).toBeDefined();
    expect(refusedCommand(apply, [signal('sync:env-a:github:conn-1:issues', 'reconfigure', 'other')])).toBeDefined();
    expect(refusedCommand(apply, [signal(`action:env-a:github:conn-1:x:${UUID}`, 'reconfigure')])).toBeDefined();
    // An environment id is exact: env-a's apply does not reach env-ab.
    expect(refusedCommand(apply, [signal('sync:env-ab:github:conn-1:issues', 'reconfigure')])).toBeDefined();
    expect(refusedCommand(run, [{ continueAsNewWorkflowExecution: { workflowType: 'manageSync' } }])).toMatch(
      /continue as/,
    );
  });

  it('a refused completion is sent as one FailWorkflowExecution with scope_denied', () => {
    const completion = {
      runId: 'r',
      successful: {
        commands: [child('runAction', `action:${UUID}`, { workflowIdReusePolicy: 4 })],
        usedInternalFlags: [3],
      },
    };
    const refusal = refusedCompletion(run, completion);
    expect(refusal).toBeDefined();
    expect(refusingCompletion(completion, refusal!)).toEqual({
      runId: 'r',
      successful: {
        usedInternalFlags: [3],
        commands: [
          {
            failWorkflowExecution: {
              failure: {
                message: refusal,
                source: 'TypeScriptSDK',
                applicationFailureInfo: { type: 'scope_denied', nonRetryable: true },
              },
            },
          },
        ],
      },
    });
    expect(refusedCompletion(run, { runId: 'r', failed: { failure: { message: 'x' } } })).toBeUndefined();
    expect(refusedCompletion(run, { runId: 'r', successful: {} })).toBeUndefined();
    // Fail closed: a completion or a command of a shape the policy does not know is not sent unread.
    expect(refusedCompletion(run, new Uint8Array([1, 2]))).toMatch(/cannot read/);
    expect(refusedCompletion(run, { runId: 'r', successful: { commands: new Uint8Array([1]) } })).toMatch(
      /cannot read/,
    );
    expect(
      refusedCompletion(run, { runId: 'r', successful: { commands: [{ terminateExternalWorkflowExecution: {} }] } }),
    ).toMatch(/does not know \(terminateExternalWorkflowExecution\)/);
    expect(
      refusedCompletion(run, {
        runId: 'r',
        successful: { commands: [{ userMetadata: { summary: null }, startTimer: { seq: 1 }, eventGroupMarkers: [] }] },
      }),
    ).toBeUndefined();
  });

  it("the creator wrapper checks each completion against the facts Temporal gave, not the workflow's", async () => {
    const refusals: string[] = [];
    let commands: PolicyCommand[] = [];
    const info = { ...run, parent: { workflowId: ENTITY, runId: 'p' } };
    const creator = policingCommands(
      {
        createWorkflow: (options: { info: typeof info }) =>
          Promise.resolve({
            // A workflow that changes its info object after creation gains nothing.
            activate: (_activation: never) => {
              options.info.workflowType = 'applyDeployment';
              options.info.workflowId = 'deploy:env-b';
              return Promise.resolve({ successful: { commands } });
            },
          }),
        destroy: () => Promise.resolve(),
      },
      (_sender, message) => refusals.push(message),
    );
    const workflow = await creator.createWorkflow({ info: { ...info } });
    commands = [child('runAction', `action:${UUID}`)];
    expect(await workflow.activate({} as never)).toEqual({ successful: { commands } });
    commands = [signal('sync:env-b:github:conn-9:issues', 'reconfigure')];
    const refused = await workflow.activate({} as never);
    expect(refused.successful.commands).toEqual([{ failWorkflowExecution: expect.anything() as unknown }]);
    expect(refusals).toEqual([expect.stringContaining(`runSync ${run.workflowId} may not signal`)]);
  });
});
