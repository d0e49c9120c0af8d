/**
 * The cuts at gates (SvcContext.cutAtGates) and the results' turns: a run with steps in flight at once
 * issues the same commands live and on replay. A live run gets its steps' results one by one, as they
 * end; a replay gets them as Temporal's core applies a task's recorded markers, in their order, as far as
 * the workflow has scheduled their steps (workflow_machines.rs apply_local_activity_peeked_resolutions).
 * Before the gates a fan-out whose results passed the cut issued its cut at another step on replay
 * (TMPRL1100 on the real server: test/runtime/compressedPages.test.ts); a hostile review of the gates
 * found a timer and the operation limit landing elsewhere, and branches with different code between
 * their steps scheduling them in another order (each answer then going to the other request). Here the
 * workflow module is stubbed: every step, timer and cut waits until the test delivers its outcome, live
 * (latencies that differ per step, one outcome per activation) or as a replay, and conditions are
 * unblocked as the SDK does (eagerly when true at once, else after an activation's microtasks); the
 * activity sequence (local activities and the cut share it) and the server's commands (timers, the
 * cut) are compared.
 */
import { ApplicationFailure } from '@temporalio/common';
import { sentArgs } from './stubbedWorkflow.testing.js';
import { describe, expect, it, vi } from 'vitest';
import type * as Workflow from '@temporalio/workflow';

const info = { historyLength: 10, historySize: 1000, unsafe: { isReplaying: false }, taskQueue: 'q', workflowId: 'w' };

interface Step {
  label: string;
  local: boolean;
  bytes: number;
  fail: boolean;
  due: number;
  resolve: (value: unknown) => void;
  reject: (error: unknown) => void;
}
const sim = {
  now: 0,
  steps: [] as Step[],
  commands: [] as string[],
  conditions: [] as { fn: () => boolean; resolve: () => void }[],
  latency: (_label: string) => 0,
  recorded: [] as string[],
  replayed: [] as string[],
  maxLocalInFlight: 0,
  timerSeq: 0,
  // What each workflow task's completion carries: the markers of the results delivered in it, and the
  // child starts issued meanwhile (their input, a reference past the claim check's threshold).
  tasks: [0] as number[],
};

// A replay's results carry the completion times the live run recorded (a review: recomputed from the
// replay's own clock, a step asked after a group of results ended later than it had live): by label and
// occurrence.
const recordedDue = new Map<string, number>();
const occurrences = new Map<string, number>();
let replaying = false;

function push(label: string, local: boolean, bytes: number, fail: boolean): Promise<unknown> {
  return new Promise((resolve, reject) => {
    sim.commands.push(label);
    const n = (occurrences.get(label) ?? 0) + 1;
    occurrences.set(label, n);
    const key = `${label}#${n}`;
    const due = (replaying ? recordedDue.get(key) : undefined) ?? sim.now + sim.latency(label);
    if (!replaying) recordedDue.set(key, due);
    sim.steps.push({ label, local, bytes, fail, due, resolve, reject });
    sim.maxLocalInFlight = Math.max(sim.maxLocalInFlight, sim.steps.filter((s) => !boundary(s.label)).length);
  });
}

function stubProxy(local: boolean): unknown {
  return new Proxy(
    {},
    {
      get: (_target, name) => {
        const execute = (sent: unknown[]) => {
          const args = sentArgs(sent);
          const request = args[0] as { path?: string; bytes?: number; fail?: boolean } | undefined;
          const viaOp = (args[1] as { config?: { endpoint?: string; params?: Record<string, string> } } | undefined)
            ?.config;
          const label = String(name) === 'forgetSteps' ? 'cut' : (request?.path ?? viaOp?.endpoint ?? String(name));
          const bytes = request?.bytes ?? Number(viaOp?.params?.bytes ?? 0);
          const fail = request?.fail === true || viaOp?.params?.fail === 'true';
          return push(label, local, bytes, fail);
        };
        return Object.assign((...args: unknown[]) => execute(args), {
          executeWithOptions: (_options: unknown, sent: unknown[]) => execute(sent),
        });
      },
    },
  );
}

