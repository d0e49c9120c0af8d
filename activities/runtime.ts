/**
 * The activities behind the script helper `svc`: every operation of a script that touches the outside
 * world runs here, as one durable step of its run (workflows/svc.ts schedules them).
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { Pool, PoolClient } from '../src/db/pool.js';
import { stopIfRunaway, type RunawayVerdict } from '../src/temporal/runaway.js';
import {
  createRunAuthorities,
  requireConnection,
  requireEnvironment,
  requireIntegration,
  requireSyncRun,
  runIdOf,
  scopeDenied,
  type RunAuthorities,
  type RunAuthority,
} from '../src/temporal/runAuthority.js';
import type { ConnectionScope, ConnectionService, EnvironmentVariableStore } from '../src/connections/types.js';
import { isServiceError, type RunErrorCode } from '../src/errors.js';
import type { RecordStore, SyncScope, WriteSummary } from '../src/records/types.js';
import type { ActionDefinition, LoadedScript } from '../src/runtime/definitions.js';
import { createScriptLoader, namesProvider } from '../src/runtime/scriptLoader.js';
import { sendRequest } from '../src/runtime/http.js';
import { serializedJson } from '../src/runtime/localActivityInput.js';
import type { ScriptLogContext, ScriptLogEntry, ScriptLogStore } from '../src/runtime/logStore.js';
import type { ConnectionRecord, EnvironmentVariable } from '../src/runtime/public.js';
import type { ScriptStore } from '../src/runtime/scriptStore.js';
import { createStepLedger, hasLaterStep, onceInTransaction, type StepKey } from '../src/steps/stepLedger.js';
import { inTransaction } from '../src/db/pool.js';
import { assertRunOwnsSync } from '../src/records/postgresRecordStore.js';
import { CHECKPOINT_NOT_EXECUTED, type Checkpoint } from '../src/syncs/checkpoint.js';
import { CheckpointStore } from '../src/syncs/checkpointStore.js';
import type { Encryptor } from '../src/connections/encryption.js';
import { whileOwnServicesReturn } from '../src/runtime/ownServices.js';
import type { HttpRequestInput, IntegrationDescription, RecordedResponse } from '../src/runtime/svcTypes.js';
import type { InboundWebhookQueue } from '../src/webhooks/inboundQueue.js';
import type { RunSlots } from '../src/runtime/runSlots.js';

/** Finds the deployed action a script's `svc.triggerAction` names; null when there is none. */
export type ActionResolver = (options: {
  environmentId: string;
  integrationId: string;
  actionName: string;
}) => Promise<ActionDefinition | null>;

export interface RuntimeDeps {
  db: Pool;
  records: RecordStore;
  connections: ConnectionService;
  environmentVariables: EnvironmentVariableStore;
  scripts: ScriptStore;
  logs: ScriptLogStore;
  resolveAction: ActionResolver;
  /** A client of the same namespace: the runaway watchdog inspects and terminates runs with it. */
  temporal: Client;
  /** Encrypts the step ledger's recorded responses (src/steps/stepLedger.ts). */
  encryptor: Encryptor;
  /** Verifies which run calls an activity (src/temporal/runAuthority.ts); built from `temporal` when omitted. */
  authorities?: RunAuthorities | undefined;
  /** Inbound webhooks waiting for their syncs: a webhook run loads its payload from there. */
  inboundQueue?: InboundWebhookQueue | undefined;
  /** The runs each environment has going: a sync run takes a slot as it begins (the entity gives it back). */
  runSlots?: RunSlots | undefined;
  /** Sync runs one environment may have going at once. @default 100 */
  syncRunConcurrency?: number | undefined;
  /** SYNC_EXECUTION_TIME_LIMIT in ms, handed to each run with its script (LoadedScript). Absent: none. */
  executionTimeLimitMs?: number | undefined;
  /** SYNC_RUN_MAX_EXECUTIONS, handed to each run with its script (LoadedScript). Absent: the default. */
  maxExecutions?: number | undefined;
  /** SYNC_EXECUTION_OPERATION_LIMIT, handed to each run with its script (LoadedScript). Absent: none. */
  executionOperationLimit?: number | undefined;
}

