/**
 * The cuts at gates (SvcContext.cutAtGates) are decided on what the history fixes. A live run gets its
 * steps' results one by one, as they end; a replay gets every result of the steps scheduled in one
 * activation in the next one (Temporal's core applies a task's recorded markers at once). The same
 * script must issue the same commands, the cuts (`forgetSteps`) at the same places, both ways: before
 * the gates, a fan-out whose results passed the cut issued its cut at another step on replay
 * (TMPRL1100 on the real server: test/runtime/compressedPages.test.ts). Here the workflow module is
 * stubbed: every step waits until the test delivers its result, live (latencies that differ per step,
 * one result per activation) or as a replay (all at once), and the commands are compared.
 */
import { RawValue } from '@temporalio/common';
import { describe, expect, it, vi } from 'vitest';
import type * as Workflow from '@temporalio/workflow';

const info = { historyLength: 10, historySize: 1000, unsafe: { isReplaying: false }, taskQueue: 'q', workflowId: 'w' };

interface Step {
  label: string;
  local: boolean;
  bytes: number;
  due: number;
  resolve: (value: unknown) => void;
}
const sim = {
  now: 0,
  steps: [] as Step[],
  commands: [] as string[],
  conditions: [] as { fn: () => boolean; resolve: () => void }[],
  latency: (_label: string) => 0,
  /** The order in which the last live run got its results (its markers' order in the history). */
  recorded: [] as string[],
  /** What a replay has not delivered yet of `recorded`. */
  replayed: [] as string[],
};