vi.mock('@temporalio/workflow', async (original) => {
  const real = await original<typeof Workflow>();
  return {
    ...real,
    workflowInfo: () => info,
    patched: () => true,
    proxyLocalActivities: () => stubProxy(true),
    proxyActivities: () => stubProxy(false),
    // The SDK evaluates a condition once when it is created (workflow.js conditionInner), then after
    // each activation's microtasks.
    condition: (fn: () => boolean) =>
      fn() ? Promise.resolve() : new Promise<void>((resolve) => sim.conditions.push({ fn, resolve })),
    sleep: (_ms: unknown) => push(`timer/${sim.timerSeq++}`, false, 0, false).then(() => undefined),
    uuid4: () => 'id',
    // A child action: its start is a command in the current task's completion; its end a new task.
    executeChild: (_type: unknown, options: { args: [{ input: { id: string } }] }) => {
      const bytes = JSON.stringify(options.args[0]).length;
      sim.tasks[sim.tasks.length - 1]! += bytes > 64 * 1024 ? 512 : bytes;
      return push(`child/${options.args[0].input.id}`, false, 0, false);
    },
  };
});

// Temporal's core moves the workflow's clock to each local activity's completion time as it resolves it
// (local_activity_state_machine.rs), so a replay that resolves several at once is at the latest.
const clock = { now: 0, on: false };
const realNow = Date.now.bind(Date);
vi.spyOn(Date, 'now').mockImplementation(() => (clock.on ? clock.now : realNow()));
const { createSvc } = await import('./svc.js');
type Svc = ReturnType<typeof createSvc>;

async function settle(): Promise<void> {
  for (;;) {
    await new Promise((resolve) => setImmediate(resolve));
    const ready = sim.conditions.filter((c) => c.fn());
    if (ready.length === 0) return;
    sim.conditions = sim.conditions.filter((c) => !ready.includes(c));
    for (const c of ready) c.resolve();
  }
}

const boundary = (label: string) => label === 'cut' || label.startsWith('timer/') || label.startsWith('child/');

function nextDelivery(mode: 'live' | 'replay'): Step[] {
  const locals = sim.steps.filter((s) => s.local);
  const pool = locals.length > 0 ? locals : sim.steps;
  if (mode === 'replay') {
    const delivered: Step[] = [];
    for (const label of sim.replayed) {
      const step = sim.steps.find((s) => s.label === label && !delivered.includes(s));
      if (!step || (boundary(label) && delivered.length > 0)) break;
      delivered.push(step);
      if (boundary(label)) break;
    }
    sim.replayed.splice(0, delivered.length);
    return delivered;
  }
  const first = pool.reduce((a, b) => (b.due < a.due ? b : a));
  return [first];
}

interface Outcome {
  commands: string[];
  tasks: number[];
  hung: boolean;
  maxLocalInFlight: number;
  error?: Error;
}

