/**
 * What keeps a script inside its own run (docs/architecture.md "Runaway scripts").
 *
 * The worker thread's realm, sealed, and its real clock and marks come from the sandbox module
 * (src/sandbox/hostRealm.ts), the only code that touches the SDK's internals.
 *
 * `createScriptBudget` is the sandbox side of loop protection (src/runtime/instrument.ts inserts its
 * calls into every loop and function body): a script that runs SCRIPT_CPU_BUDGET_MS without awaiting a
 * svc operation fails its own run with `script_timeout`, well before the isolate timeout would take the
 * worker process down.
 */
import { ApplicationFailure, workflowInfo } from '@temporalio/workflow';
import { hostRealm } from '../src/sandbox/hostRealm.js';
import type { RunErrorCode } from '../src/errors.js';

/** Continuous script execution without awaiting a svc operation after which a run is stopped. */
export const SCRIPT_CPU_BUDGET_MS = 1000;
/** The same while replaying history: wider, and still under the isolate timeout (3 s). */
const REPLAY_BUDGET_MS = 2000;
/**
 * Budget calls between two looks at the clock, at most. A stretch starts looking at every call and
 * doubles the stride while turns are cheap, and quarters it when a stride took long: a loop of slow
 * turns (one native call of milliseconds each) is looked at often enough to be stopped in time. With a
 * fixed stride of 256, turns of 3-6 ms were stopped live but past the isolate timeout on replay, and
 * turns of 6.5 ms reached it live (a hostile review; scriptBudget.test.ts).
 */
const CHECK_EVERY = 256;
/** A stride that took less than this grows; one that took more than STRIDE_SLOW_MS shrinks. */
const STRIDE_FAST_MS = 2;
const STRIDE_SLOW_MS = 20;
/** A pause at least this long (and much longer than usual) between two looks means waiting, not running. */
const WAITED_MS = 50;

export interface ScriptBudget {
  /** The function the instrumented script calls in every loop and function body. */
  tick: () => void;
  /**
   * The same, for the script's own realm: answers the failure's message once the budget is spent
   * (the realm throws an error of its own with it) instead of throwing an object of this realm.
   */
  check: () => string | undefined;
  /**
   * The run awaits an operation: its continuous execution ends here. `strict` (a script's own
   * operation) throws once the budget ran out.
   */
  yielded: (strict?: boolean) => void;
  /** An operation returned: the run executes again. */
  resumed: () => void;
  /** The script is done (or failed): the thread no longer executes it. */
  finished: () => void;
  /** Rejects when the budget is exhausted; raced against the script, so a script that swallows the error still ends. */
  exhausted: Promise<never>;
  /** The failure of an exhausted run, if it is. */
  failure: () => ApplicationFailure | undefined;
}

export function createScriptBudget(scriptName: string): ScriptBudget {
  const realm = hostRealm();
  // The execution, not only the workflow: a sync entity runs a run per execution (issue 31), and a
  // death blamed on one of its runs must not stop a later one (src/temporal/scriptThreads.ts blame).
  const { workflowId: id, runId } = workflowInfo();
  // Run id first: the mark is cut at its end when long (src/sandbox/hostRealm.ts).
  const workflowId = `${runId}\t${id}`;
  let calls = 0;
  let stride = 1;
  let nextLook = 1;
  let since = realm.now();
  let lastLook = since;
  // The usual time between two looks: a pause much longer than that is the script waiting (on a
  // timer, say), not computing. Adaptive, so that a loop with slow turns is still seen as computing.
  let usualPause = 0;
  let failure: ApplicationFailure | undefined;
  let finished = false;
  let reject: (error: unknown) => void = () => undefined;
  const exhausted = new Promise<never>((_, rejectWith) => {
    reject = rejectWith;
  });
  // Never unhandled: the run workflow races it, but only while the script runs.
  exhausted.catch(() => undefined);

  function look(): void {
    const now = realm.now();
    const pause = now - lastLook;
    if (pause > Math.max(WAITED_MS, 8 * usualPause)) since = now;
    usualPause = usualPause === 0 ? pause : 0.8 * usualPause + 0.2 * pause;
    lastLook = now;
    if (pause < STRIDE_FAST_MS) stride = Math.min(CHECK_EVERY, stride * 2);
    else if (pause > STRIDE_SLOW_MS) stride = Math.max(1, stride >> 2);
    nextLook = calls + stride;
    // A replay re-executes stretches that ran before, faster (no waits): one that ended within the
    // budget live gets a wider one (a slow replay must not fail what succeeded), but one that was
    // stopped live, an endless loop, must be stopped again, under the isolate timeout: unchecked it ran
    // into that timeout, whose interruption killed the worker process (runaway.test.ts, after the lanes
    // moved the entity, which replays it).
    const replaying = workflowInfo().unsafe.isReplaying;
    if (!replaying) realm.mark(workflowId);
    if (now - since <= (replaying ? REPLAY_BUDGET_MS : SCRIPT_CPU_BUDGET_MS)) return;
    failure = ApplicationFailure.create({
      type: 'script_timeout' satisfies RunErrorCode,
      nonRetryable: true,
      message:
        `script ${scriptName} ran for more than ${SCRIPT_CPU_BUDGET_MS / 1000} s without awaiting a svc operation ` +
        '(an endless loop?): run stopped',
    });
    reject(failure);
    throw failure;
  }

  return {
    tick() {
      if (failure) throw failure;
      if (++calls >= nextLook) look();
    },
    check() {
      if (!failure && ++calls >= nextLook) {
        try {
          look();
        } catch {
          // failure is set; reported below
        }
      }
      return failure?.message;
    },
    yielded(strict = true) {
      if (strict && failure) throw failure;
      realm.mark('');
    },
    resumed() {
      since = lastLook = realm.now();
      usualPause = 0;
      stride = 1;
      nextLook = calls + 1;
      // Only live execution of the script is marked: a replay re-executes what completed before, and
      // the run's closing steps run no script.
      if (!finished && !workflowInfo().unsafe.isReplaying) realm.mark(workflowId);
    },
    finished() {
      finished = true;
      realm.mark('');
    },
    exhausted,
    failure: () => failure,
  };
}
