import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { availableParallelism, setPriority } from 'node:os';
import { osThreads, threadCpuMs, threadWaitMs } from '../sandbox/workerSide.js';
import {
  createLanes,
  environmentOfWorkflow,
  LaneExpiredError,
  LaneMoveError,
  LaneStoppedError,
  type LaneWorkflowInfo,
  type RunawayNotice,
} from './lanes.js';

/** A fake thread: each activation takes `ms` of its (fake) time, or fails with the isolate timeout. */
type Step = {
  ms: number;
  interrupted?: boolean;
  continuation?: boolean;
  continues?: boolean;
  replaying?: boolean;
  /** Of `ms`, the time the thread computed and the time it waited for a CPU (the rest: blocked). */
  computed?: number;
  waited?: number;
};

function harness(sharedLanes = 2, heavyActivationMs = 1000) {
  let clock = 0;
  // How long the process stood still during the activation asked about (a SIGSTOP, a paused VM).
  let stood = 0;
  // The thread's CPU time and its wait for a CPU so far, advanced by each activation's step.
  let cpu = 0;
  let wait = 0;
  const log: string[] = [];
  const runaways: RunawayNotice[] = [];
  // The sync entities whose run is under way (what the run watch knows).
  const entityRuns = new Set<string>();
  // Activations run when the test advances them: each waits for `finish(name)`.
  const pending = new Map<string, { resolve: (value: string) => void; reject: (error: Error) => void; step: Step }>();
  const creators = Array.from({ length: sharedLanes + 1 }, (_, lane) => ({
    async createWorkflow(options: { info: LaneWorkflowInfo }) {
      const name = options.info.workflowId;
      return {
        activate: (step: Step) =>
          new Promise<string>((resolve, reject) => {
            log.push(`${name}@${lane}`);
            pending.set(name, { resolve, reject, step });
          }),
        getAndResetSinkCalls: async () => [],
        dispose: async () => undefined,
      };
    },
    destroy: async () => undefined,
  }));
  const lanes = createLanes(creators, {
    sharedLanes,
    heavyActivationMs,
    isIsolateTimeout: (error) => error instanceof Error && error.message === 'Script execution timed out',
    interrupted: (completion) => completion === 'interrupted',
    onRunaway: (notice) => runaways.push(notice),
    // A step of `continues` asks for the workflow's next activation within its task.
    startsTask: (activation) => !(activation as Step).continuation,
    continuesTask: (completion) => (completion as string).endsWith('+'),
    replaying: (activation) => (activation as Step).replaying === true,
    replayInterruption: (_completion, message) => `replayed: ${message}`,
    runsInEntity: (workflowId) => entityRuns.has(workflowId),
    now: () => clock,
    stalledDuring: () => stood,
    threadCpuMs: () => cpu,
    threadWaitMs: () => wait,
  });
  const info = (
    workflowId: string,
    workflowType = 'runAction',
    taskTimeoutMs?: number,
  ): { info: LaneWorkflowInfo } => ({
    info: { workflowId, runId: `run-${workflowId}`, workflowType, taskTimeoutMs },
  });
  return {
    lanes,
    log,
    runaways,
    entityRuns,
    create: (id: string, type?: string, taskTimeoutMs?: number) => lanes.createWorkflow(info(id, type, taskTimeoutMs)),
    /** Lets `name`'s running activation end after its step's time. */
    async finish(name: string) {
      const running = pending.get(name);
      if (!running) throw new Error(`${name} is not running`);
      pending.delete(name);
      clock += running.step.ms;
      cpu += running.step.computed ?? running.step.ms;
      wait += running.step.waited ?? 0;
      // The SDK answers an interrupted activation with a failed completion, not a rejection.
      if (running.step.interrupted) running.resolve('interrupted');
      else running.resolve(running.step.continues ? `${name}+` : name);
      await new Promise((resolve) => setImmediate(resolve));
    },
    /** Runs `step` as the activation of `workflow` (named `name`) to its end; answers its outcome. */
    async activateToEnd(workflow: { activate(step: Step): Promise<unknown> }, name: string, step: Step) {
      const outcome = workflow.activate(step).catch(() => undefined);
      await new Promise((resolve) => setImmediate(resolve));
      await this.finish(name);
      return outcome;
    },
    running: () => [...pending.keys()],
    tick: async () => new Promise((resolve) => setImmediate(resolve)),
    advance: (ms: number) => {
      clock += ms;
    },
    standStill: (ms: number) => {
      stood = ms;
    },
  };
}