async function drive(
  mode: 'live' | 'replay',
  cutAtGates: boolean,
  script: (svc: Svc) => Promise<unknown>,
  options: Record<string, unknown> = {},
  extra: Record<string, unknown> = {},
): Promise<Outcome> {
  sim.now = 0;
  sim.timerSeq = 0;
  sim.maxLocalInFlight = 0;
  info.historyLength = 10;
  clock.now = 0;
  replaying = mode === 'replay';
  occurrences.clear();
  if (mode === 'live') {
    sim.recorded = [];
    recordedDue.clear();
  } else sim.replayed = [...sim.recorded];
  sim.steps = [];
  sim.commands = [];
  sim.conditions = [];
  sim.tasks = [0];
  const tasks = sim.tasks;
  const svc = createSvc({
    kind: 'action',
    scope: { environmentId: 'e', integrationId: 'i', connectionId: 'c' },
    scriptName: 'fan',
    runId: 'r',
    models: [],
    options,
    lastSyncDate: undefined,
    webhook: undefined,
    fresh: true,
    ledgerCut: true,
    taskCutByBody: true,
    cutAtGates,
    ...extra,
  } as never);
  let done = false;
  let failed: Error | undefined;
  void script(svc).then(
    () => (done = true),
    (error: unknown) => ((failed = error instanceof Error ? error : new Error(String(error))), (done = true)),
  );
  let hung = false;
  for (let activations = 0; ; activations++) {
    await settle();
    if (done) break;
    if (activations > 20_000 || sim.steps.length === 0) {
      hung = true;
      break;
    }
    const delivered = nextDelivery(mode);
    if (delivered.length === 0) break;
    sim.steps = sim.steps.filter((s) => !delivered.includes(s));
    clock.now = Math.max(clock.now, ...delivered.map((d) => d.due));
    for (const step of delivered) {
      if (mode === 'live') sim.recorded.push(step.label);
      sim.now = Math.max(sim.now, step.due);
      if (boundary(step.label)) {
        tasks.push(0);
        info.historyLength += 6; // a new workflow task
      } else tasks[tasks.length - 1]! += step.bytes > 64 * 1024 ? 512 : step.bytes;
      if (step.fail)
        step.reject(
          ApplicationFailure.create({ type: 'http_error', message: `failed ${step.label}`, nonRetryable: true }),
        );
      else step.resolve(step.local ? { body: 'x'.repeat(step.bytes) } : 1);
    }
  }
  return {
    commands: sim.commands,
    tasks,
    hung,
    maxLocalInFlight: sim.maxLocalInFlight,
    ...(failed ? { error: failed } : {}),
  };
}

const PAGE = 40_000;
const LARGE = 1024 * 1024;
const MiB = 1024 * 1024;
const get = (svc: Svc, path: string, bytes = PAGE, fail = false) =>
  svc.step('httpRequest', `GET ${path}`, [{ path, bytes, fail }] as never);
// Through the script's operation table, as the realm's bridge calls it (JSON in, an async IIFE).
const op = (svc: Svc, name: string, ...args: unknown[]) =>
  (async () => svc.scriptOperations[name]!(...(JSON.parse(JSON.stringify(args)) as unknown[])))();
const sget = (svc: Svc, endpoint: string, bytes = PAGE) =>
  op(svc, 'get', { endpoint, params: { bytes: String(bytes) } });
// What Temporal checks on replay: the activity sequence (local activities and the cut share the seq
// counter, activity id = seq) and the order of server commands (timers, the cut's ScheduleActivityTask).
const seqView = (c: string[]) => c.filter((x) => !x.startsWith('timer/'));
const serverView = (c: string[]) => c.filter((x) => x === 'cut' || x.startsWith('timer/'));
const cuts = (o: Outcome) => o.commands.filter((c) => c === 'cut').length;
const firstDiff = (a: string[], b: string[]) => {
  const i = a.findIndex((x, n) => x !== b[n]);
  return i < 0
    ? 'same'
    : `at ${i}: live ${a.slice(Math.max(0, i - 2), i + 3).join(',')} | replay ${b.slice(Math.max(0, i - 2), i + 3).join(',')}`;
};

const fanOut = async (svc: Svc) =>
  Promise.all(
    Array.from({ length: 30 }, async (_, id) => {
      await get(svc, `a/${id}`);
      await Promise.all([get(svc, `b/${id}`), get(svc, `c/${id}`)]);
    }),
  );
const wide = async (svc: Svc) => Promise.all(Array.from({ length: 150 }, (_, n) => get(svc, `p/${n}`)));
const wideLarge = async (svc: Svc) => Promise.all(Array.from({ length: 30 }, (_, n) => get(svc, `p/${n}`, LARGE)));
const sequential = (count: number, bytes: number) => async (svc: Svc) => {
  for (let n = 0; n < count; n++) await get(svc, `p/${n}`, bytes);
};

/** Uneven latencies (results end in another order than they were asked), one spread per seed. */
const spread =
  (seed: number) =>
  (label: string): number => {
    let h = seed * 7919;
    for (const c of label) h = (h * 31 + c.charCodeAt(0)) % 100_003;
    return h % 350;
  };