// A sync run past its environment's bound tries to begin again after this (its step is tried 10
// times: about 90 s in all), then fails with environment_busy. Its slot lapses after SYNC_SLOT_TTL_MS
// if the entity that would give it back is gone (its connection deleted mid-run). The bound is the
// step's own (its attempt), not its caller's retry policy: a run inside its sync entity begins with a
// step retried through a restarting Postgres for as long as that takes (workflows/manageSync.ts).
const SYNC_SLOT_RETRY_MS = 10_000;
const SYNC_SLOT_ATTEMPTS = 10;
const SYNC_SLOT_TTL_MS = 12 * 3600_000;

// How often the watchdog looks at a running sync run: a runaway run is stopped within about
// RUNAWAY_ATTEMPTS workflow-task attempts (~10 s) plus this.
const WATCH_INTERVAL_MS = 5000;

export interface RecordWriteInput extends SyncScope {
  model: string;
  runId: string;
  records: Record<string, unknown>[];
}

/**
 * Where a step stands in its run (workflows/svc.ts): its index, the same on every replay. Absent in
 * steps scheduled by workflow code older than the ledger. (Workers before this version also sent the
 * index below which the ledger could forget; it is no longer sent, and ignored: local activities run
 * in the worker that runs their workflow, so no worker of this version receives it.)
 */
export interface StepRef {
  index: number;
  /**
   * Scheduled by the instance that ran the run from its first workflow task: no other instance can
   * have executed the step, so its first attempt as a local activity skips the ledger lookup.
   */
  fresh?: boolean | undefined;
}

/** Whether the running step may have been executed before (then its outcome may be in the ledger). */
function mayRepeat(step: StepRef | undefined): boolean {
  const info = Context.current().info;
  return !(step?.fresh === true && info.isLocal && info.attempt === 1);
}

/**
 * What a sync entity's run was chosen from (workflows/manageSync.ts): the signals the execution had
 * applied, and the time of the choice.
 */
export interface RunCommit {
  events: number;
  at: number;
  /** The time the execution's first workflow task began (its initial state's). */
  created: number;
}

/**
 * What `beginRun` answers a sync entity's run: the commit, and from run model version 4 on the run's
 * script (the `loadScript` step's answer, in the same step: one local activity less per run, issue 31).
 */
export type BegunRun = RunCommit & { script?: LoadedScript };

/**
 * Runs `work` and translates a ServiceError it throws into Temporal's taxonomy: an ApplicationFailure
 * whose type is the code, with the error's details, retried only when the error says trying again can
 * help. Only what runs inside it is translated, not the whole activity: anything thrown outside it, or
 * any other error, reaches Temporal as it is (an ApplicationFailure typed by the error's class name,
 * retried by the activity's retry policy).
 */
export async function translated<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (isServiceError(error)) {
      throw ApplicationFailure.create({
        type: error.code,
        message: error.message,
        nonRetryable: !error.retryable,
        details: error.details === undefined ? [] : [error.details],
      });
    }
    throw error;
  }
}

/** The verified run that scheduled the running activity (src/temporal/runAuthority.ts). */
export async function callingRun(authorities: RunAuthorities): Promise<RunAuthority> {
  const info = Context.current().info;
  const execution = info.workflowExecution;
  if (!execution?.runId || !info.workflowType) {
    throw scopeDenied(`activity ${info.activityType} was not scheduled by a workflow`);
  }
  return authorities.verify({
    workflowId: execution.workflowId,
    runId: execution.runId,
    workflowType: info.workflowType,
  });
}