describe('environmentOfWorkflow', () => {
  it('reads the environment of the root: a sync, its runs, an action the API started, a nested action', () => {
    const of = (workflowId: string, root?: string) =>
      environmentOfWorkflow({
        workflowId,
        runId: 'r',
        workflowType: 't',
        root: root ? { workflowId: root } : undefined,
      });
    expect(of('sync:env1:int:conn:issues')).toBe('env1');
    expect(of('sync:env1:int:conn:issues:run:abc', 'sync:env1:int:conn:issues')).toBe('env1');
    expect(of('action:env2:int:conn:create:uuid')).toBe('env2');
    expect(of('action:0b5e', 'action:env3:int:conn:outer:uuid')).toBe('env3');
    expect(of('deploy:env4')).toBe('env4');
    expect(of('something-else')).toBe('');
  });
});

describe('lanes', () => {
  it('runs one activation at a time per lane; a free lane serves the environment that used the least thread time', async () => {
    const h = harness(1);
    const a1 = await h.create('action:a:i:c:x:1');
    const a2 = await h.create('action:a:i:c:x:2');
    const b1 = await h.create('action:b:i:c:x:1');
    const first = a1.activate({ ms: 500 });
    await h.tick();
    const second = a2.activate({ ms: 10 });
    const third = b1.activate({ ms: 10 });
    await h.tick();
    expect(h.running()).toEqual(['action:a:i:c:x:1']);
    await h.finish('action:a:i:c:x:1');
    // b has used nothing, a 500 ms: b goes first although it came second.
    expect(h.running()).toEqual(['action:b:i:c:x:1']);
    await h.finish('action:b:i:c:x:1');
    await h.finish('action:a:i:c:x:2');
    await Promise.all([first, second, third]);
  });

  it('while another environment is active, one environment runs on one of two shared lanes at most', async () => {
    const h = harness(2);
    const b = await h.create('action:b:i:c:x:1');
    await h.finish((void b.activate({ ms: 5 }), await h.tick(), 'action:b:i:c:x:1'));
    const a = await Promise.all([1, 2, 3].map((n) => h.create(`action:a:i:c:x:${n}`)));
    // Left waiting when the test ends: a's heavy timer, real, may heat a during a later test and refuse them then.
    a.forEach((workflow) => void workflow.activate({ ms: 1000 }).catch(() => undefined));
    await h.tick();
    expect(h.running()).toHaveLength(1);
    // b's next workflow finds the other lane free and starts at once.
    const b2 = await h.create('action:b:i:c:x:2');
    void b2.activate({ ms: 5 });
    await h.tick();
    expect(h.running()).toContain('action:b:i:c:x:2');
  });

  it('an interrupted statement convicts its run at once, heats its environment, and moves its workflows to the penalty lane', async () => {
    const h = harness(2);
    const runaway = await h.create('action:a:i:c:x:1');
    const other = await h.create('action:a:i:c:x:2');
    const failed = runaway.activate({ ms: 3000, interrupted: true });
    await h.tick();
    await h.finish('action:a:i:c:x:1');
    expect(await failed).toBe('interrupted');
    expect(h.runaways).toMatchObject([
      { workflowId: 'action:a:i:c:x:1', environmentId: 'a', workflowType: 'runAction' },
    ]);
    expect(h.lanes.stats().hot).toEqual(['a']);
    // A workflow of the hot environment still on a shared lane is refused: the worker evicts it.
    await expect(other.activate({ ms: 1 })).rejects.toBeInstanceOf(LaneMoveError);
    // Re-created, it lives on the penalty lane (the last one).
    const moved = await h.create('action:a:i:c:x:2');
    void moved.activate({ ms: 1 });
    await h.tick();
    expect(h.log.at(-1)).toBe('action:a:i:c:x:2@2');
    // A calm environment's new workflow never lives there.
    const calm = await h.create('action:b:i:c:x:1');
    void calm.activate({ ms: 1 });
    await h.tick();
    expect(h.log.at(-1)).not.toMatch(/@2$/);
  });

  it('an activation that holds a shared lane past the heavy mark heats its environment and sends the others’ waiters to another lane', async () => {
    const h = harness(2, 20);
    const a = await h.create('action:a:i:c:x:1');
    await h.create('action:c:i:c:x:1');
    // b happens to live on a's lane.
    const b = await h.create('action:b:i:c:x:1');
    void a.activate({ ms: 3000 });
    await h.tick();
    const waiting = b.activate({ ms: 5 }).catch((error: unknown) => error);
    h.advance(20);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(await waiting).toBeInstanceOf(LaneMoveError);
    expect(h.lanes.stats().hot).toEqual(['a']);
    // Re-created, b lives on the other shared lane and runs at once.
    const again = await h.create('action:b:i:c:x:1');
    void again.activate({ ms: 5 });
    await h.tick();
    expect(h.log.at(-1)).toBe('action:b:i:c:x:1@1');
  });

  it('a sync entity’s long activation (a replay on a loaded machine) moves the others’ waiters but heats nothing', async () => {
    const h = harness(2, 20);
    const entity = await h.create('sync:a:i:c:s', 'manageSync');
    await h.create('action:c:i:c:x:1');
    const b = await h.create('action:b:i:c:x:1');
    const long = entity.activate({ ms: 1500 });
    await h.tick();
    const waiting = b.activate({ ms: 5 }).catch((error: unknown) => error);
    h.advance(20);
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(await waiting).toBeInstanceOf(LaneMoveError);
    await h.finish('sync:a:i:c:s');
    await long;
    expect(h.lanes.stats().hot).toEqual([]);
    // Its environment's next workflow still lives on a shared lane.
    const next = await h.create('action:a:i:c:x:1');
    void next.activate({ ms: 1 });
    await h.tick();
    expect(h.log.at(-1)).not.toMatch(/@2$/);
  });

  it('an interrupted statement of a workflow that is not a run heats its environment but convicts nothing', async () => {
    const h = harness(2);
    const entity = await h.create('sync:a:i:c:s', 'manageSync');
    const failed = entity.activate({ ms: 3000, interrupted: true }).catch(() => undefined);
    await h.tick();
    await h.finish('sync:a:i:c:s');
    await failed;
    expect(h.runaways).toEqual([]);
    expect(h.lanes.stats().hot).toEqual(['a']);
  });

  it('an interrupted statement of a sync entity’s run convicts the run, unless the activation was replaying history', async () => {
    const h = harness(2);
    const replayed = await h.create('sync:a:i:c:replayed', 'manageSync');
    const runaway = await h.create('sync:b:i:c:runaway', 'manageSync');
    h.entityRuns.add('sync:a:i:c:replayed');
    h.entityRuns.add('sync:b:i:c:runaway');
    // A replay of a long history on a starved thread: interrupted, but its script had run fine before.
    // Its failed task says so instead of an isolate timeout, which the run watch would take as evidence.
    expect(
      await h.activateToEnd(replayed, 'sync:a:i:c:replayed', { ms: 3000, interrupted: true, replaying: true }),
    ).toMatch(/^replayed: the replay of sync:a:i:c:replayed's history was interrupted after 3000 ms/);
    expect(h.runaways).toEqual([]);
    // New work of a run interrupted: the run's script computed past its budget.
    expect(await h.activateToEnd(runaway, 'sync:b:i:c:runaway', { ms: 3000, interrupted: true })).toBe('interrupted');
    expect(h.runaways.map((notice) => notice.workflowId)).toEqual(['sync:b:i:c:runaway']);
  });

  it('an interrupted activation during which the process stood still convicts nobody and says why; the next interruption does', async () => {
    const h = harness(2);
    const entity = await h.create('sync:a:i:c:stopped', 'manageSync');
    h.entityRuns.add('sync:a:i:c:stopped');
    // The worker was stopped 6 s in the middle of a healthy activation: its isolate timeout fired.
    h.standStill(6000);
    expect(await h.activateToEnd(entity, 'sync:a:i:c:stopped', { ms: 6010, interrupted: true, computed: 10 })).toMatch(
      /^replayed: sync:a:i:c:stopped's activation was interrupted after 6010 ms, 6000 ms of which the worker process stood still/,
    );
    expect(h.runaways).toEqual([]);
    // A stall too short to explain the interruption excuses nothing.
    h.standStill(400);
    expect(await h.activateToEnd(entity, 'sync:a:i:c:stopped', { ms: 3000, interrupted: true })).toBe('interrupted');
    expect(h.runaways.map((notice) => notice.workflowId)).toEqual(['sync:a:i:c:stopped']);
  });

  it('an interrupted activation whose thread waited for a CPU instead of computing convicts nobody once; a blocked or computing one does', async () => {
    const h = harness(2);
    const action = await h.create('action:a:i:c:x:1');
    // A busy machine: the thread computed 200 ms of the 3 s, and waited 2.8 s for a CPU.
    expect(
      await h.activateToEnd(action, 'action:a:i:c:x:1', { ms: 3000, interrupted: true, computed: 200, waited: 2800 }),
    ).toMatch(
      /^replayed: action:a:i:c:x:1's activation was interrupted after 3000 ms, in which its workflow thread computed 200 ms and waited 2800 ms for a CPU/,
    );
    expect(h.runaways).toEqual([]);
    // Once per run: starved again at its retry (its environment is hot now: the retry replays on the
    // penalty lane), it is convicted (a runaway on a machine that stays busy).
    const retried = await h.create('action:a:i:c:x:1');
    const again = await h.activateToEnd(retried, 'action:a:i:c:x:1', {
      ms: 3000,
      interrupted: true,
      computed: 200,
      waited: 2800,
    });
    expect(again).toBe('interrupted');
    expect(h.runaways.map((notice) => notice.workflowId)).toEqual(['action:a:i:c:x:1']);
    // Blocked (neither computing nor waiting for a CPU: Atomics.wait) is no excuse.
    const blocked = await h.create('action:a:i:c:x:2');
    expect(
      await h.activateToEnd(blocked, 'action:a:i:c:x:2', { ms: 3000, interrupted: true, computed: 0, waited: 0 }),
    ).toBe('interrupted');
    // Nor waiting some while computing more than a second of the budget.
    const computing = await h.create('action:a:i:c:x:3');
    expect(
      await h.activateToEnd(computing, 'action:a:i:c:x:3', {
        ms: 3000,
        interrupted: true,
        computed: 1500,
        waited: 1500,
      }),
    ).toBe('interrupted');
    expect(h.runaways.map((notice) => notice.workflowId)).toEqual([
      'action:a:i:c:x:1',
      'action:a:i:c:x:2',
      'action:a:i:c:x:3',
    ]);
  });

  it('a starved interruption that would convict nobody spends no excuse and heats its environment (hostile review)', async () => {
    const h = harness(2);
    const entity = await h.create('sync:a:i:c:hostile', 'manageSync');
    // The run watch does not know of its run yet: the interruption convicts nobody, and excuses nothing.
    expect(
      await h.activateToEnd(entity, 'sync:a:i:c:hostile', { ms: 3000, interrupted: true, computed: 100, waited: 2900 }),
    ).toBe('interrupted');
    expect(h.lanes.stats().hot).toEqual(['a']);
    expect(h.runaways).toEqual([]);
    // Once its run is known, its first starved interruption is excused, its second convicts.
    h.entityRuns.add('sync:a:i:c:hostile');
    const retried = await h.create('sync:a:i:c:hostile', 'manageSync');
    const starved = { ms: 3000, interrupted: true, computed: 100, waited: 2900 };
    expect(await h.activateToEnd(retried, 'sync:a:i:c:hostile', starved)).toMatch(
      /^replayed: .*waited 2900 ms for a CPU/,
    );
    expect(await h.activateToEnd(retried, 'sync:a:i:c:hostile', starved)).toBe('interrupted');
    expect(h.runaways.map((notice) => notice.workflowId)).toEqual(['sync:a:i:c:hostile']);
  });

  it('the penalty lane finishes a workflow task before it starts another', async () => {
    const h = harness(1);
    // Heat environment a.
    const heater = await h.create('action:a:i:c:x:0');
    const heated = heater.activate({ ms: 1500 });
    await h.tick();
    await h.finish('action:a:i:c:x:0');
    await heated;
    const first = await h.create('action:a:i:c:x:1');
    const second = await h.create('action:a:i:c:x:2');
    // The first one's task schedules a local activity: the lane waits for its result.
    void first.activate({ ms: 10, continues: true });
    await h.tick();
    const secondOutcome = second.activate({ ms: 3000, interrupted: true });
    await h.finish('action:a:i:c:x:1');
    expect(h.running()).toEqual([]);
    void first.activate({ ms: 3000, continuation: true });
    await h.tick();
    expect(h.running()).toEqual(['action:a:i:c:x:1']);
    await h.finish('action:a:i:c:x:1');
    // Then the second.
    expect(h.running()).toEqual(['action:a:i:c:x:2']);
    await h.finish('action:a:i:c:x:2');
    expect(await secondOutcome).toBe('interrupted');
  });

  it('an activation that waited past its workflow task’s timeout is not run; one still in time is', async () => {
    const h = harness(1);
    const busy = await h.create('sync:a:i:c:busy', 'manageSync', 4000);
    const late = await h.create('sync:a:i:c:late', 'manageSync', 4000);
    const fresh = await h.create('sync:a:i:c:fresh', 'manageSync', 4000);
    // busy holds the only shared lane (a long replay); late's task arrives now, fresh's 1 s later.
    const busyOutcome = busy.activate({ ms: 0 });
    await h.tick();
    const lateOutcome = late.activate({ ms: 0 }).catch((error: unknown) => error);
    h.advance(1000);
    const freshOutcome = fresh.activate({ ms: 0 });
    await h.tick();
    h.advance(3500);
    await h.finish('sync:a:i:c:busy');
    expect(await busyOutcome).toBe('sync:a:i:c:busy');
    // 4.5 s after late's task began: the server gave it up, so it is not run; fresh has 0.5 s left.
    expect(await lateOutcome).toBeInstanceOf(LaneExpiredError);
    expect(h.running()).toEqual(['sync:a:i:c:fresh']);
    await h.finish('sync:a:i:c:fresh');
    expect(await freshOutcome).toBe('sync:a:i:c:fresh');
    // A task of the late workflow's that arrives now is run.
    const retried = late.activate({ ms: 0 });
    await h.tick();
    expect(h.running()).toEqual(['sync:a:i:c:late']);
    await h.finish('sync:a:i:c:late');
    expect(await retried).toBe('sync:a:i:c:late');
  });

  it('a run’s activation that waited past its workflow task’s timeout is still run (a runaway is convicted only when it runs)', async () => {
    const h = harness(1);
    const busy = await h.create('sync:a:i:c:busy', 'manageSync', 4000);
    const runaway = await h.create('action:a:i:c:x:1', 'runAction', 4000);
    const busyOutcome = busy.activate({ ms: 0 });
    await h.tick();
    const runawayOutcome = runaway.activate({ ms: 3000, interrupted: true }).catch((error: unknown) => error);
    h.advance(4500);
    await h.finish('sync:a:i:c:busy');
    expect(await busyOutcome).toBe('sync:a:i:c:busy');
    expect(h.running()).toEqual(['action:a:i:c:x:1']);
    await h.finish('action:a:i:c:x:1');
    await runawayOutcome;
    expect(h.runaways.map((notice) => notice.workflowId)).toEqual(['action:a:i:c:x:1']);
  });

  it('a run stopped for an interrupted statement is not run again (a task of its was already on its way)', async () => {
    const h = harness(1);
    const runaway = await h.create('action:a:i:c:x:1');
    const interrupted = runaway.activate({ ms: 3000, interrupted: true });
    await h.tick();
    await h.finish('action:a:i:c:x:1');
    await interrupted;
    const retried = await h.create('action:a:i:c:x:1');
    await expect(retried.activate({ ms: 3000, interrupted: true })).rejects.toBeInstanceOf(LaneStoppedError);
    expect(h.runaways).toHaveLength(1);
  });
});

/**
 * A real thread (its own OS thread, as a workflow thread is) that computes when told to, until it has
 * used `ms` of CPU time of its own (so that a loaded machine makes it take longer, not compute less).
 */
function computingThread() {
  const before = osThreads();
  const thread = new Worker(
    `const { parentPort } = require('node:worker_threads');
     const { readFileSync } = require('node:fs');
     const cpu = () => { const s = readFileSync('/proc/thread-self/stat', 'latin1'); const f = s.slice(s.lastIndexOf(')') + 2).split(' '); return (Number(f[11]) + Number(f[12])) * 10; };
     parentPort.on('message', ({ ms, done }) => { const until = cpu() + ms; let turns = 0; while (++turns % 100000 !== 0 || cpu() < until); Atomics.store(done, 0, 1); parentPort.postMessage('done'); });`,
    { eval: true },
  );
  const done = new Int32Array(new SharedArrayBuffer(4));
  const ids = osThreads().filter((id) => !before.includes(id));
  return {
    ids,
    cpuMs: () => threadCpuMs(ids),
    waitMs: () => threadWaitMs(ids),
    compute: (ms: number) =>
      new Promise<void>((resolve) => {
        Atomics.store(done, 0, 0);
        thread.once('message', () => resolve());
        thread.postMessage({ ms, done });
      }),
    /** Whether the last computation is over (readable while this thread is busy). */
    done: () => Atomics.load(done, 0) === 1,
    stop: () => thread.terminate(),
  };
}

/**
 * Lanes over one real thread whose every activation runs `statement` and answers as the isolate
 * timeout does; what they convict and excuse goes to `runaways` and `excused`.
 */
function lanesOverThread(
  thread: ReturnType<typeof computingThread>,
  statement: () => Promise<unknown>,
  runaways: RunawayNotice[],
  excused: string[],
  measures: { wait: boolean },
) {
  const creators = Array.from({ length: 3 }, () => ({
    async createWorkflow() {
      return {
        activate: async () => {
          await statement();
          return 'interrupted';
        },
        getAndResetSinkCalls: async () => [],
        dispose: async () => undefined,
      };
    },
    destroy: async () => undefined,
  }));
  return createLanes(creators, {
    sharedLanes: 2,
    isIsolateTimeout: () => false,
    interrupted: (completion) => completion === 'interrupted',
    onRunaway: (notice) => runaways.push(notice),
    startsTask: () => true,
    continuesTask: () => false,
    replaying: () => false,
    replayInterruption: (_completion, message) => {
      excused.push(message);
      return 'retried';
    },
    // The real clock and stall monitor; the thread's real CPU time (and wait for a CPU).
    threadCpuMs: () => thread.cpuMs(),
    ...(measures.wait ? { threadWaitMs: () => thread.waitMs() } : {}),
  });
}

// From a hostile review of the stall excuse: what a busy main thread and a stalled process look like.
describe('lanes: a process that stood still, and one that only looked so', () => {
  it('a runaway whose thread computed all along is convicted though the main thread was busy meanwhile (a huge JSON body parsed)', async () => {
    const runaways: RunawayNotice[] = [];
    const excused: string[] = [];
    const thread = computingThread();
    let busy = false;
    // The workflow thread runs the script’s statement for 1.2 s of its CPU time, then the isolate timeout.
    const lanes = lanesOverThread(thread, () => thread.compute(1200), runaways, excused, { wait: false });
    try {
      expect(thread.cpuMs()).toBeTypeOf('number');
      await new Promise((resolve) => setTimeout(resolve, 300));
      const runaway = await lanes.createWorkflow({
        info: { workflowId: 'action:hostile:i:c:spin:1', runId: 'r1', workflowType: 'runAction' },
      });
      const activation = runaway.activate(undefined);
      // Meanwhile the main thread is kept busy until the statement is interrupted: its ticks come late,
      // as in a stopped process, for nearly all of the activation.
      await new Promise((resolve) => setTimeout(resolve, 200));
      while (!thread.done()) busy = true;
      expect(busy).toBe(true);
      expect(await activation).toBe('interrupted');
      expect({ excused, convicted: runaways.map((notice) => notice.workflowId) }).toEqual({
        excused: [],
        convicted: ['action:hostile:i:c:spin:1'],
      });
    } finally {
      await lanes.destroy();
      await thread.stop();
    }
  }, 120_000);

  it('time the process stood still does not heat the environment of a healthy run, though the heavy timer fires first when it continues', async () => {
    let clock = 0;
    let finish: (value: string) => void = () => undefined;
    const creators = Array.from({ length: 3 }, () => ({
      async createWorkflow() {
        return {
          activate: () =>
            new Promise<string>((resolve) => {
              finish = resolve;
            }),
          getAndResetSinkCalls: async () => [],
          dispose: async () => undefined,
        };
      },
      destroy: async () => undefined,
    }));
    const lanes = createLanes(creators, {
      sharedLanes: 2,
      // Scaled down from 1000 ms; the heavy timer is a real timer.
      heavyActivationMs: 30,
      isIsolateTimeout: () => false,
      interrupted: () => false,
      onRunaway: () => undefined,
      startsTask: () => true,
      continuesTask: () => false,
      runsInEntity: () => true,
      now: () => clock,
      // The process stood still 6 s during this activation (SIGSTOP).
      stalledDuring: () => 6000,
    });
    const healthy = await lanes.createWorkflow({
      info: { workflowId: 'sync:victim:i:c:fetch', runId: 'r2', workflowType: 'manageSync' },
    });
    const activation = healthy.activate(undefined);
    // A stopped process's due timer runs before the completion's message when it continues.
    await new Promise((resolve) => setTimeout(resolve, 80));
    clock += 6010;
    finish('done');
    await activation;
    expect(lanes.stats().hot).toEqual([]);
  });

  it('a healthy statement on a starved thread (nice 19 beside a busy thread per core) is not convicted when the isolate timeout fires', async () => {
    const runaways: RunawayNotice[] = [];
    const excused: string[] = [];
    const thread = computingThread();
    for (const id of thread.ids) setPriority(id, 19);
    // One busy thread per core and one more, at the process's priority, until the test ends.
    const stop = new Int32Array(new SharedArrayBuffer(4));
    const busy = Array.from(
      { length: availableParallelism() + 1 },
      () =>
        new Worker(
          `const { workerData } = require('node:worker_threads'); while (Atomics.load(workerData, 0) === 0);`,
          { eval: true, workerData: stop },
        ),
    );
    // The statement needs 300 ms of CPU; the isolate timeout fires after 3 s of wall time.
    const statement = () => Promise.race([thread.compute(300), new Promise((resolve) => setTimeout(resolve, 3000))]);
    const lanes = lanesOverThread(thread, statement, runaways, excused, { wait: true });
    try {
      expect(thread.waitMs()).toBeTypeOf('number');
      const healthy = await lanes.createWorkflow({
        info: { workflowId: 'action:starved:i:c:healthy:1', runId: 'r1', workflowType: 'runAction' },
      });
      expect(await healthy.activate(undefined)).toBe('retried');
      expect(runaways).toEqual([]);
      expect(excused).toEqual([
        expect.stringMatching(/in which its workflow thread computed \d+ ms and waited \d+ ms for a CPU/),
      ]);
    } finally {
      Atomics.store(stop, 0, 1);
      await Promise.all(busy.map((worker) => worker.terminate()));
      await lanes.destroy();
      await thread.stop();
    }
  }, 120_000);
});

/**
 * Fake workflow threads that, like the SDK's, handle one message at a time in the order posted: a
 * workflow's creation, its activations, its sink calls and its disposal each wait for whatever the thread
 * was given before. An activation runs until its `hold` settles (a statement V8 does not interrupt).
 */
function oneMessageAtATime(count: number) {
  const tails: Promise<unknown>[] = Array.from({ length: count }, () => Promise.resolve());
  const post = <T>(lane: number, work: () => Promise<T>): Promise<T> => {
    const done = tails[lane]!.then(work);
    tails[lane] = done.catch(() => undefined);
    return done;
  };
  const creators = Array.from({ length: count }, (_, lane) => ({
    async createWorkflow(options: { info: LaneWorkflowInfo }) {
      await post(lane, async () => undefined);
      return {
        activate: (hold: Promise<void>) => post(lane, async () => (await hold, `${options.info.workflowId}@${lane}`)),
        getAndResetSinkCalls: () => post(lane, async () => []),
        dispose: () => post(lane, async () => undefined),
      };
    },
    destroy: async () => undefined,
  }));
  const lanes = createLanes(creators, {
    sharedLanes: 2,
    heavyActivationMs: 100,
    isIsolateTimeout: () => false,
    interrupted: () => false,
    onRunaway: () => undefined,
    startsTask: () => true,
    continuesTask: () => false,
    stalledDuring: () => 0,
  });
  const create = (workflowId: string) =>
    lanes.createWorkflow({ info: { workflowId, runId: `run-${workflowId}`, workflowType: 'runAction' } });
  return {
    lanes,
    create,
    /** Keeps lane `lane`'s thread busy with something that is no activation (a collection of another's garbage). */
    busy: (lane: number, ms: number) => post(lane, () => new Promise((resolve) => setTimeout(resolve, ms))),
    /**
     * One workflow task of a new workflow as the SDK runs it: create, activate, fetch the sink calls;
     * after a failed activation the workflow is evicted (disposed of) and the task's retry creates it again.
     */
    async task(workflowId: string, hold: Promise<void>): Promise<string> {
      for (let attempt = 1; ; attempt++) {
        if (attempt > 5) throw new Error(`${workflowId}: moved ${attempt - 1} times`);
        const workflow = await create(workflowId);
        try {
          return await workflow.activate(hold);
        } catch (error) {
          if (!(error instanceof LaneMoveError)) throw error;
        } finally {
          await workflow.getAndResetSinkCalls();
        }
        await workflow.dispose();
      }
    },
  };
}

/** Settles when `outcome` does, or to 'still waiting' after `ms`. */
const within = <T>(outcome: Promise<T>, ms: number) =>
  Promise.race([outcome, new Promise<string>((resolve) => setTimeout(() => resolve('still waiting'), ms))]);

// Two CI runs of test/runtime/requestAnswers.test.ts saw another environment's trivial action wait 9.3 s
// and 6.9 s beside a run parsing a 32 MiB answer, whose one JSON.parse held its thread 10-20 s.
describe('lanes over threads that take one message at a time', () => {
  it('a workflow moved off a lane held past the heavy mark runs on another without waiting for that thread', async () => {
    const t = oneMessageAtATime(3);
    const noisy = await t.create('action:noisy:i:c:x:1');
    // The quiet environment's previous workflow, not yet disposed of, on the other lane: the next one
    // ties with the noisy lane, and lives on it.
    const earlier = await t.create('action:quiet:i:c:x:0');
    await earlier.activate(Promise.resolve());
    let parsed!: () => void;
    const parsing = new Promise<void>((resolve) => (parsed = resolve));
    const quiet = t.task('action:quiet:i:c:x:1', Promise.resolve());
    // The noisy run's answer reaches the lane first.
    const big = noisy.activate(parsing);
    // Moved after the heavy mark, its sink calls and its disposal did not wait for the parse.
    expect(await within(quiet, 2000)).toBe('action:quiet:i:c:x:1@1');
    parsed();
    await big;
  });

  it('a workflow created on a lane whose thread then runs a long activation is moved without waiting for it', async () => {
    const t = oneMessageAtATime(3);
    const noisy = await t.create('action:noisy:i:c:x:1');
    const other = await t.create('action:other:i:c:x:1');
    let parsed!: () => void;
    const parsing = new Promise<void>((resolve) => (parsed = resolve));
    const big = noisy.activate(parsing);
    // Both lanes run an activation (the other environment's ends soon): the new workflow ties with the
    // noisy lane, where its creation waits behind the parse.
    const brief = other.activate(new Promise((resolve) => setTimeout(resolve, 20)));
    await new Promise((resolve) => setImmediate(resolve));
    const quiet = t.task('action:quiet:i:c:x:1', Promise.resolve());
    expect(await within(quiet, 2000)).toBe('action:quiet:i:c:x:1@1');
    await brief;
    parsed();
    await big;
  });

  it('a new workflow is placed beside an activation that just started, not one that has run long', async () => {
    const t = oneMessageAtATime(3);
    const noisy = await t.create('action:noisy:i:c:x:1');
    const other = await t.create('action:other:i:c:x:1');
    let parsed!: () => void;
    const big = noisy.activate(new Promise<void>((resolve) => (parsed = resolve)));
    // The parse has run past a tenth of the heavy mark (100 ms here) when the other lane's brief one starts.
    await new Promise((resolve) => setTimeout(resolve, 40));
    let ended!: () => void;
    const brief = other.activate(new Promise<void>((resolve) => (ended = resolve)));
    while (!t.lanes.stats().lanes[1]!.busy) await new Promise((resolve) => setImmediate(resolve));
    const quiet = await t.create('action:quiet:i:c:x:1');
    const activated = quiet.activate(Promise.resolve());
    ended();
    // Placed on the brief one's lane, it runs there once that ends; before, the tie put it on the parse's
    // lane, from which it moved only at the heavy mark (a failed activation, then a retry).
    expect(await within(activated, 2000)).toBe('action:quiet:i:c:x:1@1');
    await brief;
    parsed();
    await big;
  });

  it('the time a workflow waits for its creation is not its activation’s: its environment is not heated for it', async () => {
    const t = oneMessageAtATime(3);
    void t.busy(0, 250);
    const quiet = await t.create('action:quiet:i:c:x:1');
    expect(await quiet.activate(Promise.resolve())).toBe('action:quiet:i:c:x:1@0');
    expect(t.lanes.stats().hot).toEqual([]);
  });
});