function stubProxy(local: boolean): unknown {
  return new Proxy(
    {},
    {
      get: (_target, name) => {
        const execute = (sent: unknown[]) =>
          new Promise((resolve) => {
            const args = sent.map((arg) =>
              arg instanceof RawValue ? (JSON.parse(new TextDecoder().decode(arg.payload.data)) as unknown) : arg,
            );
            const request = args[0] as { path?: string; bytes?: number } | undefined;
            const label = String(name) === 'forgetSteps' ? 'cut' : (request?.path ?? String(name));
            sim.commands.push(label);
            sim.steps.push({ label, local, bytes: request?.bytes ?? 0, due: sim.now + sim.latency(label), resolve });
          });
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
    condition: (fn: () => boolean) => new Promise<void>((resolve) => sim.conditions.push({ fn, resolve })),
  };
});

const { createSvc } = await import('./svc.js');
type Svc = ReturnType<typeof createSvc>;

/** Lets the script run until it waits: microtasks, then the conditions the SDK checks after an activation. */
async function settle(): Promise<void> {
  for (;;) {
    await new Promise((resolve) => setImmediate(resolve));
    const ready = sim.conditions.filter((c) => c.fn());
    if (ready.length === 0) return;
    sim.conditions = sim.conditions.filter((c) => !ready.includes(c));
    for (const c of ready) c.resolve();
  }
}

/** The steps one activation delivers: live the one due first; as a replay every pending local step. */
function nextDelivery(mode: 'live' | 'replay'): Step[] {
  const locals = sim.steps.filter((s) => s.local);
  // An ordinary activity (the cut) runs once the task that scheduled it completed: after its local steps.
  const pool = locals.length > 0 ? locals : sim.steps;
  // A replay applies the recorded markers in their order, as far as the workflow has scheduled their
  // steps (Temporal's core, workflow_machines.rs apply_local_activity_peeked_resolutions); the cut's
  // completion comes in a task of its own.
  if (mode === 'replay') {
    const delivered: Step[] = [];
    for (const label of sim.replayed) {
      const step = sim.steps.find((s) => s.label === label);
      if (!step || (label === 'cut' && delivered.length > 0)) break;
      delivered.push(step);
      if (label === 'cut') break;
    }
    sim.replayed.splice(0, delivered.length);
    return delivered;
  }
  const first = pool.reduce((a, b) => (b.due < a.due ? b : a));
  return [first];
}

interface Outcome {
  commands: string[];
  /** Bytes of the results each task recorded (a task ends where a cut is delivered). */
  tasks: number[];
}

async function drive(
  mode: 'live' | 'replay',
  cutAtGates: boolean,
  script: (svc: Svc) => Promise<unknown>,
): Promise<Outcome> {
  sim.now = 0;
  if (mode === 'live') sim.recorded = [];
  else sim.replayed = [...sim.recorded];
  sim.steps = [];
  sim.commands = [];
  sim.conditions = [];
  const svc = createSvc({
    kind: 'action',
    scope: { environmentId: 'e', integrationId: 'i', connectionId: 'c' },
    scriptName: 'fan',
    runId: 'r',
    models: [],
    options: {},
    lastSyncDate: undefined,
    webhook: undefined,
    fresh: true,
    ledgerCut: true,
    taskCutByBody: true,
    cutAtGates,
  });
  let done = false;
  let failed: Error | undefined;
  void script(svc).then(
    () => (done = true),
    (error: unknown) => ((failed = error instanceof Error ? error : new Error('the script threw')), (done = true)),
  );
  const tasks = [0];
  for (let activations = 0; ; activations++) {
    await settle();
    if (done) break;
    expect(activations, 'activations').toBeLessThan(10_000);
    expect(sim.steps.length, 'a script waiting on nothing').toBeGreaterThan(0);
    const delivered = nextDelivery(mode);
    // A replay that expects a step the script did not schedule: Temporal fails its task (TMPRL1100).
    if (delivered.length === 0) break;
    sim.steps = sim.steps.filter((s) => !delivered.includes(s));
    for (const step of delivered) {
      if (mode === 'live') sim.recorded.push(step.label);
      sim.now = Math.max(sim.now, step.due);
      if (step.label === 'cut') tasks.push(0);
      // Past the claim check's threshold a marker holds a reference of a few hundred bytes.
      else tasks[tasks.length - 1]! += step.bytes > 64 * 1024 ? 512 : step.bytes;
      step.resolve(step.local ? { body: 'x'.repeat(step.bytes) } : 1);
    }
  }
  if (failed) throw failed;
  return { commands: sim.commands, tasks };
}

const PAGE = 40_000;
// Past the claim check's threshold: a reference in the marker, the whole answer in the step ledger.
const LARGE = 1024 * 1024;
const get = (svc: Svc, path: string, bytes = PAGE) =>
  svc.step('httpRequest', `GET ${path}`, [{ path, bytes }] as never);

/** 30 ids at once, each one page, then two more at once (the review's two-stage fan-out). */
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
const unevenLatency =
  (seed: number) =>
  (label: string): number => {
    const [stage, id] = label.split('/');
    const n = Number(id) + seed * 7;
    if (stage === 'a') return (n * (37 + seed)) % 200;
    if (stage === 'b' || stage === 'c') return 50 + ((n * 53 + (stage === 'b' ? 0 : 90 + seed * 11)) % 300);
    return (n * (71 + seed * 3)) % 250;
  };

const MiB = 1024 * 1024;
const cuts = (o: Outcome) => o.commands.filter((c) => c === 'cut').length;

describe('cuts at gates', () => {
  it.each([
    ['a two-stage fan-out', fanOut],
    ['150 requests at once', wide],
    ['30 answers of 1 MiB at once (the step ledger)', wideLarge],
  ])('%s issues the same commands live and on replay, no task past 3 MiB', async (_name, script) => {
    for (let seed = 0; seed < 6; seed++) {
      sim.latency = unevenLatency(seed);
      const live = await drive('live', true, script);
      const replay = await drive('replay', true, script);
      expect(cuts(live), `seed ${seed}`).toBeGreaterThan(0);
      expect(replay.commands, `seed ${seed}`).toEqual(live.commands);
      expect(Math.max(...live.tasks), `seed ${seed}`).toBeLessThan(3 * MiB);
    }
  });

  it('without the gates the same fan-out cuts elsewhere on replay (the defect this guards)', async () => {
    sim.latency = unevenLatency(0);
    const live = await drive('live', false, fanOut);
    const replay = await drive('replay', false, fanOut);
    expect(replay.commands).not.toEqual(live.commands);
  });

  it.each([
    ['pages of 40 KB (the task cut)', 150, PAGE],
    ['answers of 1 MiB (the ledger cut)', 30, LARGE],
  ])('a sequential script of %s is cut where it was before the gates', async (_name, count, bytes) => {
    const script = sequential(count, bytes);
    sim.latency = () => 10;
    const gated = await drive('live', true, script);
    expect((await drive('replay', true, script)).commands).toEqual(gated.commands);
    const before = await drive('live', false, script);
    expect(cuts(gated)).toBeGreaterThan(0);
    if (bytes === PAGE) expect(gated.commands).toEqual(before.commands);
    // The ledger's first task: a step is expected to keep 1 MiB until the run weighed some (8 answers of
    // 2 MiB in the ledger, where the cut before the gates came after 4); then every 4, as before.
    else expect(cuts(before) - cuts(gated)).toBeLessThanOrEqual(1);
  });
});
