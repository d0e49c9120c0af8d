/**
 * Workflow threads shared fairly between environments (issue 29, finding 3; docs/architecture.md
 * "Fairness between environments"). A worker's workflow threads ("lanes") run one activation at a
 * time each; this module decides which workflow lives on which lane and which activation a free lane
 * runs next, so that one environment's runaway scripts cannot take the threads every other environment
 * needs:
 *
 * - **One activation at a time per lane.** The SDK would post every activation to the thread at once,
 *   where each waits behind whatever was posted before it; here an activation waits for its lane in
 *   the worker, where the order is chosen. (Creating a workflow, fetching its sink calls and disposing
 *   of it are short messages, posted at once; none of them is awaited while the thread runs another
 *   workflow's activation, so a workflow moved off a held lane never waits for it.)
 * - **Fair order.** A free lane runs, among the environments waiting for it, the one that used the
 *   least workflow-thread time lately (decaying over `decayMs`), first come first served within one.
 * - **A share, not all.** While another environment is active (had a unit in the last `activeMs`), one
 *   environment runs on at most `sharedLanes - 1` of the shared lanes at once: a lane is always free of
 *   it for the others. Alone, an environment uses every shared lane.
 * - **Hot environments go to the penalty lane.** An environment one of whose runs' activations ran for
 *   `heavyActivationMs` or longer (a script computing past loop protection's 1 s), or one of whose
 *   activations was interrupted by the isolate timeout, is hot for `hotForMs`: its new workflows are created on the penalty lane, a
 *   thread of its own that no calm environment's workflow lives on, and an activation of one of its
 *   workflows still on a shared lane is refused (`LaneMoveError`), which makes the worker evict it: its
 *   task is retried and replays on the penalty lane.
 * - **No work for a dead task.** An activation still waiting for its lane past its workflow task's
 *   timeout (counted from when the task's first activation reached the lanes) is not run
 *   (`LaneExpiredError`): the server gave the task up. A backlog longer than the timeout then still
 *   completes tasks, instead of completing every one too late. A run's activation (runSync, runAction,
 *   an entity's run under way) is run however late: a runaway is convicted only when its statement is
 *   interrupted on a lane, so expiring runs kept 14 queued runaways alive up to 99 s
 *   (test/runtime/environmentFairness.test.ts at load 14; ≤ 33 s when run late, the 4 s each they cost).
 * - **A runaway ends at its first interrupted statement.** An activation of a run (runSync, runAction,
 *   or a sync entity whose run is under way, unless the activation replayed history) interrupted by
 *   the isolate timeout had its lane to itself for the whole timeout: the run's script
 *   computed that long without awaiting a svc operation, past the 1 s of loop protection. `onRunaway`
 *   is told at once (the worker terminates the run with `script_timeout`); it no longer depends on the
 *   failure reaching the run's history before its workflow task times out.
 *
 * Pure scheduling over the SDK's workflow creator and workflow interfaces (src/sandbox/workerSide.ts
 * builds the lanes), so it is tested without a server (lanes.test.ts).
 */
import { ISOLATE_TIMEOUT_MS } from '../runtime/definitions.js';
import { watchProcessStalls } from './processStalls.js';
import { environmentOfRoot } from './runAuthority.js';

/** The part of the SDK's `Workflow` a lane drives. */
export interface LaneWorkflow<A = unknown, C = unknown, S = unknown> {
  activate(activation: A): Promise<C>;
  getAndResetSinkCalls(): Promise<S>;
  dispose(): Promise<void>;
}

/** What the SDK tells a creator about a new workflow (the fields a lane reads). */
export interface LaneWorkflowInfo {
  workflowId: string;
  runId: string;
  workflowType: string;
  root?: { workflowId: string } | undefined;
  /** The execution's workflow task timeout: an activation still waiting past it is not run. */
  taskTimeoutMs?: number | undefined;
}

/** The part of the SDK's `WorkflowCreator` a lane drives: one per workflow thread. */
export interface LaneCreator<O extends { info: LaneWorkflowInfo }, W> {
  createWorkflow(options: O): Promise<W>;
  destroy(): Promise<void>;
}

export interface RunawayNotice {
  workflowId: string;
  runId: string;
  workflowType: string;
  environmentId: string;
  /** How long the interrupted activation ran, by the worker's clock. */
  ranMs: number;
}

