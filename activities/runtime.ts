/**
 * The activities behind the script helper `svc`: every operation of a script that touches the outside
 * world runs here, as one durable step of its run (workflows/svc.ts schedules them).
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { Pool } from '../src/db/pool.js';
import { stopIfRunaway, type RunawayVerdict } from '../src/temporal/runaway.js';
import {
  createRunAuthorities,
  requireConnection,
  requireEnvironment,
  requireIntegration,
  requireSyncRun,
  scopeDenied,
  type RunAuthorities,
  type RunAuthority,
} from '../src/temporal/runAuthority.js';
import type { ConnectionScope, ConnectionService, EnvironmentVariableStore } from '../src/connections/types.js';
import { isServiceError } from '../src/errors.js';
import type { RecordStore, SyncScope, WriteSummary } from '../src/records/types.js';
import type { ActionDefinition } from '../src/runtime/definitions.js';
import { sendRequest } from '../src/runtime/http.js';
import type { ScriptLogContext, ScriptLogEntry, ScriptLogStore } from '../src/runtime/logStore.js';
import type { ConnectionRecord, EnvironmentVariable } from '../src/runtime/public.js';
import { budgetFunctionName, instrumentScript } from '../src/runtime/instrument.js';
import type { ScriptStore } from '../src/runtime/scriptStore.js';
import type { HttpRequestInput, HttpResult } from '../src/runtime/svcTypes.js';

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
  /** Verifies which run calls an activity (src/temporal/runAuthority.ts); built from `temporal` when omitted. */
  authorities?: RunAuthorities | undefined;
}

// How often the watchdog looks at a running sync run: a runaway run is stopped within about
// RUNAWAY_ATTEMPTS workflow-task attempts (~10 s) plus this.
const WATCH_INTERVAL_MS = 5000;

export interface RecordWriteInput extends SyncScope {
  model: string;
  runId: string;
  records: Record<string, unknown>[];
}

/** A bundle as the run workflow evaluates it. */
export interface LoadedScript {
  code: string;
  /** The name of the loop-protection function the code calls. */
  budget: string;
}

const LOADED_SCRIPTS_KEPT = 50;

/**
 * Translates the service's error taxonomy into Temporal's at the activity boundary: a ServiceError
 * keeps its code as the failure type and is retried only when it says trying again can help.
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

/**
 * The step id of the running activity: stable across a replay of the same run (the sequence number
 * Temporal gives the operation), so a write re-executed after a crash is recognised.
 */
function currentStep(): string {
  const info = Context.current().info;
  return `${info.workflowExecution?.runId ?? ''}:${info.activityId}`;
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

  /**
   * Exactly-once record writes per step: a step whose result was lost with a crashed worker runs
   * again on replay and then returns what the first execution wrote, instead of writing again (which
   * would count the records as unchanged and falsify the run's added/updated counts).
   */
  async function onceForStep(runId: string, write: () => Promise<WriteSummary>): Promise<WriteSummary> {
    const step = currentStep();
    const done = await db.query<{ result: WriteSummary }>(
      'SELECT result FROM script_run_steps WHERE run_id = $1 AND step_id = $2',
      [runId, step],
    );
    if (done.rows[0]) return done.rows[0].result;
    const summary = await write();
    await db.query(
      'INSERT INTO script_run_steps (run_id, step_id, result) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
      [runId, step, JSON.stringify(summary)],
    );
    return summary;
  }

  // Bundles are immutable by hash; a few instrumented ones are kept to spare a parse per run, keyed by
  // environment too: a run loads only what was deployed to its own environment.
  const loadedScripts = new Map<string, LoadedScript>();

  return {
    /**
     * The deployed bundle with this content hash, with loop protection inserted
     * (src/runtime/instrument.ts): `budget` is the name of the function its loops call. Only a bundle
     * deployed to the calling run's environment is handed out.
     */
    async loadScript(hash: string): Promise<LoadedScript> {
      const run = await translated(caller);
      const key = `${run.environmentId}\n${hash}`;
      const cached = loadedScripts.get(key);
      if (cached) return cached;
      const code = await translated(() => deps.scripts.get(hash, run.environmentId));
      const budget = budgetFunctionName(code);
      let instrumented: string;
      try {
        instrumented = instrumentScript(code, budget);
      } catch (error) {
        throw ApplicationFailure.create({
          type: 'invalid_script',
          nonRetryable: true,
          message: `the bundle ${hash.slice(0, 12)} does not parse: ${error instanceof Error ? error.message : String(error)}`,
        });
      }
      const loaded = { code: instrumented, budget };
      loadedScripts.set(key, loaded);
      if (loadedScripts.size > LOADED_SCRIPTS_KEPT) loadedScripts.delete(loadedScripts.keys().next().value!);
      return loaded;
    },

    /** One attempt of an HTTP request with the connection's credentials; see src/runtime/http.ts. */
    async httpRequest(scope: ConnectionScope, request: HttpRequestInput): Promise<HttpResult> {
      requireConnection(await translated(caller), scope);
      return sendRequest(deps.connections, scope, request);
    },

    async saveRecords(input: RecordWriteInput): Promise<WriteSummary> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        return onceForStep(input.runId, () => records.saveRecords(input));
      });
    },

    async deleteRecords(input: RecordWriteInput): Promise<WriteSummary> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        return onceForStep(input.runId, () =>
          records.deleteRecords({ ...input, records: input.records.map((record) => ({ id: record['id'] })) }),
        );
      });
    },

    /** `track_deletes` after a successful full run. */
    async markUnseenDeleted(input: SyncScope & { model: string; runId: string }): Promise<WriteSummary> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        return onceForStep(input.runId, () => records.markUnseenDeleted(input));
      });
    },

    /** `sync_mode: full_refresh_and_clear_cache`: erases this connection's records of the sync. */
    async clearRecords(input: SyncScope): Promise<number> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        return records.eraseSync({
          environmentId: input.environmentId,
          integrationId: input.integrationId,
          syncName: input.syncName,
          connectionId: input.connectionId,
        });
      });
    },

    /** Makes this run the one that owns the sync's records (fences off writes of an older run). */
    async beginRun(input: SyncScope & { runId: string }): Promise<void> {
      return translated(async () => {
        requireSyncRun(await caller(), input);
        await records.beginRun(input);
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
        if (context.runId !== run.workflowId) throw scopeDenied(`run ${run.workflowId} may log only as itself`);
        await deps.logs.append(context, entries);
      });
    },

    async getEnvironmentVariables(environmentId: string): Promise<EnvironmentVariable[]> {
      return translated(async () => {
        requireEnvironment(await caller(), environmentId);
        return deps.environmentVariables.list(environmentId);
      });
    },

    async getConnection(
      scope: ConnectionScope,
      options: { forceRefresh: boolean; refreshToken: boolean },
    ): Promise<ConnectionRecord> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        return deps.connections.getConnection(scope, options);
      });
    },

    async getMetadata(scope: ConnectionScope): Promise<Record<string, unknown>> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        return deps.connections.getMetadata(scope);
      });
    },

    async setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
      return translated(async () => {
        requireConnection(await caller(), scope);
        await deps.connections.setMetadata(scope, metadata);
      });
    },

    async updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>): Promise<void> {
      return translated(async () => {
        requireConnection(await caller(), scope);
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
          type: 'action_not_found',
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
