/**
 * The script helper `svc`, built inside the run workflow. Every operation that touches the outside
 * world is one activity (a durable step): after a crash the run replays the recorded results instead
 * of repeating the work. Operations run as local activities by default (one marker event each, the
 * input is not stored); `operationMode: 'normal'` schedules them as ordinary activities.
 */
import {
  ActivityFailure,
  ApplicationFailure,
  type RetryPolicy,
  ChildWorkflowFailure,
  executeChild,
  proxyActivities,
  condition,
  patched,
  proxyLocalActivities,
  uuid4,
  workflowInfo,
  type ActivityOptions,
  type LocalActivityOptions,
} from '@temporalio/workflow';
import type { Duration } from '@temporalio/common';
import type { RuntimeActivities, StepRef } from '../activities/runtime.js';
import type { ConnectionScope } from '../src/connections/types.js';
import { runErrorCode, type RunErrorCode } from '../src/errors.js';
import type { WriteSummary } from '../src/records/types.js';
import { checkRecords, formatInvalidRecords, modelIndex } from '../src/config/checkRecord.js';
import {
  LOG_REDACTION_MARGIN,
  SCRIPT_LIMITS,
  type ActionDefinition,
  type LoadedScript,
  type RunActionInput,
  type RunOptions,
  type SyncDefinition,
} from '../src/runtime/definitions.js';
import type { ScriptLogEntry } from '../src/runtime/logStore.js';
import { paginate, queryRecord, type Page } from '../src/runtime/paginate.js';
import type { ScriptBudget } from './scriptBudget.js';
import { CHECKPOINT_NOT_EXECUTED, type Checkpoint } from '../src/syncs/checkpoint.js';
import { addSummary, RUN_CONTINUES, savedAny, SOFT_SHARE, wroteAny, type ExecutionChain } from './runChain.js';
import type { SvcShape } from './realm/types.js';
import { scriptSleep, type ScriptOperations } from './scriptRealm.js';
import {
  OperationError,
  REALM_MEMBERS,
  STEP_POLICIES,
  STORE_RETRY,
  STORE_TIMEOUT,
  SVC_OPERATIONS,
  type OperationRuntime,
  type StepArgs,
  type StepName,
  type StepPolicy,
  type StepResult,
  type AnySvcOperation,
} from './svcOperations.js';
import {
  ActionError,
  type ProxyConfiguration,
  type RequestConfig,
  type ServiceResponse,
  type WebhookEvent,
} from '../src/runtime/public.js';
import { readableSummary, requestSummary, summaryBytes } from '../src/runtime/stepSummary.js';
import { localActivityInput } from '../src/runtime/localActivityInput.js';
import { recordedBodyLength, responseOf } from '../src/runtime/httpAnswer.js';
import { failureMarkerBytes, resultMarkerBytes, STEP_MARKER_BOUND } from '../src/runtime/markerBytes.js';
import {
  REQUEST_ERROR_TYPES,
  type HttpFailureDetails,
  type RecordedResponse,
  type HttpMethod,
  type IntegrationDescription,
  type SentRequestConfig,
  reasonPhrase,
} from '../src/runtime/svcTypes.js';
import { actionTaskQueue } from './taskQueues.js';

export { OperationError };

/** A failed request, shaped like an Axios error: `error.response.status`, `error.response.data`, `error.code`. */
export class RequestError extends OperationError {
  override name = 'RequestError';
  readonly response: ServiceResponse | undefined;
  readonly status: number | undefined;
  readonly config: RequestConfig;
  constructor(code: RunErrorCode, message: string, config: RequestConfig, details: HttpFailureDetails | undefined) {
    super(code, message);
    this.config = config;
    // Parsed here, on the run's thread (src/runtime/httpAnswer.ts); histories before it hold it parsed.
    const response = details?.kind === 'response' ? responseOf(details.response) : undefined;
    this.response = response ? { ...response, statusText: reasonPhrase(response.status), config } : undefined;
    this.status = this.response?.status;
    if (details?.kind === 'network') this.errno = details.code;
  }
  /** The network error code (ECONNRESET, …) of a request that got no answer. */
  errno: string | undefined;
}

// Temporal terminates a run at 51,200 events or 50 MiB of history. The run stops itself before that
// with a clear error, leaving room for the failure and the final log flush.
export const HISTORY_EVENT_BUDGET = 48_000;
export const HISTORY_BYTE_BUDGET = 45 * 1024 * 1024;
// The run's own bookkeeping once its script returned (tracked deletes per model, the count, the last
// logs) may go past the budget by this much, so that a script that returned at the budget is a
// success (issue 32's hostile review), still well below Temporal's limits (51,200 events, 50 MiB).
export const BOOKKEEPING_RESERVE_EVENTS = 1_500;
export const BOOKKEEPING_RESERVE_BYTES = 3 * 1024 * 1024;
// Events one operation adds: a local activity is one marker; a normal activity is scheduled, started
// and completed plus the workflow task (scheduled, started, completed) that reacts to it.
const EVENTS_PER_OPERATION = { local: 1, normal: 6 } as const;
// svc.log lines are buffered and written in batches, at the end of the run at the latest.
const LOG_FLUSH_SIZE = 100;
// Local activity results travel to Temporal in the completion of their workflow task, which gRPC caps
// at 4 MiB: past this many bytes of results in one task the run ends the task before the next step.
// Results above the claim check's threshold (src/runtime/payloadStorage.ts) travel as a reference of a
// few hundred bytes. Where the cuts fall is part of what a history replays: this, the weights
// (declaredResultBytes, src/runtime/markerBytes.ts) and their constants change only with a new version
// (SvcContext.taskCutByBody was the last). A task's completion holds at most this, plus the last step's
// marker, plus those of the steps in flight at once when it was passed: each at most 64 KiB of payloads
// (markerBytes.ts), so ~40 steps in flight at once stay below gRPC's 4 MiB; more may not.
const TASK_RESULT_BYTES = 1024 * 1024;
// Runs without SvcContext.taskCutByBody: what a result weighs in its marker, per byte of declared body
// (the encryption codec adds a few dozen bytes; 1.78× until issue 31, bench/stepProfile.ts); 2 leaves
// a margin for ASCII, not for other text (a review: 20,000 '€' weigh 40,000 and take 60,000 bytes).
const CODEC_EXPANSION = 2;
// What the declared weight took for the claim check's threshold, in encoded bytes (twice the real one,
// src/runtime/markerBytes.ts EXTERNAL_PAYLOAD_THRESHOLD): frozen with that weight.
const DECLARED_CLAIM_BYTES = 128 * 1024;
const MARKER_BYTES = 400;
// The patch id of the task cut and the ledger's last step (workflows added them to runs in flight).
const TASK_CUT_PATCH = 'step-ledger-task-end';
// The step ledger keeps each request's whole encrypted answer until Temporal surely holds it, a
// claim-checked one too (its marker holds only a reference, so the task cut does not see it): past
// this many bytes kept for an execution, the run ends its workflow task the same way and the ledger
// forgets what the task's completion recorded (the hostile review of e72c525: unbounded before).
// Where the cuts fall is part of what a history replays: this, ledgerBytes() and the constants it
// uses change only with a new SvcContext.ledgerCut version.
const LEDGER_KEPT_BYTES = 8 * 1024 * 1024;
/** The patch id of the ledger's bytes cut in a run of its own workflow (runSync asks it before its first step). */
export const LEDGER_CUT_PATCH = 'step-ledger-bytes-cut';
/** The patch id of the task cut by recorded body (SvcContext.taskCutByBody) in a run of its own workflow (the same). */
export const TASK_CUT_BY_BODY_PATCH = 'task-cut-recorded-body';
/** The patch id of the cuts at gates (SvcContext.cutAtGates) in a run of its own workflow (the same). */
export const CUT_AT_GATES_PATCH = 'task-cut-at-gates';
/** The patch id of SvcContext.gatedChildrenAndClock in a run of its own workflow (the same). */
export const GATED_CHILDREN_AND_CLOCK_PATCH = 'gated-children-and-clock';
/** The patch id of SvcContext.cutAsksLedger in a run of its own workflow (the same as the others). */
export const CUT_ASKS_LEDGER_PATCH = 'cut-asks-ledger';
// Runs with SvcContext.cutAtGates: the markers of one workflow task stay below this, the weight of the
// steps accounted since the last cut plus STEP_MARKER_BOUND for each step not yet accounted (in flight
// or not yet weighed), whatever the script has in flight at once: 1 MiB below gRPC's 4 MiB.
const GATE_BYTES = 3 * 1024 * 1024;
// What a step is expected to keep in the step ledger before the run has weighed any (the gates of
// cutAtGates then expect the largest of the last steps they weighed): past LEDGER_KEPT_BYTES of
// expected rows, the run weighs its older steps before the next one.
const INITIAL_LEDGER_ESTIMATE = 1024 * 1024;
// A step's summary in its marker, at most (src/runtime/stepSummary.ts: 200 characters, 1,288 bytes
// when each is a control character).
const SUMMARY_ALLOWANCE = 2048;
// The patch id of the provider's default pagination (a getIntegration step before a run's first paginate).
const PAGINATION_DEFAULTS_PATCH = 'paginate-provider-defaults';
// Timers of setTimeout waiting at once, per run.
const MAX_TIMERS = 100;
const local = proxyLocalActivities<RuntimeActivities>({ startToCloseTimeout: STORE_TIMEOUT, retry: STORE_RETRY });
// Ends the current workflow task (an ordinary activity is sent with the task's completion); short.
const endTask = proxyActivities<RuntimeActivities>({ startToCloseTimeout: '1 minute', retry: STORE_RETRY });
const normal = proxyActivities<RuntimeActivities>({ startToCloseTimeout: STORE_TIMEOUT, retry: STORE_RETRY });