export interface LaneOptions {
  /** Lanes every calm environment may use; the lane after them is the penalty lane. */
  sharedLanes: number;
  /** An activation this long makes its environment hot. @default 1000 (loop protection's budget) */
  heavyActivationMs?: number;
  /** How long an environment stays hot after its last heavy activation. @default 5 minutes */
  hotForMs?: number;
  /** How long an environment counts as active after its last unit. @default 30 s */
  activeMs?: number;
  /** The half-life, roughly, of the thread time that orders environments. @default 10 s */
  decayMs?: number;
  /** Is this failure of an activation the isolate timeout (src/sandbox/workerSide.ts)? */
  isIsolateTimeout(error: unknown): boolean;
  /** Is this completion the failure the isolate timeout caused (how the SDK answers an interrupted activation)? */
  interrupted(completion: unknown): boolean;
  /** A run's statement was interrupted: stop the run (the worker terminates it with its verdict). */
  onRunaway(notice: RunawayNotice): void;
  /**
   * Is a sync run under way inside this sync entity's execution (issue 31; src/temporal/runWatch.ts)?
   * Its long activations then heat its environment, as a run workflow's do; a waiting entity's (a long
   * replay, a batch of signals) do not.
   */
  runsInEntity?: (workflowId: string, runId: string) => boolean;
  /**
   * Does this activation start a workflow task (a signal, a timer, a child's or an activity's result,
   * the first task), rather than continue one (only local activities' results)?
   */
  startsTask(activation: unknown): boolean;
  /** Does the workflow task go on after this completion (it scheduled local activities)? */
  continuesTask(completion: unknown): boolean;
  /** Does this activation replay events of the history (rather than run new work)? */
  replaying?: (activation: unknown) => boolean;
  /**
   * The completion to answer instead of an interrupted one that replayed history and convicted nobody:
   * its failure must not read as an isolate timeout, since the run watch takes an isolate timeout
   * recorded in the execution's history as evidence against its script (src/temporal/runaway.ts).
   */
  replayInterruption?: (completion: unknown, message: string) => unknown;
  /**
   * Where the lanes say what they decide: where a workflow lives at `debug`, a workflow moved off a
   * lane at `info`, an interrupted statement at `warn`.
   */
  log?: (line: string, level: 'debug' | 'info' | 'warn') => void;
  now?: () => number;
  /**
   * How long this process stood still (stopped, paused) between two `now()` times: an interrupted
   * activation that spent STALL_EXCUSE_MS of its time so is retried, not convicted (src/temporal/processStalls.ts).
   * @default the main thread's ticks when `now` is the real clock; never otherwise
   */
  stalledDuring?: (from: number, to: number) => number;
  /**
   * The CPU time lane `index`'s workflow thread used so far, in ms (undefined: not known). An
   * interrupted activation is excused for a stall only if its thread computed less than
   * STALL_EXCUSE_MS during it: a main thread kept busy (a huge JSON body parsed in an activity) looks
   * like a stall to the ticks while a runaway statement computes on its own thread all along.
   */
  threadCpuMs?: (index: number) => number | undefined;
  /**
   * How long lane `index`'s workflow thread waited for a CPU while runnable so far, in ms (undefined:
   * not known). The isolate timeout is wall time: on a machine busier than its cores, a healthy
   * statement on a thread that waited that long for a CPU is interrupted too. An interrupted activation
   * whose thread computed less than STALL_EXCUSE_MS and waited at least that long for a CPU convicts
   * nobody the first time for its run (its task is retried); one that computed, or neither computed
   * nor waited (blocked), is judged as before.
   */
  threadWaitMs?: (index: number) => number | undefined;
  /** The isolate timeout (src/sandbox/workerSide.ts). @default ISOLATE_TIMEOUT_MS */
  isolateTimeoutMs?: number;
}

/** An interrupted activation during which the process stood still this long convicts nobody. */
const STALL_EXCUSE_MS = 1000;

/** A workflow's creation on its lane's thread: under way, then done. */
interface Creation<W> {
  created: Promise<W>;
  workflow: W | undefined;
}

/** Thrown from an activation of a hot environment's workflow on a shared lane: the worker evicts it. */
export class LaneMoveError extends Error {
  override name = 'LaneMoveError';
}

/**
 * Thrown from an activation that waited for its lane past its workflow task's timeout: the server has
 * given the task up (its completion would be refused), so the lane does not spend its time on it, and
 * the worker evicts the workflow, which frees the task's retry (Core holds it until this activation
 * ends). Under a backlog longer than the timeout, running such activations anyway would make every
 * task of the lane complete too late (each replayed again by its retry): nothing would progress.
 */
export class LaneExpiredError extends Error {
  override name = 'LaneExpiredError';
}

