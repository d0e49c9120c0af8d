/**
 * What the workflows receive: a deployed sync or action, and the input of one run. Plain data only
 * (it crosses Temporal's data converter and is imported by workflow code), so no classes and no Node.
 * The deploy step maps the compiled service.yaml onto these.
 */
import type { ModelConfig } from '../config/types.js';
import type { WebhookEvent } from './public.js';
import type { WriteSummary } from '../records/types.js';

export type SyncType = 'full' | 'incremental';

/** How a triggered run treats the records already in the cache. */
export type SyncMode = 'incremental' | 'full_refresh' | 'full_refresh_and_clear_cache';

/** One deployed sync of one integration in one environment (the same for every connection). */
export interface SyncDefinition {
  environmentId: string;
  /** The integration id (provider_config_key). */
  integrationId: string;
  syncName: string;
  syncType: SyncType;
  /** Interval between scheduled runs in milliseconds (`runs`, default 24h). */
  runsMs: number;
  /** `auto_start`: false creates the sync paused. */
  autoStart: boolean;
  /** `track_deletes`; only honoured when `syncType` is `full`. */
  trackDeletes: boolean;
  /** Output model names, in declaration order. */
  models: string[];
  /** Content hash of the deployed script bundle (script_bundles.hash). */
  scriptHash: string;
  /** Webhook types this sync handles (`webhook_subscriptions`). */
  webhookSubscriptions: string[];
  /**
   * `record_validation` when it is `warn` or `refuse`: the output models and every model they refer
   * to, for checking saved records (src/config/checkRecord.ts). Absent when off.
   */
  recordValidation?: { mode: 'warn' | 'refuse'; models: ModelConfig[] } | undefined;
}

/** One deployed action of one integration in one environment. */
export interface ActionDefinition {
  environmentId: string;
  integrationId: string;
  actionName: string;
  scriptHash: string;
}

/**
 * Whether `svc` operations run as local activities (one marker event each, input not stored, the
 * default) or as normal activities (six events each, visible as scheduled/started/completed).
 */
export type OperationMode = 'local' | 'normal';

/** Tunables of a run that tests and benchmarks change; production uses the defaults. */
export interface RunOptions {
  operationMode?: OperationMode;
  /** First retry delay of a request with `retries` > 0, in ms; doubles on each attempt. @default 1000 */
  retryInitialIntervalMs?: number;
  /** Longest back-off between two attempts of a request, in ms. @default 60000 */
  retryMaximumIntervalMs?: number;
  /**
   * Events after which the run stops itself with `run_history_limit` (Temporal's hard limit is
   * 51,200). Lower it only to test the guard. @default 48000
   */
  historyEventBudget?: number;
  /**
   * A sync run that checkpoints continues in a next execution after its first saveCheckpoint past this
   * many ms of its execution (issue 32; docs/scripts.md "Resumable syncs"). Unset: only the history
   * budget ends an execution.
   */
  executionTimeLimitMs?: number;
  /** Executions one sync run may span (SYNC_RUN_MAX_EXECUTIONS of the loading worker otherwise). */
  maxExecutions?: number;
  /**
   * A sync run that checkpoints continues in a next execution after its first saveCheckpoint past this
   * many svc operations of its execution (SYNC_EXECUTION_OPERATION_LIMIT of the loading worker otherwise).
   */
  executionOperationLimit?: number;
}

export interface RunSyncInput {
  definition: SyncDefinition;
  connectionId: string;
  mode: SyncMode;
  /** ISO instant of the start of the last successful run; absent on the first run and on full runs. */
  lastSyncDate?: string | undefined;
  /** The webhook that triggered this run, when one did. */
  webhook?: QueuedWebhook | undefined;
  options?: RunOptions | undefined;
}