export interface SvcContext {
  /** Loop protection (workflows/scriptBudget.ts): told when the script awaits an operation and resumes. */
  budget?: Pick<ScriptBudget, 'yielded' | 'resumed'>;
  kind: 'sync' | 'action';
  scope: ConnectionScope;
  /** The sync or action name. */
  scriptName: string;
  /** Workflow id of this run: the run id in the records cache and in the logs. */
  runId: string;
  /** Declared output models (syncs). */
  models: string[];
  options: RunOptions;
  lastSyncDate: Date | undefined;
  webhook: WebhookEvent | undefined;
  /** svc.triggerAction levels above this run (SCRIPT_LIMITS.actionDepth). */
  depth?: number | undefined;
  /** The sync's `record_validation` with the models it needs (src/config/checkRecord.ts). */
  recordValidation?: SyncDefinition['recordValidation'];
  /**
   * Runs inside the sync entity's execution (issue 31): the code version comes with the execution's
   * input, so the run asks no `patched()` (each call upserts a search attribute on a fresh execution)
   * and takes every rule as of today; the step ledger forgets its steps when the entity's next run
   * begins (activities/runtime.ts beginRun), not by an ordinary activity at its end.
   */
  inline?: boolean;
  /**
   * Whether the run forgets its step ledger's rows once the answers they keep pass LEDGER_KEPT_BYTES
   * (the run's own version: the entity's input, an action's input, runSync's patch asked before its
   * first step). Never a `patched()` asked mid-run: asked right after a local activity, its marker
   * can land in the next workflow task while a replay expects it in this one (commit 17d2b10).
   */
  ledgerCut?: boolean;
  /**
   * Whether the task cut (TASK_RESULT_BYTES) weighs each step by what its marker holds at most, from
   * the recorded answer, failures included (src/runtime/markerBytes.ts); without it, a response by its
   * declared content-length, which a compressed answer understates (a hostile review: 160 gzip
   * answers declaring 3 KiB and holding 40 KiB each, all in one task's completion, past gRPC's 4 MiB:
   * the completion failed on every retry), other results by 400 bytes, failures by nothing. The run's
   * own version, as ledgerCut (never a `patched()` asked mid-run), and a flag of its own: runs recorded
   * with ledgerCut and the declared weight exist.
   */
  taskCutByBody?: boolean;
  /**
   * Whether the task and ledger cuts are decided at gates, on the weights of a set of steps the history
   * fixes (version 7 of the sync entity, the action flag of the same name; runs with it have ledgerCut
   * and taskCutByBody too). Without it a step's weight counts from the moment its result reaches the
   * workflow, and a replay delivers the results of steps in flight at once in other groups than the live
   * run did: a fan-out whose results pass the cut failed its replay (TMPRL1100, docs/architecture.md);
   * nor did anything bound what steps in flight at once add to one task (6.59 MB shown).
   */
  cutAtGates?: boolean;
  /**
   * With cutAtGates (version 8 of the sync entity, the action flag of the same name): the gates also
   * weigh each child action's start (`svc.triggerAction`), whose input travels in the same task completion
   * as the markers (before, 150 child starts asked at once each carried their input into one completion,
   * uncounted); and the script's clock (`Date` in its realm) stands still while steps are in flight, at
   * the time the first of them was asked. Temporal's core moves the workflow's clock to each result's
   * completion time, and a replay that gets several results at once is at the latest of them from the
   * first one's turn on: a script that read the clock between two results could see another time on
   * replay. With no step in flight every result the clock has seen was handed, so the clock is the
   * same both ways (the rule `nearLimit` follows for the time limit).
   */
  gatedChildrenAndClock?: boolean;
  /**
   * Whether a saveCheckpoint at a limit still takes its step, one that stands only if a worker already
   * executed that save (the step ledger has its row), and the run goes on when one did (checkpoint()
   * below); the ledgered reads' rows count in the ledger's weight too (weighs). The run's own version,
   * as ledgerCut (never a `patched()` asked mid-run).
   */
  cutAsksLedger?: boolean;
  /**
   * Whether no other instance can have executed this run's steps (then they skip the ledger lookup on
   * their first attempt). Default: this instance runs the execution from its first workflow task.
   */
  fresh?: boolean;
  /** Told whenever the run issues a step or its script resumes (the entity's runaway watch). */
  onActive?: () => void;
  /** A sync run's chain of executions (issue 32, workflows/runChain.ts): checkpoints, continuation, tracked deletes. */
  chain?: ExecutionChain;
  /**
   * The run's bookkeeping steps have a reserve past the history budget (BOOKKEEPING_RESERVE_EVENTS).
   * Runs recorded before it (version 2 entities; a runSync without its patch) replay without it.
   */
  bookkeepingReserve?: boolean;
}

