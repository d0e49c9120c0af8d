/**
 * What the command policy costs the worker's main thread (src/temporal/commandPolicy.ts): `npx tsx
 * bench/commandPolicy.ts`. The policy reads every workflow task completion of every workflow, so it is
 * timed on the completions the service's workflows send (as the TS SDK encodes them): an action's step
 * (one local activity), a sync run nesting an action (a child start and a local activity), a sync
 * entity's run start (a child and an activity), a deploy wave (100 reconfigure signals), and a
 * completion of 1,000 child starts. The limit: a loop that only touches each command once (what any
 * check of the commands must at least do); the bench prints both per completion and the ratio.
 */
import { refusedCompletion, type PolicyCommand, type SenderFacts } from '../src/temporal/commandPolicy.js';
import { childStart, signalTo } from '../src/temporal/commandPolicy.testing.js';

const NS = 'default';
const QUEUE = 'runtime';
const uuid = (n: number) => `0b6f0c1e-7d2a-4c1b-9a55-${n.toString(16).padStart(12, '0')}`;
const ENTITY = 'sync:env-a:github:conn-1:issues';
const localActivity = { scheduleLocalActivity: { seq: 1, activityId: '1', activityType: 'httpRequest' } };
const child = (workflowType: string, workflowId: string): PolicyCommand =>
  childStart(NS, QUEUE, workflowType, workflowId);

const run: SenderFacts = {
  workflowId: `${ENTITY}:run:${uuid(1)}`,
  workflowType: 'runSync',
  namespace: NS,
  taskQueue: QUEUE,
  parent: { workflowId: ENTITY },
};
const cases: { name: string; sender: SenderFacts; commands: PolicyCommand[] }[] = [
  {
    name: "an action's step (1 local activity)",
    sender: {
      workflowId: `action:env-a:github:conn-1:create:${uuid(2)}`,
      workflowType: 'runAction',
      namespace: NS,
      taskQueue: QUEUE,
    },
    commands: [localActivity as PolicyCommand],
  },
  {
    name: 'a sync run nesting an action (2 commands)',
    sender: run,
    commands: [child('runAction', `action:${uuid(3)}`), localActivity as PolicyCommand],
  },
  {
    name: "an entity's run start (2 commands)",
    sender: { workflowId: ENTITY, workflowType: 'manageSync', namespace: NS, taskQueue: QUEUE },
    commands: [child('runSync', `${ENTITY}:run:${uuid(4)}`), { scheduleActivity: {} } as PolicyCommand],
  },
  {
    name: 'a deploy wave (100 reconfigure signals)',
    sender: { workflowId: 'deploy:env-a', workflowType: 'applyDeployment', namespace: NS, taskQueue: QUEUE },
    commands: Array.from({ length: 100 }, (_, n) => signalTo(NS, `sync:env-a:github:conn-${n}:issues`, 'reconfigure')),
  },
  {
    name: '1,000 nested action starts',
    sender: run,
    commands: Array.from({ length: 1000 }, (_, n) => child('runAction', `action:${uuid(n)}`)),
  },
];

/** The floor: each command touched once. */
function touchEach(commands: readonly PolicyCommand[]): number {
  let seen = 0;
  for (const command of commands) if (command.startChildWorkflowExecution !== undefined) seen++;
  return seen;
}

function perCall(calls: number, body: () => unknown): number {
  let sink = 0;
  for (let warm = 0; warm < Math.min(calls, 10_000); warm++) sink += body() === undefined ? 0 : 1;
  const start = process.hrtime.bigint();
  for (let call = 0; call < calls; call++) sink += body() === undefined ? 0 : 1;
  const ns = Number(process.hrtime.bigint() - start) / calls;
  if (sink < 0) console.log(sink);
  return ns;
}

console.log('completion | policy ns | floor ns (touch each command) | ratio');
for (const { name, sender, commands } of cases) {
  const completion = { runId: 'r', successful: { commands } };
  if (refusedCompletion(sender, completion) !== undefined) throw new Error(`the policy refused ${name}`);
  const calls = Math.max(2_000, Math.round(2_000_000 / commands.length));
  const policy = perCall(calls, () => refusedCompletion(sender, completion));
  const floor = perCall(calls, () => touchEach(commands));
  console.log(`${name} | ${policy.toFixed(0)} | ${floor.toFixed(0)} | ${(policy / Math.max(floor, 1)).toFixed(1)}`);
}