/** A deployed bundle as the run workflow evaluates it (src/runtime/scriptLoader.ts). */
export interface LoadedScript {
  /** The bundle's content hash (its definition's scriptHash). */
  hash: string;
  /** The bundle's code with loop protection inserted (src/runtime/instrument.ts). */
  code: string;
  /** The name of the loop-protection function the code calls. */
  budget: string;
  /**
   * The loading worker's SYNC_EXECUTION_TIME_LIMIT in ms (issue 32): a sync run's execution continues
   * in a next one after its first saveCheckpoint past it, unless the run's options set their own.
   * Absent: no limit (`none`, or a bundle loaded by an older worker).
   */
  executionTimeLimitMs?: number;
  /** The loading worker's SYNC_RUN_MAX_EXECUTIONS (absent: an older worker; the default applies). */
  maxExecutions?: number;
  /**
   * The loading worker's SYNC_EXECUTION_OPERATION_LIMIT. Absent (a history recorded before it existed,
   * replayed as it ran): no limit.
   */
  executionOperationLimit?: number;
  /**
   * The run's integration's provider (`svc.provider`, the format's `nango.provider`), looked up only
   * for a bundle whose code names `provider` (scriptLoader.ts namesProvider). Absent otherwise, and
   * in a history recorded before it existed.
   */
  provider?: string;
}

/**
 * An inbound webhook as the API queues it for one sync (src/webhooks/inboundQueue.ts): what the sync's
 * entity workflow keeps and hands its run. A payload larger than the queue's inline size is not here
 * (`stored`): it stays in the queue, and the run loads it by `queueId`, so the entity's memory and
 * history hold a few hundred bytes per webhook whatever the body's size. The script sees
 * `{ type, payload, receivedAt }` (WebhookEvent) either way.
 */
export interface QueuedWebhook extends WebhookEvent {
  /** The queue entry; the run's end removes it. Absent on webhooks queued before the queue existed. */
  queueId?: string | undefined;
  /** The payload is in the queue entry only (`payload` is undefined here). */
  stored?: boolean | undefined;
}

export interface RunActionInput {
  definition: ActionDefinition;
  connectionId: string;
  input: unknown;
  /** svc.triggerAction levels above this run (0 or absent for a run the API started). */
  depth?: number | undefined;
  options?: RunOptions | undefined;
  /**
   * The bundle itself, when the API that starts the action hands it over (a small one,
   * src/temporal/syncControl.ts): the run then takes no `loadScript` step. Used only by a run without
   * a parent (one a Temporal client started) and only when its hash is the definition's.
   */
  script?: LoadedScript | undefined;
  /**
   * The run forgets its step ledger's rows past LEDGER_KEPT_BYTES (workflows/svc.ts). Set by the code
   * that starts the run, so that an action started before it replays without the cut, with no
   * `patched()` (asked after a local activity, its marker can land in the next workflow task).
   */
  ledgerCut?: boolean | undefined;
  /**
   * The run's task cut weighs a response by its body as recorded, not its declared content-length
   * (SvcContext.taskCutByBody, workflows/svc.ts). Set by the code that starts the run, as ledgerCut;
   * a flag of its own, since actions recorded with ledgerCut and the declared weight exist.
   */
  taskCutByBody?: boolean | undefined;
  /**
   * The run decides its task and ledger cuts at gates, on weights the history fixes (SvcContext.cutAtGates,
   * workflows/svc.ts). Set by the code that starts the run, as ledgerCut; a flag of its own.
   */
  cutAtGates?: boolean | undefined;
  /**
   * With cutAtGates: the gates also weigh each child action's start, and the script's clock stands
   * still while steps are in flight (SvcContext.gatedChildrenAndClock, workflows/svc.ts). Set by the code
   * that starts the run, as ledgerCut; a flag of its own.
   */
  gatedChildrenAndClock?: boolean | undefined;
}

/** What a finished sync run reports: per model, the records it added, updated and deleted. */
export interface SyncRunResult {
  /** Workflow id of the run; also the run id the records cache stores. */
  runId: string;
  mode: SyncMode;
  /** Whether the run saw the whole data set (sync type full, or a full refresh). */
  full: boolean;
  startedAt: string;
  finishedAt: string;
  models: Record<string, WriteSummary>;
  /** Records of each model in the cache after the run, deleted ones excluded. */
  recordCounts: Record<string, number>;
  /** How many `svc` operations the run took (requests, saves, …): the history budget in use. */
  operations: number;
  /**
   * A run that continued past one execution (issue 32): the run id of each of its executions, oldest
   * first, the last the one that finished it. Absent for a run of one execution.
   */
  executions?: string[] | undefined;
  /** Set only on the way from an execution that ends so that its run continues to the entity (workflows/runChain.ts). */
  continuation?: ChainHandOff | undefined;
}