/** Live, then replay: the same activity sequence and server commands, no task past 3 MiB. */
async function expectSameBothWays(
  script: (svc: Svc) => Promise<unknown>,
  what: string,
  options: Record<string, unknown> = {},
  extra: () => Record<string, unknown> = () => ({}),
): Promise<Outcome> {
  const live = await drive('live', true, script, options, extra());
  const replay = await drive('replay', true, script, options, extra());
  expect(live.hung, `${what}: live hung`).toBe(false);
  expect(seqView(replay.commands), `${what}: ${firstDiff(seqView(live.commands), seqView(replay.commands))}`).toEqual(
    seqView(live.commands),
  );
  expect(serverView(replay.commands), `${what}: timers and cuts`).toEqual(serverView(live.commands));
  expect(replay.error?.message, `${what}: outcome`).toBe(live.error?.message);
  expect(Math.max(...live.tasks), `${what}: largest task`).toBeLessThan(3 * MiB);
  return live;
}

/** The execution chain of a sync run that checkpoints, as workflows/runChain.ts keeps it, reduced. */
const makeChain = () => ({
  continuing: false,
  legacy: false,
  savedHere: true,
  context: { canContinue: true, executions: [] },
  afterSave(near: boolean) {
    if (!near) return undefined;
    this.continuing = true;
    return ApplicationFailure.create({ type: 'run_continues', nonRetryable: true, message: 'continues' });
  },
  saved() {},
  read() {},
  atLimit() {
    return ApplicationFailure.create({ type: 'run_history_limit', nonRetryable: true, message: 'limit' });
  },
});