export function createRuntimeActivities(deps: RuntimeDeps) {
  const { db, records } = deps;
  const authorities = deps.authorities ?? createRunAuthorities({ client: deps.temporal });
  const caller = () => callingRun(authorities);

  const ledger = createStepLedger({ db, encryptor: deps.encryptor });

  /**
   * The ledger key of the running step (src/runtime/stepLedger.ts). Steps of workflow code older than
   * the ledger are keyed by their activity sequence number, above any index the ledger gives.
   */
  function stepKey(step: StepRef | undefined): StepKey {
    const info = Context.current().info;
    const runId = info.workflowExecution?.runId ?? '';
    return { runId, step: step ? step.index : 1_000_000_000 + Number(info.activityId) };
  }

  /**
   * A read whose answer goes to the step ledger with the run's next write (or before its next request, or
   * a moment later): executed again after a crash, it answers what the first execution read. A step
   * scheduled by workflow code older than the ledgered reads (no StepRef) reads as it did.
   */
  async function ledgeredRead<T>(step: StepRef | undefined, read: () => Promise<T>): Promise<T> {
    if (step === undefined) return read();
    const key = stepKey(step);
    const recalled = mayRepeat(step) ? await ledger.recall<T>(key) : undefined;
    if (recalled?.ok) return recalled.value;
    const value = await read();
    ledger.defer(key, { ok: true, value });
    return value;
  }

  const scripts = createScriptLoader(deps.scripts);
  const checkpoints = new CheckpointStore(db);

  /**
   * The deployed bundle with this content hash, with loop protection inserted
   * (src/runtime/instrument.ts): `budget` is the name of the function its loops call. Only a bundle
   * deployed to the calling run's environment is handed out. With the run's integration, a bundle that
   * names `provider` gets the integration's provider too (svc.provider), as it is when the run loads.
   */
  async function loadScript(hash: string, integrationId?: string): Promise<LoadedScript> {
    const run = await translated(caller);
    const script = await translated(() => scripts.load(hash, run.environmentId));
    const provider =
      integrationId !== undefined && namesProvider(script)
        ? await translated(async () => {
            const described = await deps.connections.describeIntegration({
              environmentId: run.environmentId,
              integrationId,
            });
            return described.integration.provider;
          })
        : undefined;
    const limit = deps.executionTimeLimitMs;
    const max = deps.maxExecutions;
    const operations = deps.executionOperationLimit;
    return {
      ...script,
      ...(limit === undefined ? {} : { executionTimeLimitMs: limit }),
      ...(max === undefined ? {} : { maxExecutions: max }),
      ...(operations === undefined ? {} : { executionOperationLimit: operations }),
      ...(provider === undefined ? {} : { provider }),
    };
  }

  return {
    loadScript,

    /**
     * One attempt of an HTTP request with the connection's credentials (src/runtime/http.ts). Its
     * outcome goes to the step ledger as soon as it is known: a step executed again after a crash
     * answers from there and does not send the request again.
     */
    async httpRequest(scope: ConnectionScope, request: HttpRequestInput, step?: StepRef): Promise<RecordedResponse> {
      // Inside translated: a refused scope fails the step as `scope_denied`, final, not a retried error.
      // Before the request goes out, a Postgres or Temporal restart is waited out (src/runtime/ownServices.ts).
      await translated(() => whileOwnServicesReturn(async () => requireConnection(await caller(), scope)));
      const key = stepKey(step);
      const recalled = mayRepeat(step)
        ? await translated(() => whileOwnServicesReturn(() => ledger.recall<RecordedResponse>(key)))
        : undefined;
      if (recalled?.ok === true) return recalled.value;
      if (recalled?.ok === false) {
        throw ApplicationFailure.create({ ...recalled.failure, nonRetryable: true });
      }
      // The run's earlier answers are recorded before this request goes out: a crash then repeats at
      // most this one (src/steps/stepLedger.ts).
      await ledger.flush(key.runId).catch((error: unknown) => {
        console.warn(`[worker] step ledger: could not record the steps before step ${key.step}: ${String(error)}`);
      });
      let result: RecordedResponse;
      try {
        result = await sendRequest(
          { authorizeRequest: (...args) => whileOwnServicesReturn(() => deps.connections.authorizeRequest(...args)) },
          scope,
          request,
        );
      } catch (error) {
        // A final answer (a 4xx, a refused request) is an outcome too; a retryable one is tried again anyway.
        if (error instanceof ApplicationFailure && error.nonRetryable) {
          const failure = {
            type: error.type ?? 'http_error',
            message: error.message,
            details: [...(error.details ?? [])],
          };
          ledger.defer(key, { ok: false, failure });
        }
        throw error;
      }
      // Recorded with the run's next record write, before its next request, or a moment later
      // (src/steps/stepLedger.ts): no round trip of its own on the way back to the script. The answer
      // is serialized once, for the ledger's copy and for the step's result (the payload the default
      // converter would make: the same bytes in the history). Its body is one string (HttpAnswer): no
      // API's answer is parsed or rebuilt on this thread, which every environment shares.
      const json = JSON.stringify(result);
      ledger.deferJson(key, `{"ok":true,"value":${json}}`);
      return serializedJson(json) as RecordedResponse;
    },

    /** Exactly once per step: the ledger row is written in the records' own transaction. */
    async saveRecords(input: RecordWriteInput, step?: StepRef): Promise<WriteSummary> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        const key = stepKey(step);
        return ledger.withDeferred(key.runId, (earlier) =>
          records.saveRecords({ ...input, step: { ...key, earlier } }),
        );
      });
    },

    async deleteRecords(input: RecordWriteInput, step?: StepRef): Promise<WriteSummary> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        const key = stepKey(step);
        return ledger.withDeferred(key.runId, (earlier) =>
          records.deleteRecords({
            ...input,
            records: input.records.map((record) => ({ id: record['id'] })),
            step: { ...key, earlier },
          }),
        );
      });
    },

    /**
     * `track_deletes` after a successful full run, and `svc.trackDeletesEnd`. `alsoSeenBy`: the earlier
     * executions of the same run (issue 32), which can only be executions of the calling sync entity.
     */
    async markUnseenDeleted(
      input: SyncScope & { model: string; runId: string; alsoSeenBy?: string[] | undefined },
      step?: StepRef,
    ): Promise<WriteSummary> {
      return translated(async () => {
        const run = await caller();
        requireSyncRun(run, input);
        const entityRuns = `${run.workflowId}:run:`;
        for (const earlier of input.alsoSeenBy ?? []) {
          if (run.workflowType !== 'manageSync' || !earlier.startsWith(entityRuns)) {
            throw scopeDenied(
              `run ${input.runId} may count as seen only the saves of its own earlier executions, not ${earlier}`,
            );
          }
        }
        const key = stepKey(step);
        return ledger.withDeferred(key.runId, (earlier) =>
          records.markUnseenDeleted({ ...input, step: { ...key, earlier } }),
        );
      });
    },

    /**
     * `sync_mode: full_refresh_and_clear_cache`: erases this connection's records of the sync. In the
     * ledger too: erasing again after the run saved records would lose them.
     */
    async clearRecords(input: SyncScope & { runId?: string }, step?: StepRef): Promise<number> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        const key = stepKey(step);
        const recalled = await ledger.recall<number>(key);
        let erased: number;
        if (recalled?.ok) erased = recalled.value;
        else {
          erased = await records.eraseSync({
            environmentId: input.environmentId,
            integrationId: input.integrationId,
            syncName: input.syncName,
            connectionId: input.connectionId,
          });
          await ledger.remember(key, { ok: true, value: erased });
        }
        // The erase left the fence to no run: this run takes it again (a run in its entity began before
        // it cleared; one of its own workflow begins after).
        if (input.runId !== undefined) await records.beginRun({ ...input, runId: input.runId });
        return erased;
      });
    },

    /**
     * svc.getCheckpoint (issue 32). Its answer goes to the step ledger with the run's next write: a step
     * executed again after a crash answers what the first execution read, even if a later step of the
     * first attempt saved another checkpoint since.
     */
    async getCheckpoint(input: SyncScope & { runId: string }, step?: StepRef): Promise<Checkpoint | null> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        const key = stepKey(step);
        const recalled = mayRepeat(step) ? await ledger.recall<Checkpoint | null>(key) : undefined;
        if (recalled?.ok) return recalled.value;
        const stored = await checkpoints.get(input);
        const value = stored?.checkpoint ?? null;
        ledger.defer(key, { ok: true, value });
        return value;
      });
    },

    /**
     * svc.saveCheckpoint and svc.clearCheckpoint (`checkpoint` null): once per step, in the transaction
     * that takes the ledger row, fenced like a record write (a superseded run may not move it).
     */
    async saveCheckpoint(
      input: SyncScope & { runId: string; onlyIfExecuted?: boolean },
      checkpoint: Checkpoint | null,
      step?: StepRef,
    ): Promise<number> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        const key = stepKey(step);
        const save = async (client: PoolClient): Promise<number> => {
          await assertRunOwnsSync(client, input, input.runId);
          if (checkpoint === null) return (await checkpoints.clear(input, client)) ? 1 : 0;
          return checkpoints.save(input, checkpoint, client);
        };
        if (input.onlyIfExecuted === true) {
          // At a limit (workflows/svc.ts, version 9): what a worker recorded of this very save, else
          // nothing. The step is claimed as not executed, so a save of it by a worker that is frozen,
          // not dead, and continues later stores nothing either (it waits for this transaction, then
          // finds the claim). Only a save's result counts (a row version, or 0/1): another operation's
          // row at this index (a path that differed) is not one. But a worker that went past this save
          // without recording it (a step beside it, Promise.all or a save not awaited, was recorded at a
          // later index) ran on from here: the save is executed now and stands, so those steps are
          // answered as that worker ran them (a hostile review: ending here counted its page nowhere).
          return ledger.withDeferred(key.runId, (earlier) =>
            inTransaction(db, async (client) => {
              const result: unknown = await onceInTransaction(client, { ...key, earlier }, async () =>
                (await hasLaterStep(client, key, CHECKPOINT_NOT_EXECUTED)) ? save(client) : CHECKPOINT_NOT_EXECUTED,
              );
              return typeof result === 'number' && result >= 0 ? result : CHECKPOINT_NOT_EXECUTED;
            }),
          );
        }
        return ledger.withDeferred(key.runId, (earlier) =>
          inTransaction(db, (client) => onceInTransaction(client, { ...key, earlier }, () => save(client))),
        );
      });
    },

    /** Makes this run the one that owns the sync's records (fences off writes of an older run). */
    /** What the calling entity execution's run committed to, if it began one (beginRun). */
    async committedRun(): Promise<RunCommit | null> {
      return translated(async () => {
        const run = await caller();
        if (run.workflowType !== 'manageSync') throw scopeDenied(`workflow ${run.workflowId} runs no sync entity`);
        return ledger.committed<RunCommit>(run.runId);
      });
    },

    /**
     * Scheduled as an ordinary activity, so it runs only once the workflow task that scheduled it is
     * recorded, with every earlier step's result: the ledger forgets the run's steps below `below`
     * (all of them when absent). workflows/svc.ts uses it to end a task and at the end of a sync run.
     */
    async forgetSteps(below?: number): Promise<void> {
      return translated(async () => {
        const run = await caller();
        await ledger.forget(run.runId, below ?? 2_147_483_647);
      });
    },

    /**
     * Takes one of the environment's sync run slots (SYNC_RUN_CONCURRENCY_PER_ENVIRONMENT) and makes this
     * run the one that owns the sync's records. For a run inside its sync entity (issue 31), two more
     * things. It ends the step ledger's keeping of the entity's previous run: that execution has closed,
     * so Temporal holds all of its steps; which run that was comes from the fence (written only by
     * verified runs of this sync), never from the workflow. And with `commit`, it records what the run
     * was chosen from (workflows/manageSync.ts RunCommit) unless its first attempt did, and answers the
     * first attempt's.
     */
    async beginRun(
      input: SyncScope & { runId: string },
      commit?: RunCommit,
      scriptHash?: string,
    ): Promise<BegunRun | undefined> {
      const run = await translated(async () => {
        const run = await caller();
        requireSyncRun(run, input);
        return run;
      });
      const limit = deps.syncRunConcurrency ?? 100;
      const slot = await deps.runSlots?.take({
        environmentId: input.environmentId,
        kind: 'sync',
        runId: input.runId,
        limit,
        ttlMs: SYNC_SLOT_TTL_MS,
        // A run inside its entity keeps the slot of the entity's previous execution (a run that
        // continues holds one slot across its executions).
        ...(run.workflowType === 'manageSync' ? { handOverFrom: run.workflowId } : {}),
      });
      if (slot === false) {
        throw ApplicationFailure.create({
          type: 'environment_busy' satisfies RunErrorCode,
          message: `the environment has ${limit} sync runs going, as many as it may at once (SYNC_RUN_CONCURRENCY_PER_ENVIRONMENT): this one did not begin`,
          nextRetryDelay: SYNC_SLOT_RETRY_MS,
          nonRetryable: Context.current().info.attempt >= SYNC_SLOT_ATTEMPTS,
        });
      }
      return translated(async () => {
        const [began, committed] = await Promise.all([
          records.beginRun(input),
          commit && run.workflowType === 'manageSync' ? ledger.commit(run.runId, commit) : undefined,
        ]);
        const previousExecution = `${run.workflowId}:run:`;
        if (run.workflowType === 'manageSync' && began.previousRunId?.startsWith(previousExecution)) {
          await ledger.forget(began.previousRunId.slice(previousExecution.length), 2_147_483_647);
          // An execution whose run continues in this one (issue 32) ended without recording a run, so
          // without giving its slot back: this one holds the run's slot from now on.
          await deps.runSlots?.release(began.previousRunId);
        }
        return committed;
      }).then(async (committed) =>
        // Version 4 of the entity's run: its script in the same step. A script this step cannot load
        // (refused, or a failing load) is answered without: the run then takes its own loadScript step,
        // whose error and retries reach the run as before version 4. So does a retried task that
        // chooses another run from the commit than the one whose script was asked for here.
        committed && scriptHash !== undefined
          ? {
              ...committed,
              ...(await loadScript(scriptHash, input.integrationId).then(
                (script) => ({ script }),
                () => ({}),
              )),
            }
          : committed,
      );
    },

    /** The payload of the queued webhook a run of this sync handles (src/webhooks/inboundQueue.ts). */
    async loadQueuedWebhook(input: SyncScope & { runId: string; queueId: string }): Promise<unknown> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        if (!deps.inboundQueue) throw new Error('this worker has no inbound webhook queue');
        return deps.inboundQueue.load(input, input.queueId);
      });
    },

    /** Records per model in the cache, deleted ones excluded. */
    async countRecords(input: ConnectionScope & { models: string[] }): Promise<Record<string, number>> {
      return translated(async () => {
        requireConnection(await caller(), input);
        const counts: Record<string, number> = {};
        for (const model of input.models) {
          counts[model] = await records.countRecords({ ...input, model, includeDeleted: false });
        }
        return counts;
      });
    },

    async writeLogs(context: ScriptLogContext, entries: ScriptLogEntry[]): Promise<void> {
      return translated(async () => {
        const run = await caller();
        requireConnection(run, context);
        if (context.runId !== runIdOf(run)) throw scopeDenied(`run ${runIdOf(run)} may log only as itself`);
        await deps.logs.append(context, entries);
      });
    },

    /** svc.getEnvironmentVariables: a ledgered read (see getMetadata). */
    async getEnvironmentVariables(environmentId: string, step?: StepRef): Promise<EnvironmentVariable[]> {
      return translated(async () => {
        requireEnvironment(await caller(), environmentId);
        return ledgeredRead(step, () => deps.environmentVariables.list(environmentId));
      });
    },

    /** svc.getConnection: a ledgered read (see getMetadata: the record holds the metadata too). */
    async getConnection(
      scope: ConnectionScope,
      options: { forceRefresh: boolean; refreshToken: boolean },
      step?: StepRef,
    ): Promise<ConnectionRecord> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        return ledgeredRead(step, () => deps.connections.getConnection(scope, options));
      });
    },

    /**
     * svc.getMetadata. Its answer goes to the step ledger as getCheckpoint's does: a step executed again
     * after a crash answers what the first execution read, even if that execution's setMetadata moved it
     * since (the metadata writes record the run's deferred answers first).
     */
    async getMetadata(scope: ConnectionScope, step?: StepRef): Promise<Record<string, unknown>> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        return ledgeredRead(step, () => deps.connections.getMetadata(scope));
      });
    },

    /** The run's integration as `svc.getIntegration()` answers it, with its provider's default pagination. */
    async getIntegration(scope: ConnectionScope): Promise<IntegrationDescription> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        return deps.connections.describeIntegration({
          environmentId: scope.environmentId,
          integrationId: scope.integrationId,
        });
      });
    },

    async setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        // The run's getMetadata answers are recorded before the metadata moves (see getMetadata).
        await ledger.flush(stepKey(undefined).runId);
        await deps.connections.setMetadata(scope, metadata);
      });
    },

    async updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        await ledger.flush(stepKey(undefined).runId);
        await deps.connections.updateMetadata(scope, metadata);
      });
    },

    /**
     * Watches a sync run until it closes; terminates it when its script is runaway (never yields, or
     * crashes the worker) and returns why. Heartbeats, so cancelling it (the run ended) is immediate.
     * Only the sync entity may watch, and only its own runs.
     */
    async watchRun(workflowId: string): Promise<RunawayVerdict | null> {
      await translated(async () => requireOwnRun(await caller(), workflowId));
      const context = Context.current();
      for (;;) {
        await context.sleep(WATCH_INTERVAL_MS);
        context.heartbeat();
        const verdict = await stopIfRunaway(deps.temporal, workflowId);
        if (verdict) return verdict;
        const description = await deps.temporal.workflow
          .getHandle(workflowId)
          .describe()
          .catch(() => undefined);
        if (description?.status.name !== 'RUNNING') return null;
      }
    },

    /** The verdict of a run the watchdog (or a worker process) terminated; null for any other run. */
    async runawayVerdict(workflowId: string): Promise<RunawayVerdict | null> {
      await translated(async () => requireOwnRun(await caller(), workflowId));
      return stopIfRunaway(deps.temporal, workflowId);
    },

    /** The deployed action `svc.triggerAction` names, resolved when the call is made. */
    async resolveAction(options: {
      environmentId: string;
      integrationId: string;
      actionName: string;
    }): Promise<ActionDefinition> {
      await translated(async () => requireIntegration(await caller(), options));
      const found = await deps.resolveAction(options);
      if (!found) {
        throw ApplicationFailure.create({
          type: 'action_not_found' satisfies RunErrorCode,
          message: `integration ${options.integrationId} has no deployed action ${options.actionName}`,
          nonRetryable: true,
        });
      }
      return found;
    },
  };
}

/** Only a sync entity acts on runs, and only on its own (`<entity id>:run:<uuid>`). */
function requireOwnRun(run: RunAuthority, workflowId: string): void {
  if (run.workflowType !== 'manageSync' || !workflowId.startsWith(`${run.workflowId}:run:`)) {
    throw scopeDenied(`workflow ${run.workflowId} may not watch or stop ${workflowId}`);
  }
}

export type RuntimeActivities = ReturnType<typeof createRuntimeActivities>;
export type { LoadedScript };