/** What an execution of a run that continues hands the next one (workflows/runChain.ts). */
export interface ChainHandOff {
  /** The checkpoint as the execution left it (src/syncs/checkpoint.ts checkpointKey), for the next one's progress check. */
  checkpoint: string | null;
  /** Per model, the index in the chain's executions of the one whose script called trackDeletesStart. */
  tracking: Record<string, number>;
  /** The run began from a checkpoint an earlier run saved: it did not see the whole data set itself. */
  inherited: boolean;
  /**
   * Digests of the checkpoints the run's executions began from and first saved (workflows/runChain.ts
   * checkpointDigest): a later execution that ends at or goes back to one of them did not progress.
   * Absent from executions of version 2.
   */
  seen?: string[];
}

export type SyncStatusName = 'running' | 'idle' | 'paused' | 'failed';

/** The answer of the sync entity workflow's `status` query. */
export interface SyncStatus {
  status: SyncStatusName;
  /** Whether the sync is paused (a paused sync can still be running a triggered execution). */
  paused: boolean;
  syncName: string;
  connectionId: string;
  syncType: SyncType;
  frequencyMs: number;
  /** When the next scheduled run starts; null while paused. */
  nextScheduledSyncAt: string | null;
  /** When the last execution finished, successfully or not. */
  finishedAt: string | null;
  latestResult: SyncRunResult | null;
  /** Message and code of the last failure, when the last execution failed. */
  latestError: { code: string; message: string } | null;
  recordCount: Record<string, number>;
  /** Executions since the entity started. */
  executions: number;
}

/**
 * Workflow task timeout of run workflows. Local activities complete within a workflow task, which
 * Temporal "heartbeats" (completes, recording their results) at 80% of this timeout: so after a
 * worker crash at most the steps of the last 4 s are repeated, and another worker takes over the run
 * 5 s after the crash. (The default, 10 s, doubles both.)
 */
/**
 * What one run of a script may use (docs/scripts.md "Limits"). Breaking a limit fails the operation
 * (or the run) with the code named, never the worker.
 */
export const SCRIPT_LIMITS = {
  /** JSON bytes of the arguments of one svc call (a batchSave's records, a request body): `payload_too_large`. */
  callBytes: 16 * 1024 * 1024,
  /** JSON bytes of one record given to batchSave/batchDelete: `record_too_large`. */
  recordBytes: 1024 * 1024,
  /** Records in one batchSave/batchDelete call: `batch_too_large`. */
  batchRecords: 10_000,
  /** Characters of one svc.log or console line: longer lines are cut at the call. */
  logLineBytes: 64 * 1024,
  /** Buffer memory (ArrayBuffer, typed arrays) the script holds at once: `script_memory_limit`. */
  bufferBytes: 256 * 1024 * 1024,
  /** One buffer allocation: `script_memory_limit`. */
  allocationBytes: 64 * 1024 * 1024,
  /** Nested svc.triggerAction levels below the run the API or a schedule started: `action_depth_exceeded`. */
  actionDepth: 4,
} as const;

/**
 * Characters of a log line kept past SCRIPT_LIMITS.logLineBytes in the run: the log store redacts the
 * connection's credentials first and cuts at the limit after, so a credential across the limit is
 * found whole.
 */
export const LOG_REDACTION_MARGIN = 8 * 1024;

/**
 * A run's workflow task timeout: how long a run whose worker died waits before another worker may take
 * it (docs/architecture.md "Recovery"). Above ISOLATE_TIMEOUT_MS by 1 s.
 */
export const RUN_WORKFLOW_TASK_TIMEOUT_MS = 4000;
/**
 * The runtime worker's isolate execution timeout: one activation of a run may compute this long.
 * Shorter than RUN_WORKFLOW_TASK_TIMEOUT_MS, so that the failure it causes is still recorded.
 */
export const ISOLATE_TIMEOUT_MS = 3000;

/**
 * Blame for a dead worker (src/temporal/scriptThreads.ts, src/sandbox/hostRealm.ts): each workflow
 * thread keeps the id of the run it is executing in a file of THREAD_MARK_BYTES bytes in a folder
 * (SERVICE_THREAD_MARKS_DIR, or one per process: src/service.ts); the signal records an incident in
 * the history of a run that was executing when its worker died. The worker process tells its workflow
 * threads the folder and the prefix of their files, `<pid>-<nonce>`, through this worker_threads
 * environment data (setEnvironmentData) before they start.
 */