describe('cuts at gates', () => {
  it.each([
    ['a two-stage fan-out', fanOut],
    ['150 requests at once', wide],
    ['30 answers of 1 MiB at once (the step ledger)', wideLarge],
  ])('%s issues the same commands live and on replay, no task past 3 MiB', async (name, script) => {
    for (let seed = 0; seed < 6; seed++) {
      sim.latency = spread(seed);
      const live = await expectSameBothWays(script, `${name}, seed ${seed}`);
      expect(cuts(live), `seed ${seed}`).toBeGreaterThan(0);
    }
  });

  it('without the gates the same fan-out cuts elsewhere on replay (the defect they mend)', async () => {
    sim.latency = spread(0);
    const live = await drive('live', false, fanOut);
    const replay = await drive('replay', false, fanOut);
    expect(seqView(replay.commands)).not.toEqual(seqView(live.commands));
  });

  it('a timer another branch starts stays on its side of the cut (review R1)', async () => {
    // 8 answers of 1 MiB (2 MiB each in the ledger); branch 0 asks a 9th step early, which waits for
    // the first four, then cuts; branch 7 ends last, logs and sleeps.
    for (let logs = 0; logs < 4; logs++) {
      const script = async (svc: Svc) =>
        Promise.all([
          (async () => {
            await sget(svc, 'p/0', LARGE);
            await sget(svc, 'late/0');
          })(),
          ...[1, 2, 3, 4, 5, 6].map((k) => sget(svc, `p/${k}`, LARGE)),
          (async () => {
            await sget(svc, 'p/7', LARGE);
            for (let i = 0; i < logs; i++) await op(svc, 'log', `got p/7 ${i}`);
            await op(svc, 'sleep', 1000);
          })(),
        ]);
      sim.latency = (label) =>
        label === 'p/0' ? 10 : label === 'p/7' ? 100 : label.startsWith('p/') ? 20 + Number(label.slice(2)) : 10;
      const live = await expectSameBothWays(script, `${logs} logs`);
      expect(cuts(live)).toBeGreaterThan(0);
    }
  });

  it('branches with different code between their steps schedule them in the same order (review R2, R7)', async () => {
    const asymmetric = async (svc: Svc) =>
      Promise.all([
        (async () => {
          await sget(svc, 'a/0');
          await op(svc, 'log', 'a0 done');
          await sget(svc, 'a/1');
        })(),
        (async () => {
          await sget(svc, 'b/0');
          await sget(svc, 'b/1');
        })(),
      ]);
    sim.latency = (label) => (label === 'a/0' ? 10 : label === 'b/0' ? 20 : 10);
    await expectSameBothWays(asymmetric, 'a log between two steps');
    // Before the turns (and in runs without the gates) the replay scheduled b/1 before a/1.
    const live = await drive('live', false, asymmetric);
    expect((await drive('replay', false, asymmetric)).commands).not.toEqual(live.commands);

    const caught = async (svc: Svc) =>
      Promise.all(
        Array.from({ length: 30 }, async (_, id) => {
          try {
            await op(svc, 'get', {
              endpoint: `a/${id}`,
              params: { bytes: String(PAGE), ...(id % 4 === 0 ? { fail: 'true' } : {}) },
            });
          } catch {
            await op(svc, 'log', `a/${id} failed`);
          }
          await Promise.all([sget(svc, `b/${id}`, id % 3 === 0 ? 60_000 : PAGE), sget(svc, `c/${id}`)]);
        }),
      );
    for (let seed = 0; seed < 6; seed++) {
      sim.latency = spread(seed);
      await expectSameBothWays(caught, `a failed page logged in its catch, seed ${seed}`);
    }
  });

  it('the operation limit at a saveCheckpoint decides the same way while a gate waits (review R8)', async () => {
    for (let logs = 0; logs < 4; logs++) {
      const script = async (svc: Svc) =>
        Promise.all([
          (async () => {
            await sget(svc, 'p/0');
            await sget(svc, 'late/0');
          })(),
          ...[1, 2, 4, 5, 6, 7].map((k) => sget(svc, `p/${k}`)),
          (async () => {
            await sget(svc, 'p/3');
            for (let i = 0; i < logs; i++) await op(svc, 'log', `page 3 ${i}`);
            await op(svc, 'saveCheckpoint', { cursor: 3 });
            await sget(svc, 'after-save');
          })(),
        ]);
      sim.latency = (label) =>
        label === 'p/0' ? 10 : label === 'p/3' ? 40 : label.startsWith('p/') ? 20 + Number(label.slice(2)) : 60;
      await expectSameBothWays(script, `${logs} logs`, { executionOperationLimit: 9 }, () => ({
        kind: 'sync',
        models: ['m'],
        chain: makeChain(),
      }));
    }
  });

  it('the execution time limit at a saveCheckpoint decides the same way (second review)', async () => {
    const script = async (svc: Svc) =>
      Promise.all([
        (async () => {
          await sget(svc, 'p/0');
          await op(svc, 'saveCheckpoint', { cursor: 0 });
          await sget(svc, 'after');
        })(),
        sget(svc, 'p/1'),
      ]);
    clock.on = true;
    try {
      for (const [p0, p1] of [
        [10, 12],
        [12, 10],
        [10, 30],
      ] as const) {
        sim.latency = (label) => (label === 'p/0' ? p0 : label === 'p/1' ? p1 : 5);
        await expectSameBothWays(script, `p/0 at ${p0}, p/1 at ${p1}`, { executionTimeLimitMs: 11 }, () => ({
          kind: 'sync',
          models: ['m'],
          chain: makeChain(),
        }));
      }
      // A sequential script still continues at its first save past the limit.
      sim.latency = () => 10;
      const sequentialSaves = async (svc: Svc) => {
        for (let n = 0; n < 3; n++) {
          await sget(svc, `p/${n}`);
          await op(svc, 'saveCheckpoint', { cursor: n });
        }
      };
      const live = await expectSameBothWays(sequentialSaves, 'sequential', { executionTimeLimitMs: 15 }, () => ({
        kind: 'sync',
        models: ['m'],
        chain: makeChain(),
      }));
      expect(live.error?.message).toBe('continues');
    } finally {
      clock.on = false;
    }
  });

  it('a step whose input cannot be written fails alone; the run goes on (review R4)', async () => {
    const script = async (svc: Svc) => {
      await Promise.all(Array.from({ length: 4 }, (_, n) => get(svc, `p/${n}`)));
      // An argument JSON.stringify refuses (in the service: JSON nested deeper than the stack allows).
      await expect(svc.step('httpRequest', 'GET bad', [{ path: 'bad', bytes: 1, big: 1n }] as never)).rejects.toThrow();
      await Promise.all(Array.from({ length: 40 }, (_, n) => get(svc, `q/${n}`)));
    };
    sim.latency = () => 10;
    const live = await expectSameBothWays(script, 'an unwritable input');
    expect(live.commands.filter((c) => c.startsWith('q/'))).toHaveLength(40);
  });

  it('a mixed script: failures caught, a Promise.all rejecting early, log flushes, sleeps (review R5)', async () => {
    const script = async (svc: Svc) => {
      await Promise.all(
        Array.from({ length: 40 }, async (_, id) => {
          for (let k = 0; k < 3; k++) {
            try {
              await get(svc, `a/${id}/${k}`, id % 5 === 0 ? LARGE : PAGE, (id + k) % 7 === 0);
            } catch {
              svc.bufferLog('warn', `failed ${id}`);
            }
            for (let l = 0; l < 30; l++) svc.bufferLog('info', `line ${id} ${k} ${l}`);
            if ((id + k) % 9 === 0) await op(svc, 'sleep', 50);
          }
        }),
      );
      await Promise.all(Array.from({ length: 20 }, (_, n) => get(svc, `z/${n}`, PAGE, n === 3))).catch(() => undefined);
      await get(svc, 'after');
    };
    for (let seed = 0; seed < 10; seed++) {
      sim.latency = spread(seed);
      await expectSameBothWays(script, `seed ${seed}`);
    }
  });

  it.each([
    ['pages of 40 KB (the task cut)', 150, PAGE],
    ['answers of 1 MiB (the ledger cut)', 30, LARGE],
  ])('a sequential script of %s is cut where it was before the gates', async (_name, count, bytes) => {
    const script = sequential(count, bytes);
    sim.latency = () => 10;
    const gated = await expectSameBothWays(script, 'sequential');
    const before = await drive('live', false, script);
    expect(cuts(gated)).toBeGreaterThan(0);
    if (bytes === PAGE) expect(gated.commands).toEqual(before.commands);
    // The ledger's first task: a step is expected to keep 1 MiB until the run weighed some (8 answers of
    // 2 MiB in the ledger, where the cut before the gates came after 4); then every 4, as before.
    else expect(cuts(before) - cuts(gated)).toBeLessThanOrEqual(1);
  });

  // Version 8 (SvcContext.gatedChildrenAndClock).
  const WHOLE = () => ({ gatedChildrenAndClock: true });

  it('150 child actions asked at once: their starts are weighed, no task past 3 MiB', async () => {
    const children = async (svc: Svc) =>
      Promise.all(
        Array.from({ length: 150 }, (_, n) =>
          op(svc, 'triggerAction', 'act', { id: String(n), pad: 'x'.repeat(60_000) }),
        ),
      );
    for (let seed = 0; seed < 3; seed++) {
      sim.latency = spread(seed);
      const live = await expectSameBothWays(children, `seed ${seed}`, {}, WHOLE);
      expect(live.error).toBeUndefined();
      expect(live.commands.filter((c) => c.startsWith('child/'))).toHaveLength(150);
      expect(cuts(live), `seed ${seed}`).toBeGreaterThan(0);
      // Without it (version 7) the starts went uncounted: one completion of ~9 MB, which gRPC refuses.
      const before = await drive('live', true, children);
      expect(Math.max(...before.tasks), `seed ${seed}, version 7`).toBeGreaterThan(4 * MiB);
    }
  });

  it('a sequential script that sleeps is cut no more often than before the gates', async () => {
    // 150 pages of 40 KB, a second's sleep after every 10: version 7 weighed on across the timers' tasks
    // and cut 5 times where the older rules (weights again at each task) cut once.
    const sleepy = async (svc: Svc) => {
      for (let n = 0; n < 150; n++) {
        await get(svc, `p/${n}`);
        if (n % 10 === 9) await op(svc, 'sleep', 1000);
      }
    };
    sim.latency = () => 10;
    const whole = await expectSameBothWays(sleepy, 'version 8', {}, WHOLE);
    const gates = await expectSameBothWays(sleepy, 'version 7');
    const before = await drive('live', false, sleepy);
    console.log(
      `[svcGates] sleepy cuts: v8 ${cuts(whole)}, v7 ${cuts(gates)}, before ${cuts(before)}; largest task v8 ${Math.max(...whole.tasks)}`,
    );
    expect(cuts(whole)).toBeLessThanOrEqual(cuts(before));
    expect(cuts(gates)).toBeGreaterThan(cuts(before));
    expect(Math.max(...whole.tasks)).toBeLessThan(1.5 * MiB);
    // A sleep beside a step in flight weighs on: the same both ways.
    const beside = async (svc: Svc) => {
      for (let n = 0; n < 60; n++) {
        await Promise.all([get(svc, `p/${n}`), n % 5 === 4 ? op(svc, 'sleep', 5) : Promise.resolve()]);
      }
    };
    await expectSameBothWays(beside, 'a sleep beside a step', {}, WHOLE);
  });

  it("the script's clock stands still while steps are in flight, the same live and on replay", async () => {
    // Each branch asks for one more page when its answer came late: a script branching on the clock.
    const clocked = async (svc: Svc) => {
      const started = svc.now();
      const seen: number[] = [];
      await Promise.all(
        Array.from({ length: 12 }, async (_, id) => {
          await sget(svc, `a/${id}`);
          seen.push(svc.now() - started);
          if (svc.now() - started > 100) await sget(svc, `late/${id}`);
        }),
      );
      // With no step in flight the clock is the latest result's, the same both ways.
      const after = svc.now() - started;
      await sget(svc, after > 100 ? 'after/late' : 'after/early');
      return { seen, after };
    };
    clock.on = true;
    try {
      for (let seed = 0; seed < 4; seed++) {
        sim.latency = spread(seed);
        const live = await expectSameBothWays(clocked, `seed ${seed}`, {}, WHOLE);
        // Only the branch whose answer came last reads the clock with no step in flight.
        expect(live.commands.filter((c) => c.startsWith('late/')).length, `seed ${seed}`).toBeLessThanOrEqual(1);
        expect(live.commands, `seed ${seed}`).toContain('after/late');
      }
      // A review's case: each branch reads the clock after its answer and again after asking a step that
      // may wait at a gate, and branches on both; 40 branches, cuts among them.
      const twice = async (svc: Svc) => {
        const t0 = svc.now();
        await Promise.all(
          Array.from({ length: 40 }, async (_, id) => {
            await sget(svc, `a/${id}`);
            if ((svc.now() - t0) % 2 === 1) await sget(svc, `odd/${id}`);
            const asked = sget(svc, `b/${id}`);
            const e = svc.now() - t0;
            await asked;
            if (e % 3 === 1) await sget(svc, `tri/${id}`);
          }),
        );
      };
      for (let seed = 0; seed < 6; seed++) {
        sim.latency = spread(seed);
        await expectSameBothWays(twice, `read twice, seed ${seed}`, {}, WHOLE);
      }
      // Version 7 read the core's clock: the replay, at the latest result from the first turn on, asked
      // for late pages the live run had not.
      sim.latency = (label) => (label.startsWith('a/') ? 10 + 20 * Number(label.slice(2)) : 10);
      await expectSameBothWays(clocked, 'answers 20 ms apart', {}, WHOLE);
      const live = await drive('live', true, clocked);
      const replay = await drive('replay', true, clocked);
      expect(live.commands.filter((c) => c.startsWith('late/')).length).toBeLessThan(12);
      expect(seqView(replay.commands)).not.toEqual(seqView(live.commands));
    } finally {
      clock.on = false;
    }
  });
});