/** Thrown from an activation of a run already stopped for an interrupted statement: it is not run again. */
export class LaneStoppedError extends Error {
  override name = 'LaneStoppedError';
}

/** An activation replaying history was interrupted: the task is retried; its script is not to blame. */
export class ReplayInterruptedError extends Error {
  override name = 'ReplayInterruptedError';
}

// A session of the penalty lane lasts at most the workflow task timeout of a run (4 s), and waits this
// long after an activation for the workflow's next one (a local activity's result).
const SESSION_MS = 4_000;
const SESSION_FOLLOW_UP_MS = 1_000;

// The run workflows, whose scripts an interrupted statement convicts.
const RUN_TYPES = new Set(['runSync', 'runAction']);
// The sync entity, which runs its sync's script in its own execution (issue 31).
const ENTITY_TYPE = 'manageSync';

interface Waiter {
  environmentId: string;
  /** The workflow run the activation belongs to. */
  runId: string;
  /** False for the results of its own local activities: its workflow task is under way. */
  startsTask: boolean;
  /** A run's (runSync, runAction): only a run's script can make its activations heavy. */
  run: boolean;
  /** When the lanes first saw its workflow run: the penalty lane serves the oldest first. */
  firstSeen: number;
  /** When its workflow task times out on the server (by this worker's clock, never earlier than the server's). */
  deadline: number;
  grant: (verdict: 'run' | 'move' | 'expired') => void;
}

/**
 * The penalty lane finishes what it started: the activations of one workflow task (a script's steps are
 * local activities, each resolved in an activation of its own) run one after another, so that the task
 * completes before its 4 s timeout. Interleaved with other workflows' interrupted statements (3 s each),
 * every task of a crowded penalty lane would time out and start over, and a runaway would never reach
 * the statement that convicts it.
 */
interface Session {
  runId: string;
  startedAt: number;
  /** When its last activation ended; undefined while one runs. */
  endedAt: number | undefined;
  /** Its last completion scheduled local activities: the task goes on. */
  continues: boolean;
}

interface Lane {
  index: number;
  penalty: boolean;
  session: Session | undefined;
  /** A dispatch is due when the session's wait for its next activation ends. */
  sessionTimer: ReturnType<typeof setTimeout> | undefined;
  /** The environment of the activation running on it, or undefined when free. */
  running: string | undefined;
  /** When that activation started. */
  runningSince: number;
  /** Fires when the running activation becomes heavy. */
  heavyTimer: ReturnType<typeof setTimeout> | undefined;
  waiting: Waiter[];
  /** Workflows whose creation waits for the lane's thread before their activation can ask for the lane. */
  creating: Set<{ environmentId: string; move: () => void }>;
  workflows: number;
}

interface EnvironmentState {
  hotUntil: number;
  lastActive: number;
  recentMs: number;
  recentAt: number;
  /** Units running on shared lanes. */
  onShared: number;
}

/** The environment a workflow belongs to: its root's (a nested action's root is the run that started it). */
export function environmentOfWorkflow(info: LaneWorkflowInfo): string {
  return environmentOfRoot(info.root?.workflowId ?? info.workflowId) ?? '';
}

export interface LaneStats {
  /** Per lane: the workflows living on it, and whether it runs something now. */
  lanes: { penalty: boolean; workflows: number; busy: boolean; waiting: number }[];
  hot: string[];
}