export const THREAD_MARKS_DATA_KEY = 'integration-service.threadMarks';
export const THREAD_MARK_BYTES = 1024;
export const SCRIPT_INCIDENT_SIGNAL = 'scriptIncident';

/**
 * A sync run runs inside its sync entity's execution (issue 31): the runaway watchdog cannot terminate
 * it without ending the sync, so it sends the entity this signal with its verdict, naming the
 * execution (Temporal's run id) whose run it stops; the entity stops the run's script there and records
 * the run as failed with the verdict's code and message.
 */
export const RUNAWAY_VERDICT_SIGNAL = 'runawayVerdict';

export interface RunawayVerdictSignal {
  /** Temporal's run id of the entity execution whose run is stopped; a verdict for another is ignored. */
  runId: string;
  code: 'script_timeout' | 'script_out_of_memory' | 'script_runaway';
  message: string;
}

/**
 * What the entity tells the worker process that executes its run (workflow sinks: nothing is written
 * to the history): the run is under way on this worker, and when it has ended. The worker's run watch
 * (src/temporal/runWatch.ts) checks the runs under way for a workflow task that keeps failing.
 */
// A type, not an interface: the SDK's Sinks constraint is an index signature.
export type RunWatchSinks = {
  runWatch: {
    active(): void;
    ended(): void;
  };
};

/**
 * The run model of the sync entity workflow (workflows/manageSync.ts), carried in its input: 2, each
 * run inside the entity's own execution (issue 31); 3, the same with the chain rules of the hostile
 * review of issue 32 (workflows/runChain.ts: progress, the cut at a saveCheckpoint call, at most
 * SYNC_RUN_MAX_EXECUTIONS executions; a pause stops a continuing run); 4, the same with the run's
 * script loaded by its `beginRun` step instead of a `loadScript` step of its own (one local activity
 * less per run); 5, the same with the step ledger's bytes cut (workflows/svc.ts LEDGER_KEPT_BYTES); 6,
 * the same with the task cut weighing a response by its body as recorded (workflows/svc.ts
 * TASK_RESULT_BYTES), not its declared content-length; 7, the same with both cuts decided at gates
 * (SvcContext.cutAtGates), so that a run with steps in flight at once replays and no task holds more
 * than ~3 MiB of its markers; 8, the same with child action starts weighed and the script's clock still
 * while steps are in flight (SvcContext.gatedChildrenAndClock); 9, the same with the step ledger asked
 * before a saveCheckpoint ends an execution at a limit (SvcContext.cutAsksLedger). Executions that carry
 * none run each run as a child `runSync` (version 1); executions of 1 to 8 finish their run as recorded
 * and continue as new in this one.
 */
export const SYNC_ENTITY_VERSION = 9;

/** SYNC_EXECUTION_OPERATION_LIMIT by default: svc operations one execution of a checkpointing sync run takes. */
export const DEFAULT_EXECUTION_OPERATION_LIMIT = 1000;

/** The first entity version with the chain rules of issue 32's hostile review (see SYNC_ENTITY_VERSION). */
export const CHAIN_RULES_VERSION = 3;

/** The first entity version whose `beginRun` step loads the run's script (see SYNC_ENTITY_VERSION). */
export const SCRIPT_IN_BEGIN_RUN_VERSION = 4;

/** The first entity version whose runs forget their steps past LEDGER_KEPT_BYTES (see SYNC_ENTITY_VERSION). */
export const LEDGER_CUT_VERSION = 5;

/** The first entity version whose task cut weighs a response by its recorded body (see SYNC_ENTITY_VERSION). */
export const TASK_CUT_BY_BODY_VERSION = 6;

/** The first entity version whose runs decide their cuts at gates (see SYNC_ENTITY_VERSION). */
export const CUT_AT_GATES_VERSION = 7;

/** The first entity version whose gates weigh child starts and hold the script's clock (see SYNC_ENTITY_VERSION). */
export const GATED_CHILDREN_AND_CLOCK_VERSION = 8;

/** The first entity version that asks the step ledger before a saveCheckpoint ends an execution (see SYNC_ENTITY_VERSION). */
export const CUT_ASKS_LEDGER_VERSION = 9;