/** What the run workflow keeps from its `svc`: counts of writes and the log buffer to flush. */
export interface SvcRuntime {
  /** What the script's realm builds svc from (workflows/realm/bootstrap.ts). */
  shape: SvcShape;
  /** The operations of `svc` by name, as the script's realm calls them (workflows/scriptRealm.ts). */
  scriptOperations: ScriptOperations;
  /** Buffers a log line without waiting (the realm's console). */
  bufferLog: (level: string, message: string) => void;
  /** Per model: what batchSave and batchDelete reported. */
  summaries: Record<string, WriteSummary>;
  operations: () => number;
  flushLogs: () => Promise<void>;
  /** Ends the run's use of the step ledger: its results are made durable, then the ledger forgets them. */
  finish: () => Promise<void>;
  /** The worker's limits per execution and run, from the loaded script (the run's options win over them). */
  useExecutionLimits: (
    limits: Pick<LoadedScript, 'executionTimeLimitMs' | 'maxExecutions' | 'executionOperationLimit'>,
  ) => void;
  /** The script's clock in ms (its realm's `Date`): see SvcContext.gatedChildrenAndClock. */
  now: () => number;
  /** Runs one bookkeeping step of the run (not a script operation) with the same mode and budget. */
  step: <K extends keyof RuntimeActivities>(
    name: K,
    summary: string,
    args: Parameters<RuntimeActivities[K]>,
  ) => Promise<Awaited<ReturnType<RuntimeActivities[K]>>>;
}

/** A step's result when it is a recorded response (its body in `data` or `body`), else undefined. */
function recordedResponse(result: unknown): RecordedResponse | undefined {
  const response = result as { data?: unknown; body?: unknown } | undefined;
  if (response === null || typeof response !== 'object' || !('data' in response || typeof response.body === 'string')) {
    return undefined;
  }
  return response as RecordedResponse;
}

/**
 * About what a step's result weighs in its marker, in runs without SvcContext.taskCutByBody: a
 * response by the size its `content-length` declares (recorded when it declares none), which a
 * compressed answer understates; anything else a little. Runs with it: src/runtime/markerBytes.ts.
 */
function declaredResultBytes(result: unknown): number {
  const response = recordedResponse(result);
  if (response === undefined) return MARKER_BYTES;
  const declared = Number((response.headers as Record<string, unknown> | undefined)?.['content-length']);
  const body = Number.isFinite(declared) && declared > 0 ? declared : recordedBodyLength(response);
  const encoded = body * CODEC_EXPANSION;
  return encoded > DECLARED_CLAIM_BYTES ? MARKER_BYTES : encoded + MARKER_BYTES;
}

/**
 * About what a step's row weighs in the step ledger: a response its whole body as recorded (not its
 * declared content-length, which a compressed answer understates), claim-checked or not; a final
 * failure its details (a 4xx's body); anything else a little. UTF-16 code units, not bytes.
 */