export function createLanes<O extends { info: LaneWorkflowInfo }, A, C, S extends unknown[]>(
  creators: readonly LaneCreator<O, LaneWorkflow<A, C, S>>[],
  options: LaneOptions,
): LaneCreator<O, LaneWorkflow<A, C, S>> & { stats(): LaneStats } {
  if (creators.length !== options.sharedLanes + 1) {
    throw new Error(
      `createLanes: ${options.sharedLanes} shared lanes and a penalty lane need ${options.sharedLanes + 1} creators`,
    );
  }
  const now = options.now ?? (() => performance.now());
  const stalls = options.stalledDuring || options.now ? undefined : watchProcessStalls();
  const stalledDuring =
    options.stalledDuring ?? (stalls ? (from: number, to: number) => stalls.stalledDuring(from, to) : () => 0);
  const isolateTimeoutMs = options.isolateTimeoutMs ?? ISOLATE_TIMEOUT_MS;
  const log = options.log ?? (() => undefined);
  const heavyMs = options.heavyActivationMs ?? 1000;
  const hotForMs = options.hotForMs ?? 5 * 60_000;
  const activeMs = options.activeMs ?? 30_000;
  const decayMs = options.decayMs ?? 10_000;
  const lanes: Lane[] = creators.map((_, index) => ({
    index,
    penalty: index === options.sharedLanes,
    session: undefined,
    sessionTimer: undefined,
    running: undefined,
    runningSince: 0,
    heavyTimer: undefined,
    waiting: [],
    creating: new Set(),
    workflows: 0,
  }));
  const penaltyLane = lanes[options.sharedLanes]!;
  // The sink calls of an activation that never reached its thread.
  const noSinkCalls = (): S => [] as unknown[] as S;
  const sharedLanes = lanes.filter((lane) => !lane.penalty);
  const environments = new Map<string, EnvironmentState>();

  function stateOf(environmentId: string): EnvironmentState {
    let state = environments.get(environmentId);
    if (!state) {
      state = { hotUntil: 0, lastActive: 0, recentMs: 0, recentAt: now(), onShared: 0 };
      environments.set(environmentId, state);
    }
    return state;
  }
  const isHot = (environmentId: string): boolean => stateOf(environmentId).hotUntil > now();

  function recent(state: EnvironmentState): number {
    const at = now();
    state.recentMs *= Math.exp(-(at - state.recentAt) / decayMs);
    state.recentAt = at;
    return state.recentMs;
  }

  /** How many shared lanes the environment may run on at once now. */
  function shareOf(environmentId: string): number {
    if (sharedLanes.length < 2) return sharedLanes.length;
    const at = now();
    for (const [other, state] of environments) {
      if (other !== environmentId && at - state.lastActive < activeMs) return sharedLanes.length - 1;
    }
    return sharedLanes.length;
  }

  // Environments neither hot nor active lately are forgotten, so the map stays as small as the traffic.
  let forgotAt = now();
  function forget(): void {
    const at = now();
    if (at - forgotAt < 60_000) return;
    forgotAt = at;
    for (const [runId, excusedAt] of starved) if (at - excusedAt > 10 * 60_000) starved.delete(runId);
    for (const [runId, first] of seen) {
      if (at - first <= 10 * 60_000) continue;
      seen.delete(runId);
      stopped.delete(runId);
      taskStarts.delete(runId);
    }
    for (const [id, state] of environments) {
      if (state.hotUntil <= at && at - state.lastActive > Math.max(activeMs, 10 * decayMs) && state.onShared === 0) {
        environments.delete(id);
      }
    }
  }

  function admissible(lane: Lane, environmentId: string): boolean {
    return lane.penalty || stateOf(environmentId).onShared < shareOf(environmentId);
  }

  /** Starts the next unit on every free lane that has an admissible one waiting. */
  function dispatch(): void {
    for (const lane of lanes) {
      if (lane.running !== undefined || lane.waiting.length === 0) continue;
      const at = now();
      lane.waiting = lane.waiting.filter((waiter) => {
        // A run's activation is run however late: a runaway among them is convicted only when it runs.
        if (waiter.run || waiter.deadline > at) return true;
        waiter.grant('expired');
        return false;
      });
      const next = lane.penalty ? sessionNext(lane) : fairest(lane);
      if (next === undefined) continue;
      const [waiter] = lane.waiting.splice(next, 1);
      start(lane, waiter!.environmentId, waiter!.run);
      if (lane.penalty) {
        if (lane.session?.runId === waiter!.runId) lane.session.endedAt = undefined;
        else lane.session = { runId: waiter!.runId, startedAt: now(), endedAt: undefined, continues: false };
      }
      waiter!.grant('run');
    }
  }

  /** The waiter of the environment that used the least thread time lately (admissible ones only). */
  function fairest(lane: Lane): number | undefined {
    let best: number | undefined;
    for (let index = 0; index < lane.waiting.length; index++) {
      const candidate = lane.waiting[index]!;
      if (!admissible(lane, candidate.environmentId)) continue;
      if (best === undefined) {
        best = index;
        continue;
      }
      const current = lane.waiting[best]!;
      const [mine, theirs] = [recent(stateOf(candidate.environmentId)), recent(stateOf(current.environmentId))];
      if (mine < theirs || (mine === theirs && candidate.firstSeen < current.firstSeen)) best = index;
    }
    return best;
  }

  // When each workflow run was first seen (its order on the penalty lane, kept across the retries of
  // its tasks, so that a run whose turn was missed is first at the next); forgotten after 10 minutes.
  const seen = new Map<string, number>();
  // When each workflow run's current workflow task began here (its first activation arrived).
  const taskStarts = new Map<string, number>();
  // Runs stopped for an interrupted statement: a task of theirs that was already on its way is not run.
  const stopped = new Set<string>();
  // Runs once excused for an interruption on a starved thread (threadWaitMs), and when.
  const starved = new Map<string, number>();
  function firstSeen(runId: string): number {
    let at = seen.get(runId);
    if (at === undefined) {
      at = now();
      seen.set(runId, at);
    }
    return at;
  }

  /**
   * The penalty lane: the session's workflow while its task goes on (waiting a little for its next
   * activation), else a continuation of a task in progress, else the fairest.
   */
  function sessionNext(lane: Lane): number | undefined {
    const session = lane.session;
    if (session && session.continues && now() - session.startedAt < SESSION_MS) {
      const own = lane.waiting.findIndex((waiter) => waiter.runId === session.runId);
      if (own >= 0) return own;
      const waitUntil = Math.min((session.endedAt ?? now()) + SESSION_FOLLOW_UP_MS, session.startedAt + SESSION_MS);
      if (now() < waitUntil) {
        if (lane.sessionTimer === undefined) {
          lane.sessionTimer = setTimeout(() => {
            lane.sessionTimer = undefined;
            dispatch();
          }, waitUntil - now());
          lane.sessionTimer.unref?.();
        }
        return undefined;
      }
    }
    lane.session = undefined;
    const continuing = lane.waiting.filter((waiter) => !waiter.startsTask);
    if (continuing.length === 0) return fairest(lane);
    const oldest = continuing.reduce((a, b) => (b.firstSeen < a.firstSeen ? b : a));
    return lane.waiting.indexOf(oldest);
  }

  function start(lane: Lane, environmentId: string, run: boolean): void {
    lane.running = environmentId;
    lane.runningSince = now();
    const state = stateOf(environmentId);
    state.lastActive = now();
    if (!lane.penalty) state.onShared++;
    if (lane.penalty) return;
    // A shared lane whose activation runs this long is no place to wait: its environment is hot from
    // now, and the activations of other environments waiting for the lane move to another.
    const heavy = (): void => {
      lane.heavyTimer = undefined;
      // Time the process stood still (the timer fires first when a stopped process continues) was
      // nobody's computing: wait for the rest.
      const held = now() - lane.runningSince;
      const stood = stalledDuring(lane.runningSince, now());
      if (stood > 0 && held - stood < heavyMs) {
        lane.heavyTimer = setTimeout(heavy, heavyMs - (held - stood));
        lane.heavyTimer.unref?.();
        return;
      }
      // Only a run's script heats its environment: a sync entity or a deploy runs the service's own
      // code, which a loaded machine or a long replay may slow past the mark through no fault of theirs.
      if (run) heat(environmentId);
      log(`lane ${lane.index} held ${heavyMs} ms by ${environmentId || '(none)'}: its waiters move`, 'info');
      lane.waiting = lane.waiting.filter((waiter) => {
        if (waiter.environmentId === environmentId) return true;
        waiter.grant('move');
        return false;
      });
      for (const waiter of lane.creating) if (waiter.environmentId !== environmentId) waiter.move();
    };
    lane.heavyTimer = setTimeout(heavy, heavyMs);
    lane.heavyTimer.unref?.();
  }

  /** Is the lane running an activation that has run for `heavyMs` already? */
  const blocked = (lane: Lane): boolean => lane.running !== undefined && now() - lane.runningSince >= heavyMs;

  /**
   * Waits for a workflow's creation on the lane's thread (posted at once, it waits behind whatever the
   * thread was given before), unless another environment's activation holds the lane past the heavy
   * mark meanwhile: then the workflow moves, as a waiter for the lane does. Outside the lane: the wait
   * is not the activation's time (an activation of 1 s or more heats its environment).
   */
  async function untilCreated<W>(lane: Lane, environmentId: string, creation: Creation<W>): Promise<W> {
    if (creation.workflow !== undefined) return creation.workflow;
    // The penalty lane moves nobody (its workflows have nowhere else to go): they wait, as for the lane.
    if (lane.penalty) return creation.created;
    if (blocked(lane) && lane.running !== environmentId) throw moved(lane, environmentId);
    let move = (): void => undefined;
    const held = new Promise<undefined>((resolve) => (move = () => resolve(undefined)));
    const waiter = { environmentId, move };
    lane.creating.add(waiter);
    try {
      const workflow = await Promise.race([creation.created, held]);
      if (workflow === undefined) throw moved(lane, environmentId);
      return workflow;
    } finally {
      lane.creating.delete(waiter);
    }
  }

  /** Waits for the lane; answers what gives it back, which says how long it was held. */
  async function acquire(
    lane: Lane,
    environmentId: string,
    runId: string,
    startsTask: boolean,
    run: boolean,
    deadline: number,
  ): Promise<() => number> {
    stateOf(environmentId).lastActive = now();
    if (!lane.penalty && blocked(lane) && lane.running !== environmentId) throw moved(lane, environmentId);
    const waitedFrom = now();
    const verdict = await new Promise<'run' | 'move' | 'expired'>((grant) => {
      lane.waiting.push({ environmentId, runId, startsTask, run, firstSeen: firstSeen(runId), deadline, grant });
      dispatch();
    });
    if (verdict === 'move') throw moved(lane, environmentId);
    if (verdict === 'expired') {
      throw new LaneExpiredError(
        `workflow thread ${lane.index}: this activation waited ${Math.round(now() - waitedFrom)} ms, past its workflow task's timeout; not run (the task's retry replays)`,
      );
    }
    const startedAt = now();
    let released = false;
    return () => {
      if (released) return 0;
      released = true;
      const held = now() - startedAt;
      const state = stateOf(environmentId);
      recent(state);
      state.recentMs += held;
      state.lastActive = now();
      if (!lane.penalty) state.onShared--;
      lane.running = undefined;
      if (lane.heavyTimer) clearTimeout(lane.heavyTimer);
      lane.heavyTimer = undefined;
      if (lane.session) lane.session.endedAt = now();
      forget();
      dispatch();
      return held;
    };
  }

  function moved(lane: Lane, environmentId: string): LaneMoveError {
    return new LaneMoveError(
      isHot(environmentId)
        ? `environment ${environmentId || '(none)'} ran a script past its budget: its workflows move to the penalty lane (this one replays there)`
        : `workflow thread ${lane.index} is held by a script past its budget: this workflow moves to another (it replays there)`,
    );
  }

  /**
   * The lane a new workflow of the environment lives on: a free one, else one whose activation started
   * last. An activation past a tenth of the heavy mark is likely a long one (a statement parsing a large
   * answer ran 10-20 s): a workflow placed there waits for the heavy mark before it moves.
   */
  function place(environmentId: string): Lane {
    if (isHot(environmentId)) return penaltyLane;
    let best = sharedLanes[0]!;
    for (const lane of sharedLanes) {
      const load = (candidate: Lane) => [
        blocked(candidate)
          ? 3
          : candidate.running === undefined
            ? 0
            : now() - candidate.runningSince >= heavyMs / 10
              ? 2
              : 1,
        candidate.waiting.length,
        candidate.workflows,
      ];
      const [a, b] = [load(lane), load(best)];
      if (a[0]! < b[0]! || (a[0] === b[0] && (a[1]! < b[1]! || (a[1] === b[1] && a[2]! < b[2]!)))) best = lane;
    }
    return best;
  }

  function heat(environmentId: string): void {
    stateOf(environmentId).hotUntil = now() + hotForMs;
  }

  return {
    async createWorkflow(createOptions: O): Promise<LaneWorkflow<A, C, S>> {
      const info = createOptions.info;
      const environmentId = environmentOfWorkflow(info);
      const lane = place(environmentId);
      log(`create ${info.workflowId} (${info.workflowType}) on lane ${lane.index}`, 'debug');
      // Creating a workflow, fetching its sink calls and disposing of it are short messages to the
      // thread (milliseconds): they are posted at once, only activations wait for their lane. But a
      // thread handles one message at a time, and one statement V8 does not interrupt (JSON.parse of a
      // 32 MiB answer) held its thread 10-20 s: nothing of a workflow that is not running may wait for
      // another's activation. Its activation waits for its creation as it waits for the lane, moving when
      // another environment holds the lane past the heavy mark (untilCreated); the sink calls of an
      // activation that never reached the thread (moved, expired, stopped) are none; its disposal is not
      // awaited while the thread runs another's activation (the thread disposes of it after, before
      // anything posted later).
      const creating = creators[lane.index]!.createWorkflow(createOptions);
      const creation: Creation<LaneWorkflow<A, C, S>> = { created: creating, workflow: undefined };
      creating.then(
        (workflow) => (creation.workflow = workflow),
        () => undefined,
      );
      lane.workflows++;
      // Whether the thread holds sink calls of this workflow: an activation of its reached the thread
      // since they were last fetched (creating a workflow runs none of its code).
      let sinkCallsHeld = false;
      return {
        async activate(activation: A): Promise<C> {
          if (stopped.has(info.runId)) {
            throw new LaneStoppedError(`run ${info.workflowId} was stopped for a statement that ran past its budget`);
          }
          if (!lane.penalty && isHot(environmentId)) {
            log(`move ${info.workflowId} from lane ${lane.index}`, 'info');
            throw moved(lane, environmentId);
          }
          const isRun =
            RUN_TYPES.has(info.workflowType) ||
            (info.workflowType === ENTITY_TYPE && (options.runsInEntity?.(info.workflowId, info.runId) ?? false));
          const startsTask = options.startsTask(activation);
          if (startsTask || !taskStarts.has(info.runId)) taskStarts.set(info.runId, now());
          const deadline = taskStarts.get(info.runId)! + (info.taskTimeoutMs ?? Infinity);
          const inner = await untilCreated(lane, environmentId, creation).catch((error: unknown) => {
            if (error instanceof LaneMoveError) log(`rescue ${info.workflowId} from lane ${lane.index}`, 'info');
            throw error;
          });
          const release = await acquire(lane, environmentId, info.runId, startsTask, isRun, deadline).catch(
            (error: unknown) => {
              if (error instanceof LaneMoveError) log(`rescue ${info.workflowId} from lane ${lane.index}`, 'info');
              if (error instanceof LaneExpiredError) log(`expired ${info.workflowId} on lane ${lane.index}`, 'info');
              throw error;
            },
          );
          // It may have become hot while this activation waited.
          if (!lane.penalty && isHot(environmentId)) {
            release();
            log(`move ${info.workflowId} from lane ${lane.index}`, 'info');
            throw moved(lane, environmentId);
          }
          sinkCallsHeld = true;
          const startedAt = now();
          const replaying = options.replaying?.(activation) ?? false;
          // Whether an interrupted statement of this activation convicts its run: a run workflow's, or a
          // sync entity's while its run is under way and the activation ran new work (below).
          const convicts =
            RUN_TYPES.has(info.workflowType) || (info.workflowType === ENTITY_TYPE && isRun && !replaying);
          // An interrupted statement: the run's script computed past every budget with the lane to itself.
          const convict = (): boolean => {
            heat(environmentId);
            log(
              `interrupted ${info.workflowId} (environment ${environmentId || '(none)'}) on lane ${lane.index} after ${Math.round(now() - startedAt)} ms`,
              'warn',
            );
            // A sync entity's only while its run is under way and the activation ran new work: a replay
            // of a long history on a starved thread may be interrupted too (a test saw one after 4.3 s on
            // the penalty lane, its run healthy). Left unconvicted, a runaway entity run retried its task
            // (3 s of a lane each time, some attempts aborting the worker process: 7 worker deaths in
            // 4 minutes in test/chaos/scripts.test.ts) until the run watch or the thread marks stopped it.
            if (!convicts) return false;
            firstSeen(info.runId);
            stopped.add(info.runId);
            options.onRunaway({
              workflowId: info.workflowId,
              runId: info.runId,
              workflowType: info.workflowType,
              environmentId,
              ranMs: now() - startedAt,
            });
            return true;
          };
          // A replay that convicted nobody leaves no isolate timeout in the history: the run watch
          // counts one there as evidence against the script (a continued run's long execution, taken
          // over after a SIGKILL at load ~30, was stopped script_timeout that way; issue 32).
          const replayMessage = () =>
            `the replay of ${info.workflowId}'s history was interrupted after ${Math.round(now() - startedAt)} ms ` +
            'on a busy workflow thread (not the script computing): the workflow task is retried';
          // The process stood still (SIGSTOP, a paused VM) during the activation: the isolate timeout is
          // wall time, so a healthy activation finds itself timed out when the process goes on. Nobody
          // is convicted, and the failed task says why instead of an isolate timeout: its retry runs
          // the statement again, and one that really runs past the timeout is interrupted again then.
          const cpuAtStart = options.threadCpuMs?.(lane.index);
          const waitAtStart = cpuAtStart === undefined ? undefined : options.threadWaitMs?.(lane.index);
          const stallMessage = (): string | undefined => {
            // The thread was starved (runnable, waiting for a CPU the machine gave others): the
            // statement computed less than a third of its budget. Excused once per run, and only an
            // interruption that would convict (a replay or a workflow that is no run spends nothing):
            // its retry runs the statement again, and a runaway is convicted at its next
            // interruption, starved or not (on a machine that stays that busy, a run that excuses
            // would spare forever). Its environment is hot all the same: the excuse spares the
            // conviction, not the penalty thread (a hostile review kept the shared lanes so).
            if (cpuAtStart !== undefined && waitAtStart !== undefined && convicts && !starved.has(info.runId)) {
              const computed = (options.threadCpuMs?.(lane.index) ?? Infinity) - cpuAtStart;
              const waited = (options.threadWaitMs?.(lane.index) ?? 0) - waitAtStart;
              if (computed < STALL_EXCUSE_MS && waited >= STALL_EXCUSE_MS) {
                // Kept 10 minutes from the excuse, not from when the run was first seen.
                starved.set(info.runId, now());
                heat(environmentId);
                log(
                  `interrupted ${info.workflowId} on lane ${lane.index} after ${Math.round(now() - startedAt)} ms, computing ${Math.round(computed)} ms and waiting ${Math.round(waited)} ms for a CPU: retried, not convicted`,
                  'warn',
                );
                return (
                  `${info.workflowId}'s activation was interrupted after ${Math.round(now() - startedAt)} ms, in which its workflow thread ` +
                  `computed ${Math.round(computed)} ms and waited ${Math.round(waited)} ms for a CPU (a busy machine; not the script computing): the workflow task is retried`
                );
              }
            }
            const stood = stalledDuring(startedAt, now());
            if (stood < STALL_EXCUSE_MS) return undefined;
            // What ran besides the stall reached the timeout on its own: a stall after it excuses nothing.
            if (now() - startedAt - stood >= isolateTimeoutMs - STALL_EXCUSE_MS / 2) return undefined;
            // The workflow thread computed through it: the main thread was busy, the process not stopped.
            const cpuNow = cpuAtStart === undefined ? undefined : options.threadCpuMs?.(lane.index);
            if (cpuNow !== undefined && cpuNow - cpuAtStart! >= STALL_EXCUSE_MS) return undefined;
            log(
              `interrupted ${info.workflowId} on lane ${lane.index} after ${Math.round(now() - startedAt)} ms, ${Math.round(stood)} ms of which the process stood still: retried, not convicted`,
              'warn',
            );
            return (
              `${info.workflowId}'s activation was interrupted after ${Math.round(now() - startedAt)} ms, ` +
              `${Math.round(stood)} ms of which the worker process stood still (stopped or paused; not the script computing): the workflow task is retried`
            );
          };
          try {
            const completion = await inner.activate(activation);
            if (options.interrupted(completion)) {
              const stalled = stallMessage();
              if (stalled !== undefined && options.replayInterruption) {
                return options.replayInterruption(completion, stalled) as C;
              }
              if (stalled === undefined && !convict() && replaying && options.replayInterruption) {
                return options.replayInterruption(completion, replayMessage()) as C;
              }
            } else if (lane.session?.runId === info.runId) lane.session.continues = options.continuesTask(completion);
            return completion;
          } catch (error) {
            if (options.isIsolateTimeout(error)) {
              const stalled = stallMessage();
              if (stalled !== undefined) throw new ReplayInterruptedError(stalled);
              if (!convict() && replaying) throw new ReplayInterruptedError(replayMessage());
            }
            throw error;
          } finally {
            // Time the process stood still was nobody's computing.
            const ran = release();
            if (isRun && ran >= heavyMs && ran - stalledDuring(startedAt, now()) >= heavyMs) heat(environmentId);
          }
        },
        async getAndResetSinkCalls(): Promise<S> {
          if (!sinkCallsHeld) return noSinkCalls();
          sinkCallsHeld = false;
          return (await creating).getAndResetSinkCalls();
        },
        async dispose(): Promise<void> {
          // A workflow whose creation failed has nothing to dispose of (its activation failed with why).
          const disposed = creating.then(
            (inner) => inner.dispose(),
            () => undefined,
          );
          const busy = lane.running !== undefined;
          try {
            if (!busy) await disposed;
          } finally {
            taskStarts.delete(info.runId);
            lane.workflows--;
          }
          if (busy) {
            disposed.catch((error: unknown) =>
              log(`could not dispose of ${info.workflowId} on lane ${lane.index}: ${String(error)}`, 'warn'),
            );
          }
        },
      };
    },
    async destroy(): Promise<void> {
      stalls?.stop();
      await Promise.all(creators.map((creator) => creator.destroy()));
    },
    stats(): LaneStats {
      return {
        lanes: lanes.map((lane) => ({
          penalty: lane.penalty,
          workflows: lane.workflows,
          busy: lane.running !== undefined,
          waiting: lane.waiting.length,
        })),
        hot: [...environments.entries()].filter(([, state]) => state.hotUntil > now()).map(([id]) => id),
      };
    },
  };
}