function ledgerBytes(outcome: { result: unknown } | { failure: unknown }): number {
  if ('failure' in outcome) {
    const details = applicationFailureOf(outcome.failure)?.details;
    return (details ? JSON.stringify(details).length : 0) * CODEC_EXPANSION + MARKER_BYTES;
  }
  const response = recordedResponse(outcome.result);
  return (response ? recordedBodyLength(response) : 0) * CODEC_EXPANSION + MARKER_BYTES;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The application failure of a failed step: wrapped in an ActivityFailure, or bare (local activities). */
function applicationFailureOf(error: unknown): ApplicationFailure | undefined {
  if (error instanceof ActivityFailure && error.cause instanceof ApplicationFailure) return error.cause;
  if (error instanceof ApplicationFailure) return error;
  return undefined;
}

/**
 * The code and message of a failed step or child run, as the script sees them: a type that is not a
 * run's code (an activity's error class name) gives `fallback` and stays in the message.
 */
function failureCode(cause: ApplicationFailure, fallback: RunErrorCode, message: string): [RunErrorCode, string] {
  const code = runErrorCode(cause.type, fallback);
  return [code, code === cause.type ? message : `${message} (${cause.type ?? 'failure without a type'})`];
}

/**
 * Failures that end the run's execution whatever the script does: the history budget reached, with
 * (issue 32) the run continuing in a next execution or its checkpoint not advancing. They reach the
 * script's realm as they are (a raw ApplicationFailure is fatal there, scriptRealm.ts), never as an
 * OperationError or RequestError it could catch and go on from: a script that caught the cut at the
 * budget went on past it, or returned and was reported a success after a partial pass (with
 * track_deletes marking what it never reached as deleted).
 */
const EXECUTION_ENDING: ReadonlySet<string | null | undefined> = new Set([
  'run_history_limit',
  RUN_CONTINUES,
  'checkpoint_not_advancing',
]);

/** Turns the failure of an activity into what the script sees. */
function operationFailure(error: unknown, what: string): unknown {
  const cause = applicationFailureOf(error);
  if (!cause || EXECUTION_ENDING.has(cause.type)) return error;
  return new OperationError(...failureCode(cause, 'operation_failed', `${what} failed: ${cause.message}`));
}

export function createSvc(context: SvcContext): SvcRuntime {
  const mode = context.options.operationMode ?? 'local';
  const summaries: Record<string, WriteSummary> = {};
  const logBuffer: ScriptLogEntry[] = [];
  let logSeq = 0;
  let operations = 0;
  // History length is only updated at the start of a workflow task; local activities completed since
  // then are not in it yet, so they are counted here.
  let seenHistoryLength = -1;
  let operationsSinceHistoryUpdate = 0;
  // The step ledger's view of the run: every step has an index (the same on every replay). The ledger
  // forgets a step's row only once Temporal surely holds its result: by the ordinary activity
  // `forgetSteps` (it runs after the workflow task that scheduled it is recorded, markers and all), at
  // a task cut and at the run's end, or when the execution has closed (the next run's beginRun, the
  // retention purge). Until this session each step also told the ledger which steps were held, from
  // the changes of workflowInfo().historyLength it had seen; that rested on an assumption about the
  // SDK nobody here can check from outside, and a forgotten write's row is a write counted twice
  // (docs/architecture.md "Exact resume").
  let nextStep = 0;
  const stepsInFlight = new Set<number>();
  // The saveCheckpoints at a limit whose steps are out (version 9): the script's other operations wait
  // for every one. Once one did not stand, the execution ends there: a later answer does not undo it.
  const probing = new Set<Promise<void>>();
  let probeCut = false;
  let taskResultBytes = 0;
  let ledgerKeptBytes = 0;
  let ledgered = 0;
  // This instance runs the run's first workflow task itself (no replay, no earlier attempt): no
  // other instance can have executed any of its steps, so they need not ask the ledger first.
  const fresh = context.fresh ?? (!workflowInfo().unsafe.isReplaying && workflowInfo().historyLength <= 3);
  const latest = context.inline === true;
  const validation = context.recordValidation;
  const validationModels = validation ? modelIndex(validation.models) : undefined;

  function guardHistory(bookkeeping = false): void {
    // The execution is ending so that the run continues in a next one: the script's operations stop
    // here (one it started after the cut, or after catching it, is refused the same way); the run's
    // own bookkeeping (its last logs) goes on.
    if (context.chain?.continuing && !bookkeeping) {
      throw ApplicationFailure.create({
        type: RUN_CONTINUES,
        nonRetryable: true,
        message: 'the run continues in a next execution: this execution takes no further svc operation',
      });
    }
    const info = workflowInfo();
    if (info.historyLength !== seenHistoryLength) {
      seenHistoryLength = info.historyLength;
      operationsSinceHistoryUpdate = 0;
      taskResultBytes = 0;
    }
    const events = info.historyLength + operationsSinceHistoryUpdate * EVENTS_PER_OPERATION[mode];
    const reserve = bookkeeping && context.bookkeepingReserve === true;
    const eventBudget =
      (context.options.historyEventBudget ?? HISTORY_EVENT_BUDGET) + (reserve ? BOOKKEEPING_RESERVE_EVENTS : 0);
    const byteBudget = HISTORY_BYTE_BUDGET + (reserve ? BOOKKEEPING_RESERVE_BYTES : 0);
    if (events > eventBudget || info.historySize > byteBudget) {
      // A run that continues in a next execution (issue 32) still flushes its logs in this one.
      if (context.chain?.continuing) return;
      const usage = `${operations} svc operations, ${events} events, ${Math.round(info.historySize / 1024 / 1024)} MiB`;
      // A run inside its sync entity may continue from a checkpoint; a run of its own workflow cannot;
      // nor can bookkeeping past its reserve (the script returned: it fails as any run past its budget).
      if (context.chain?.context.canContinue && !reserve)
        throw context.chain.atLimit(progressMade(context.chain), usage);
      throw ApplicationFailure.create({
        type: 'run_history_limit' satisfies RunErrorCode,
        nonRetryable: true,
        message:
          `the run stopped after ${operations} svc operations: its history reached ${events} events and ` +
          `${Math.round(info.historySize / 1024 / 1024)} MiB, near Temporal's limit of 51,200 events / 50 MiB. ` +
          'Save records in larger batches, fetch larger pages, or split the sync (docs/architecture.md).',
      });
    }
  }

  // Issue 32: past SOFT_SHARE of the history budget, or past the execution's time limit, a run that
  // checkpoints continues in a next execution after its next saveCheckpoint.
  const executionStartedAt = Date.now();
  let workerTimeLimit: number | undefined;
  let workerOperationLimit: number | undefined;
  function nearLimit(): boolean {
    const info = workflowInfo();
    const events = info.historyLength + operationsSinceHistoryUpdate * EVENTS_PER_OPERATION[mode];
    const eventBudget = context.options.historyEventBudget ?? HISTORY_EVENT_BUDGET;
    const timeLimit = context.options.executionTimeLimitMs ?? workerTimeLimit;
    // A worker taking the run over replays one activation per operation, within the 4 s task timeout.
    const operationLimit = context.options.executionOperationLimit ?? workerOperationLimit;
    return (
      events > eventBudget * SOFT_SHARE ||
      info.historySize > HISTORY_BYTE_BUDGET * SOFT_SHARE ||
      // The workflow's clock is the latest result's time, and a replay that gets several results at once
      // is at the latest of them from the first one's turn on (a hostile review): with steps in flight a
      // run with the gates does not read it; with none, every result the clock has seen was handed.
      (timeLimit !== undefined &&
        (!gated || stepsInFlight.size === 0) &&
        Date.now() - executionStartedAt >= timeLimit) ||
      (operationLimit !== undefined && operations >= operationLimit)
    );
  }

  // The gates (SvcContext.cutAtGates). Steps are weighed in the order they were scheduled, a prefix at a
  // time, and only once every step of that prefix has ended (the run waits for them): so which steps a
  // decision counts, and what they weigh, never depend on how their results were grouped into
  // activations, which a replay does otherwise than the live run. Every decision reads only this state,
  // changed only here, and the step's index; while a gate waits or cuts, the steps asked meanwhile wait
  // behind it in the order they were asked.
  const gated = context.cutAtGates === true;
  const gatedChildren = gated && context.gatedChildrenAndClock === true;
  // The script's clock while steps are in flight (SvcContext.gatedChildrenAndClock).
  let clockAtRest = 0;
  function scriptNow(): number {
    return gatedChildren && stepsInFlight.size > 0 ? clockAtRest : Date.now();
  }
  // Steps below `accountedUpTo` are weighed: markers and ledger rows since the last cut.
  let accountedUpTo = 0;
  let accountedMarkers = 0;
  let accountedLedger = 0;
  // The weights of ended steps not weighed yet, by index.
  const endedWeights = new Map<number, { marker: number; ledger: number }>();
  // The largest weights among the last steps weighed: what a step not weighed yet is expected to add.
  let markerEstimate = 0;
  let ledgerEstimate = INITIAL_LEDGER_ESTIMATE;
  // The turnstile: undefined while steps pass freely; else the steps waiting, in the order they were
  // asked, while one step holds it (it weighs, cuts, or is about to be scheduled). The holder hands it
  // to the first waiter once its own command is issued, so no step overtakes one asked before it.
  let turnstile: (() => void)[] | undefined;
  // The results' turns. A live run gets its steps' results about one per activation; a replay gets all
  // those the history recorded in a task at once, in the same order (Temporal's core applies them as
  // far as their steps are scheduled). Each result reaches the script in a turn of its own, in the order
  // the results came, where the SDK unblocks conditions: so what the script and the gates do between
  // two results is the same both ways (a hostile review: two branches with different code between
  // their steps scheduled them in another order on replay, each answer going to the other request).
  let arrived = 0;
  let handed = 0;
  // The gate's condition while it waits: a turn waits while the gate can go on, so that it goes first.
  let weighing: (() => boolean) | undefined;

  /** A step's outcome, handed to the script in its turn. */
  async function inTurn<T>(scheduled: Promise<T>): Promise<T> {
    const outcome = await scheduled.then(
      (value) => ({ ok: true as const, value }),
      (error: unknown) => ({ ok: false as const, error }),
    );
    const turn = arrived++;
    let armed = false;
    const mine = condition(() => armed && handed === turn && !(weighing?.() ?? false));
    armed = true;
    try {
      await mine;
    } finally {
      // A cancelled wait (the run is cancelled) passes the turn on all the same.
      handed++;
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  /** Takes the turnstile: a function that hands it on, once (the step's failure may call it again). */
  async function holdTurnstile(): Promise<() => void> {
    if (turnstile) await new Promise<void>((resolve) => turnstile!.push(resolve));
    else turnstile = [];
    let passed = false;
    return () => {
      if (passed) return;
      passed = true;
      const next = turnstile?.shift();
      if (next) next();
      else turnstile = undefined;
    };
  }

  /** Whether step `index` must wait for older steps to be weighed before it is scheduled. */
  function mustWeigh(index: number): boolean {
    const unweighed = index - accountedUpTo + 1;
    return (
      (mode === 'local' &&
        (accountedMarkers + unweighed * (STEP_MARKER_BOUND + SUMMARY_ALLOWANCE) > GATE_BYTES ||
          accountedMarkers + unweighed * markerEstimate > TASK_RESULT_BYTES)) ||
      accountedLedger + unweighed * ledgerEstimate > LEDGER_KEPT_BYTES
    );
  }

  /** Weighs steps until step `index` may be scheduled, cutting the task where the weights say (turnstile held). */
  async function weighBefore(index: number, bookkeeping: boolean | undefined): Promise<void> {
    while (accountedUpTo < index && mustWeigh(index)) {
      // The older half of the steps not weighed.
      await weighUpTo(accountedUpTo + Math.max(1, Math.ceil((index - accountedUpTo) / 2)));
      if (accountedMarkers > TASK_RESULT_BYTES || accountedLedger > LEDGER_KEPT_BYTES) {
        // Ends the workflow task. Its completion holds the markers of every step scheduled before the
        // cut (Temporal's core completes a task once its local activities end): all are weighed first,
        // so that none counts again in the next task.
        await weighUpTo(index);
        accountedMarkers = 0;
        accountedLedger = 0;
        // An ordinary activity is scheduled by the task's completion and runs after it.
        await endTask.forgetSteps(index);
        guardHistory(bookkeeping);
      }
    }
  }

  /** Weighs the steps below `upTo` not weighed yet, once each of them has ended. */
  async function weighUpTo(upTo: number): Promise<void> {
    const ended = (): boolean => ![...stepsInFlight].some((step) => step < upTo);
    // Resumes where the SDK unblocks conditions, never in the middle of other microtasks, even when the
    // steps have ended already (a replay gets their results earlier): so its place among the other
    // results' turns is the same both ways (a hostile review: a timer another branch started landed on
    // the other side of the cut on replay).
    let armed = false;
    weighing = ended;
    try {
      const resumed = condition(() => armed && ended());
      armed = true;
      await resumed;
    } finally {
      weighing = undefined;
    }
    let markers = 0;
    let ledger = 0;
    for (let step = accountedUpTo; step < upTo; step++) {
      const weight = endedWeights.get(step) ?? { marker: 0, ledger: 0 };
      endedWeights.delete(step);
      accountedMarkers += weight.marker;
      accountedLedger += weight.ledger;
      markers = Math.max(markers, weight.marker);
      ledger = Math.max(ledger, weight.ledger);
    }
    if (upTo > accountedUpTo) {
      markerEstimate = markers;
      ledgerEstimate = ledger;
    }
    accountedUpTo = upTo;
  }

  async function run<K extends keyof RuntimeActivities>(
    name: K,
    summary: string,
    args: Parameters<RuntimeActivities[K]>,
    overrides: {
      startToCloseTimeout?: Duration;
      retry?: RetryPolicy;
      bookkeeping?: boolean;
      /** What the command the script issues on this step's result weighs in the same task (a child's start). */
      commandBytes?: (result: Awaited<ReturnType<RuntimeActivities[K]>>) => number;
    } = {},
  ): Promise<Awaited<ReturnType<RuntimeActivities[K]>>> {
    // The script waits from here (the thread is no longer executing it). Only script operations are
    // refused once its budget ran out; the run's own steps go on.
    context.budget?.yielded(!overrides.bookkeeping);
    context.onActive?.();
    // Beside a saveCheckpoint at a limit whose step is out (version 9, checkpoint() below): after its answer.
    // A single probe is awaited as itself: the same turns of the microtask queue as before there could
    // be two, so the histories recorded then replay in the same order.
    while (probing.size > 0 && !overrides.bookkeeping) {
      await (probing.size === 1 ? [...probing][0] : Promise.all(probing));
    }
    guardHistory(overrides.bookkeeping);
    let release: (() => void) | undefined;
    if (gated) {
      if (turnstile || mustWeigh(nextStep)) {
        release = await holdTurnstile();
        try {
          await weighBefore(nextStep, overrides.bookkeeping);
          // A step that waited: the execution may be ending meanwhile.
          guardHistory(overrides.bookkeeping);
        } catch (error) {
          release();
          throw error;
        }
      }
    } else if (
      // patched(): a run that started before the task cut replays its recorded tasks without it.
      (mode === 'local' && taskResultBytes > TASK_RESULT_BYTES && (latest || patched(TASK_CUT_PATCH))) ||
      (context.ledgerCut === true && ledgerKeptBytes > LEDGER_KEPT_BYTES)
    ) {
      // Ends the workflow task here, so that its completion stays far below gRPC's 4 MiB: an ordinary
      // activity is scheduled by the task's completion and runs after it (a timer would wait ~1 s).
      taskResultBytes = 0;
      ledgerKeptBytes = 0;
      // Steps completed before this point are in the completion that schedules it.
      await endTask.forgetSteps(stepsInFlight.size > 0 ? Math.min(...stepsInFlight) : nextStep);
      guardHistory(overrides.bookkeeping);
    }
    operations++;
    operationsSinceHistoryUpdate++;
    const index = nextStep++;
    const policy = STEP_POLICIES[name];
    const stepSummary = readableSummary(summary);
    const options: LocalActivityOptions & ActivityOptions = {
      startToCloseTimeout: overrides.startToCloseTimeout ?? policy.timeout ?? STORE_TIMEOUT,
      retry: overrides.retry ?? policy.retry ?? STORE_RETRY,
      // Readable in the Web UI while the step's payloads stay encrypted (src/runtime/stepSummary.ts).
      summary: stepSummary,
    };
    // executeWithOptions keeps one proxy per mode while naming each step for the Web UI.
    type Call = (options: LocalActivityOptions & ActivityOptions, args: unknown[]) => Promise<unknown>;
    const proxy = (mode === 'local' ? local[name] : normal[name]) as unknown as { executeWithOptions: Call };
    try {
      if (policy.ledgered) {
        // A step ledgered later than the end-of-run rule (unweighed) leaves the run's commands as recorded:
        // a run whose only ledgered step it is keeps its row until the retention purge.
        if (weighs(policy)) ledgered++;
        const step: StepRef = fresh ? { index, fresh } : { index };
        args = [...args, step] as unknown as typeof args;
      }
      // A local activity's input is never stored by Temporal: marked so, the claim check leaves it inline
      // (src/runtime/localActivityInput.ts). An ordinary activity's input is in its history: claim-checked.
      // Inside `try`: an input that cannot be written releases the gate it holds (a hostile review).
      const sent: unknown[] = mode === 'local' ? args.map(localActivityInput) : args;
      // The clock the script sees while steps are in flight: read here with none in flight.
      if (stepsInFlight.size === 0) clockAtRest = Date.now();
      stepsInFlight.add(index);
      const scheduled = proxy.executeWithOptions(options, sent);
      // The step's command is issued: the steps waiting behind this one's gate follow it, in order.
      release?.();
      const result = (await (gated ? inTurn(scheduled) : scheduled)) as Awaited<ReturnType<RuntimeActivities[K]>>;
      const marker =
        context.taskCutByBody === true
          ? resultMarkerBytes(result) + summaryBytes(stepSummary)
          : declaredResultBytes(result);
      const ledger = policy.ledgered && weighs(policy) ? ledgerBytes({ result }) : 0;
      // The gates weigh it in its turn; the older rules add it at once. A child's start goes in the task
      // completion whatever the mode.
      const command = gatedChildren && overrides.commandBytes ? overrides.commandBytes(result) : 0;
      if (gated) endedWeights.set(index, { marker: (mode === 'local' ? marker : 0) + command, ledger });
      else {
        taskResultBytes += marker;
        ledgerKeptBytes += ledger;
      }
      return result;
    } catch (failure) {
      // Failed, or not scheduled: the steps behind this one's gate go on.
      release?.();
      // A failure's marker holds its message, stack and details (a 4xx's body): counted from version 6.
      const marker = context.taskCutByBody === true ? failureMarkerBytes(failure) + summaryBytes(stepSummary) : 0;
      const ledger = policy.ledgered && weighs(policy) ? ledgerBytes({ failure }) : 0;
      if (gated) endedWeights.set(index, { marker: mode === 'local' ? marker : 0, ledger });
      else {
        taskResultBytes += marker;
        ledgerKeptBytes += ledger;
      }
      throw failure;
    } finally {
      stepsInFlight.delete(index);
      context.onActive?.();
      context.budget?.resumed();
    }
  }

  const logContext = {
    ...context.scope,
    scriptKind: context.kind,
    scriptName: context.scriptName,
    runId: context.runId,
  };

  function bufferLog(level: string, message: string): boolean {
    // Cut with a margin: the log store redacts the connection's credentials first and then cuts at
    // logLineBytes, so a credential that straddled this cut is still found whole.
    const keep = SCRIPT_LIMITS.logLineBytes + LOG_REDACTION_MARGIN;
    const line = message.length > keep ? message.slice(0, keep) : message;
    const known = ['debug', 'info', 'warn', 'error'];
    logBuffer.push({
      level: (known.includes(level) ? level : 'info') as ScriptLogEntry['level'],
      message: line,
      loggedAt: new Date().toISOString(),
      seq: logSeq++,
    });
    return logBuffer.length >= LOG_FLUSH_SIZE;
  }

  async function flushLogs(bookkeeping = false): Promise<void> {
    if (logBuffer.length === 0) return;
    const entries = logBuffer.splice(0, logBuffer.length);
    await run('writeLogs', `log ×${entries.length}`, [logContext, entries], { bookkeeping });
  }

  /** A script's request config as the activity gets it: checked, the query a record, only what it reads. */
  function sentConfig(method: HttpMethod, config: RequestConfig): SentRequestConfig {
    if (!isPlainObject(config) || typeof config.endpoint !== 'string' || config.endpoint === '') {
      throw new OperationError('invalid_request', `svc.${method.toLowerCase()} needs a config object with an endpoint`);
    }
    ownScope(`svc.${method.toLowerCase()} ${config.endpoint}`, config.providerConfigKey, config.connectionId);
    const sent: SentRequestConfig = { endpoint: config.endpoint };
    if (config.headers !== undefined) sent.headers = config.headers;
    if (config.params !== undefined) sent.params = queryRecord(config.params);
    if (config.data !== undefined) sent.data = config.data;
    if (Array.isArray(config.retryOn)) sent.retryOn = config.retryOn;
    if (config.baseUrlOverride !== undefined) sent.baseUrlOverride = config.baseUrlOverride;
    if (config.decompress !== undefined) sent.decompress = config.decompress;
    if (config.responseType !== undefined) sent.responseType = config.responseType;
    return sent;
  }

  /** `page`: the request is that page of a svc.paginate walk (0 is the first). */
  async function request<T>(method: HttpMethod, config: RequestConfig, page?: number): Promise<ServiceResponse<T>> {
    const sent = sentConfig(method, config);
    const retries = config.retries ?? 0;
    if (!Number.isInteger(retries) || retries < 0) {
      throw new OperationError('invalid_request', `retries of ${method} ${config.endpoint} must be a whole number ≥ 0`);
    }
    try {
      const result = await run(
        'httpRequest',
        requestSummary(method, sent.endpoint, sent.params),
        [context.scope, page === undefined ? { method, config: sent } : { method, config: sent, page }],
        {
          retry: {
            maximumAttempts: retries + 1,
            initialInterval: context.options.retryInitialIntervalMs ?? 1000,
            backoffCoefficient: 2,
            maximumInterval: context.options.retryMaximumIntervalMs ?? 60_000,
          },
        },
      );
      // The body is parsed here, on the run's own thread (src/runtime/httpAnswer.ts).
      const response = responseOf(result);
      return { ...response, statusText: reasonPhrase(response.status), data: response.data as T, config };
    } catch (error) {
      const cause = applicationFailureOf(error);
      if (cause && !EXECUTION_ENDING.has(cause.type)) {
        const details = cause.details?.[0] as HttpFailureDetails | undefined;
        const known = cause.type === REQUEST_ERROR_TYPES.status || cause.type === REQUEST_ERROR_TYPES.network;
        const [code, message] = failureCode(cause, 'http_error', cause.message);
        throw new RequestError(code, message, config, known ? details : undefined);
      }
      throw error;
    }
  }

  function checkWrite(what: 'batchSave' | 'batchDelete', records: unknown, model: unknown): void {
    if (context.kind !== 'sync') {
      throw new OperationError('invalid_operation', `svc.${what} is only available in sync scripts, not in actions`);
    }
    if (typeof model !== 'string' || !context.models.includes(model)) {
      throw new OperationError(
        'invalid_operation',
        `svc.${what}: model ${JSON.stringify(model)} is not an output of sync ${context.scriptName} (outputs: ${context.models.join(', ')})`,
      );
    }
    if (!Array.isArray(records)) throw new OperationError('invalid_operation', `svc.${what}: records must be a list`);
    if (records.length > SCRIPT_LIMITS.batchRecords) {
      throw new OperationError(
        'batch_too_large',
        `svc.${what}: ${records.length} records of ${model} in one call, over the limit of ${SCRIPT_LIMITS.batchRecords}: save in smaller batches`,
      );
    }
    records.forEach((record: unknown, index) => {
      const id = isPlainObject(record) ? record['id'] : undefined;
      if (typeof id !== 'string' && typeof id !== 'number') {
        throw new OperationError(
          'invalid_record',
          `svc.${what}: record ${index} of ${model} has no id (a string or number is required)`,
        );
      }
    });
  }

  /** `record_validation` (deterministic: the check reads the records only). */
  function checkAgainstModel(list: Record<string, unknown>[], model: string): void {
    const invalid = checkRecords(list, model, validationModels!);
    if (invalid.length === 0) return;
    const lines = formatInvalidRecords(model, invalid);
    if (validation!.mode === 'refuse') {
      throw new OperationError(
        'invalid_record',
        `svc.batchSave: ${invalid.length} record(s) of ${model} break the model, nothing of this batch was saved: ${lines.slice(0, 20).join('; ')}`,
      );
    }
    for (const line of lines) bufferLog('warn', `record_validation: ${line}`);
  }

  const scope = context.scope;
  const writeScope = { ...scope, syncName: context.scriptName, runId: context.runId };

  async function write(what: 'batchSave' | 'batchDelete', records: unknown, model: string): Promise<void> {
    checkWrite(what, records, model);
    const list = records as Record<string, unknown>[];
    if (list.length === 0) return;
    if (what === 'batchSave' && validation && validationModels) checkAgainstModel(list, model);
    try {
      const summary = await run(
        what === 'batchSave' ? 'saveRecords' : 'deleteRecords',
        `${what} ${model} ×${list.length}`,
        [{ ...writeScope, model, records: list }],
      );
      addSummary(summaries, model, summary);
    } catch (error) {
      throw operationFailure(error, `${what} ${model}`);
    }
  }

  async function simple<K extends keyof RuntimeActivities>(
    name: K,
    summary: string,
    args: Parameters<RuntimeActivities[K]>,
    bookkeeping = false,
  ): Promise<Awaited<ReturnType<RuntimeActivities[K]>>> {
    try {
      return await run(name, summary, args, { bookkeeping });
    } catch (error) {
      throw operationFailure(error, summary);
    }
  }

  function chainOf(what: string): ExecutionChain {
    if (context.kind !== 'sync' || !context.chain) {
      throw new OperationError('invalid_operation', `svc.${what} is only available in sync scripts, not in actions`);
    }
    return context.chain;
  }

  /** svc.getCheckpoint / saveCheckpoint / clearCheckpoint (issue 32). */
  async function checkpoint(what: 'get' | 'save' | 'clear', value: Checkpoint | null): Promise<Checkpoint | null> {
    const chain = chainOf(`${what}Checkpoint`);
    if (what === 'get') {
      const found = await simple('getCheckpoint', 'getCheckpoint', [writeScope]);
      chain.read(found);
      return found;
    }
    // The cut comes when the script CALLS saveCheckpoint at a limit, and that save is refused: the run
    // continues from the checkpoint stored before it, whose page was saved whether the script saves
    // its checkpoint after its batchSave or before it (a save of `next` before the batchSave of the
    // page, cut right after, would lose that page). The cost: at most one page fetched again per cut.
    // Version 2 executions cut right after the save, as they were recorded.
    if (what === 'save' && !chain.legacy && chain.savedHere) {
      const ends = chain.afterSave(nearLimit(), progressMade(chain));
      if (ends && (context.cutAsksLedger !== true || mode !== 'local')) throw ends;
      // A save the script calls after a probe's cut (it caught the cut) sends nothing: no probe that
      // could stand and move the checkpoint past pages the ending execution will not save (a review).
      if (ends && probeCut) throw ends;
      if (ends) {
        // From version 9 the save still takes its step, as one that only stands if a worker executed it:
        // the limits are read on the workflow's clock and history length, which are later for a worker
        // that took a killed one's run over and executes again the steps its lost workflow task had run.
        // Ended here, it would continue the run from a checkpoint older than the one the killed worker
        // had saved past, and the pages between, stored, would be in no execution's counts (a hostile
        // review: 1,580 of 2,000 records counted). The step takes its index as any save does, so the
        // steps of a script that runs others beside it keep theirs (a review of an earlier draft, which
        // asked the ledger before the save, found that it moved them).
        // An operation the script starts beside it waits for its answer (run() below), then goes on
        // after a save that stood, as beside the killed worker's save, with the next index, or is refused
        // after one that did not, as a cut refuses it (a review: let through, a batchSave wrote a page the
        // next execution writes again). The probe itself goes through as bookkeeping.
        const continuing = chain.continuing;
        const probe = simple(
          'saveCheckpoint',
          'saveCheckpoint',
          [{ ...writeScope, onlyIfExecuted: true }, value],
          true,
        );
        // Two saves side by side are two probes (a review): an operation waits for both, and a save that
        // stood after the other's cut does not undo the cut (its branch would go on beside an execution
        // that is ending, its page counted nowhere).
        const waited = probe.then(
          () => undefined,
          () => undefined,
        );
        probing.add(waited);
        let stood: number;
        try {
          stood = await probe;
        } finally {
          probing.delete(waited);
        }
        if (stood === CHECKPOINT_NOT_EXECUTED || probeCut) {
          probeCut = true;
          chain.continuing = continuing;
          throw ends;
        }
        if (probing.size === 0) chain.continuing = false;
        chain.saved(value);
        return null;
      }
    }
    await simple('saveCheckpoint', `${what}Checkpoint`, [writeScope, what === 'save' ? value : null]);
    chain.saved(what === 'save' ? value : null);
    if (what === 'save' && chain.legacy) {
      // Version 2: ends the execution here when it is near a limit; the run continues from this very checkpoint.
      const ends = chain.afterSave(nearLimit(), progressMade(chain));
      if (ends) throw ends;
    }
    return null;
  }

  /**
   * Whether a ledgered step's row counts in the ledger's weight and in the end-of-run rule: a step
   * ledgered later than those rules (StepPolicy.unweighed) counts from SvcContext.cutAsksLedger on (a
   * hostile review: 300 getMetadata of 900 KB each kept 360 MB in the ledger while the run ran).
   */
  function weighs(policy: StepPolicy): boolean {
    return policy.unweighed !== true || context.cutAsksLedger === true;
  }

  /** What the chain's progress rule counts as records (runChain.ts progressed). */
  function progressMade(chain: ExecutionChain): boolean {
    return chain.legacy ? wroteAny(summaries) : savedAny(summaries);
  }

  /** svc.trackDeletesStart / trackDeletesEnd (issue 32): a pass over a model that may span executions. */
  async function trackDeletes(what: 'start' | 'end', model: unknown): Promise<void> {
    const chain = chainOf(`trackDeletes${what === 'start' ? 'Start' : 'End'}`);
    if (typeof model !== 'string' || !context.models.includes(model)) {
      throw new OperationError(
        'invalid_operation',
        `svc.trackDeletes${what === 'start' ? 'Start' : 'End'}: model ${JSON.stringify(model)} is not an output of sync ${context.scriptName} (outputs: ${context.models.join(', ')})`,
      );
    }
    if (what === 'start') return chain.trackStart(model);
    const earlier = chain.trackEnd(model);
    if (earlier === undefined) {
      // The pass began in an earlier run (resumed from its checkpoint): its saves are not this run's to count.
      bufferLog(
        'warn',
        `svc.trackDeletesEnd('${model}'): no trackDeletesStart('${model}') in this run, so no record is marked deleted`,
      );
      return;
    }
    const summary = await simple('markUnseenDeleted', `trackDeletesEnd ${model}`, [
      { ...writeScope, model, ...(earlier.length > 0 ? { alsoSeenBy: earlier } : {}) },
    ]);
    addSummary(summaries, model, summary);
  }

  /** The field's format lets a call name an integration and a connection: only the run's own are accepted. */
  function ownScope(what: string, providerConfigKey: unknown, connectionId: unknown): void {
    const named = (value: unknown): boolean => value !== undefined && value !== null && value !== '';
    for (const [value, own, kind] of [
      [providerConfigKey, scope.integrationId, 'integration'],
      [connectionId, scope.connectionId, 'connection'],
    ] as const) {
      if (named(value) && value !== own) {
        throw new OperationError(
          'scope_denied',
          `${what}: ${kind} ${JSON.stringify(value)} is not this run's (${own}); a script acts for its own integration and connection only`,
        );
      }
    }
  }

  // The run's integration as svc.getIntegration sees it, with the provider's default pagination: one
  // step per run at most.
  let integrationStep: Promise<IntegrationDescription> | undefined;
  function integration(): Promise<IntegrationDescription> {
    integrationStep ??= simple('getIntegration', 'getIntegration', [scope]);
    return integrationStep;
  }

  async function triggerAction(actionName: string, input: unknown): Promise<unknown> {
    const depth = (context.depth ?? 0) + 1;
    if (depth > SCRIPT_LIMITS.actionDepth) {
      throw new OperationError(
        'action_depth_exceeded',
        `svc.triggerAction('${actionName}'): actions nest at most ${SCRIPT_LIMITS.actionDepth} levels deep`,
      );
    }
    // Step names show an action's name only when it looks like one (the script chooses the string).
    const shownName = /^[A-Za-z0-9_.-]{1,64}$/.test(actionName) ? actionName : '…';
    const childSummary = readableSummary(`triggerAction ${shownName}`);
    const childInput = (definition: ActionDefinition): RunActionInput => ({
      definition,
      connectionId: scope.connectionId,
      input,
      depth,
      options: context.options,
      ledgerCut: true,
      taskCutByBody: true,
      cutAtGates: true,
      gatedChildrenAndClock: true,
    });
    const summary = `triggerAction ${shownName}`;
    let definition: ActionDefinition;
    try {
      definition = await run(
        'resolveAction',
        summary,
        [{ environmentId: scope.environmentId, integrationId: scope.integrationId, actionName }],
        // The child's start goes in the task completion with the markers: weighed as this step's (the input
        // one payload, claim-checked past the threshold).
        { commandBytes: (resolved) => resultMarkerBytes(childInput(resolved)) + summaryBytes(childSummary) },
      );
    } catch (error) {
      throw operationFailure(error, summary);
    }
    guardHistory();
    operations++;
    context.budget?.yielded();
    try {
      return await executeChild('runAction', {
        // A sync run's child action goes to the action queue, as API-triggered ones do; an action run's stays on its own.
        ...(context.kind === 'sync' ? { taskQueue: actionTaskQueue(workflowInfo().taskQueue) } : {}),
        workflowId: `action:${uuid4()}`,
        args: [childInput(definition)],
        staticSummary: childSummary,
      });
    } catch (error) {
      const cause = error instanceof ChildWorkflowFailure ? error.cause : undefined;
      if (cause instanceof ApplicationFailure && cause.type === 'action_script_failure') {
        throw new ActionError((cause.details?.[0] ?? {}) as Record<string, unknown>);
      }
      if (cause instanceof ApplicationFailure) {
        throw new OperationError(
          ...failureCode(cause, 'action_failed', `action ${actionName} failed: ${cause.message}`),
        );
      }
      throw error;
    } finally {
      context.onActive?.();
      context.budget?.resumed();
    }
  }

  let timers = 0;
  // The script's realm walks svc.paginate through these: one iterator per open id, and whether the
  // script has an on_page callback (then each page comes with what the callback is given).
  const paginations = new Map<number, { pages: AsyncIterator<Page<unknown>>; pageInfo: boolean }>();
  let paginationIds = 0;

  const runtime: OperationRuntime = {
    kind: context.kind,
    scope,
    step: <K extends StepName>(name: K, summary: string, args: StepArgs<K>): Promise<StepResult<K>> =>
      simple(name, summary, args),
    request,
    write: (what, records, model) => write(what, records, model as string),
    async log(level, message) {
      if (bufferLog(level, message)) await flushLogs();
    },
    triggerAction,
    ownScope,
    integration,
    checkpoint,
    trackDeletes,
    async openPagination(config, pageInfo) {
      // patched(): runs that started before the provider's default pagination replay without its step.
      // A run inside its sync entity asks no patched() (its version is in its input: see `inline`): the
      // marker of a patch asked amid a workflow task's local activities may fall in another task on
      // replay than it did live (a task heartbeat cuts where the load puts it), so the replay took the
      // step, or not, otherwise than the first attempt: its step numbers moved by one (a batchSave
      // answered with a request's ledger row: `rows[0].saved` is null) or the replay failed as
      // nondeterministic (test/chaos/scripts.test.ts).
      const defaults = latest || patched(PAGINATION_DEFAULTS_PATCH) ? (await integration()).pagination : undefined;
      const id = ++paginationIds;
      const pages = paginate(
        (method, page, index) => request(method, page, index),
        config as ProxyConfiguration,
        defaults,
        scope.integrationId,
      );
      paginations.set(id, { pages: pages[Symbol.asyncIterator](), pageInfo });
      return id;
    },
    async nextPage(id) {
      const walk = typeof id === 'number' ? paginations.get(id) : undefined;
      if (!walk) throw new OperationError('invalid_operation', 'svc.paginate: this pagination has ended');
      try {
        const step = await walk.pages.next();
        if (step.done) {
          paginations.delete(id as number);
          return { done: true, value: undefined };
        }
        return walk.pageInfo && step.value.onPage
          ? { done: false, value: step.value.items, onPage: step.value.onPage }
          : { done: false, value: step.value.items };
      } catch (error) {
        paginations.delete(id as number);
        throw error;
      }
    },
    // A timer is two events of the history (started, fired): counted like any operation, and a run
    // holds at most MAX_TIMERS at once.
    async sleep(ms) {
      if (timers >= MAX_TIMERS) {
        throw new OperationError('too_many_timers', `setTimeout: at most ${MAX_TIMERS} timers may wait at once`);
      }
      context.budget?.yielded();
      guardHistory();
      operations++;
      operationsSinceHistoryUpdate += 2;
      timers++;
      // Version 8: a timer started with no step in flight or waiting ends the workflow task that holds the
      // markers weighed so far (Temporal's core completes a task once no local activity is outstanding); it
      // fires in a task of its own. If no step was asked meanwhile, the task it fires in holds none of them.
      const quiet = gatedChildren && stepsInFlight.size === 0 && turnstile === undefined;
      const stepsBefore = nextStep;
      try {
        const timed = await scriptSleep(ms);
        if (timed && quiet && nextStep === stepsBefore && turnstile === undefined) {
          // Every step has ended: its markers are in earlier tasks; its ledger rows stay until a cut.
          for (let step = accountedUpTo; step < nextStep; step++) {
            accountedLedger += endedWeights.get(step)?.ledger ?? 0;
            endedWeights.delete(step);
          }
          accountedUpTo = nextStep;
          accountedMarkers = 0;
        }
      } finally {
        timers--;
        context.onActive?.();
        context.budget?.resumed();
      }
    },
  };

  // The dispatcher the realm calls: every operation of the table, its arguments checked first.
  const scriptOperations: ScriptOperations = {};
  for (const [name, operation] of Object.entries(SVC_OPERATIONS) as [string, AnySvcOperation][]) {
    const run = operation.run as (runtime: OperationRuntime, ...args: unknown[]) => Promise<unknown>;
    scriptOperations[name] = async (...args: unknown[]) => run(runtime, ...operation.check(args));
  }

  const shape: SvcShape = {
    connectionId: scope.connectionId,
    providerConfigKey: scope.integrationId,
    lastSyncDate: context.lastSyncDate?.toISOString(),
    webhook: context.webhook,
    members: REALM_MEMBERS,
  };

  return {
    shape,
    scriptOperations,
    bufferLog: (level, message) => {
      // A full buffer is written without waiting for the script (console.* returns nothing).
      if (bufferLog(level, message)) void flushLogs().catch(() => undefined);
    },
    summaries,
    operations: () => operations,
    now: scriptNow,
    flushLogs: () => flushLogs(true),
    async finish() {
      // Inside the entity the next run's first step forgets this one's (activities/runtime.ts beginRun).
      if (latest || ledgered === 0 || mode !== 'local' || !patched(TASK_CUT_PATCH)) return;
      // An ordinary activity runs after the task that scheduled it is recorded, markers and all: then
      // nothing of the ledger is needed any more.
      await endTask.forgetSteps();
    },
    step: (name, summary, args) => simple(name, summary, args, true),
    useExecutionLimits: ({ executionTimeLimitMs, maxExecutions, executionOperationLimit }) => {
      workerTimeLimit = executionTimeLimitMs;
      workerOperationLimit = executionOperationLimit;
      const max = context.options.maxExecutions ?? maxExecutions;
      if (context.chain && max !== undefined) context.chain.maxExecutions = max;
    },
  };
}
