/**
 * What the REST API (and deploy) call to drive syncs and actions: start or ensure a sync entity
 * workflow for a connection, trigger, pause, resume, status, webhook delivery, stop, and run an action
 * and await its result. The client must carry the runtime's data converter (createDataConverter).
 */
import { randomUUID } from 'node:crypto';
import {
  WorkflowExecutionAlreadyStartedError,
  WorkflowFailedError,
  WorkflowNotFoundError,
  type Client,
} from '@temporalio/client';
import { ApplicationFailure, TerminatedFailure, TimeoutFailure } from '@temporalio/common';
import { RelayedError, ServiceError } from '../errors.js';
import {
  RUN_WORKFLOW_TASK_TIMEOUT_MS,
  SYNC_ENTITY_VERSION,
  type ActionDefinition,
  type LoadedScript,
  type RunActionInput,
  type RunOptions,
  type SyncDefinition,
  type SyncMode,
  type SyncStatus,
} from '../runtime/definitions.js';
import type { WebhookEvent } from '../runtime/public.js';
import { createScriptLoader, namesProvider } from '../runtime/scriptLoader.js';
import type { ScriptStore } from '../runtime/scriptStore.js';
import type { ManageSyncInput } from '../../workflows/manageSync.js';
import type { runAction } from '../../workflows/runScript.js';
import { syncWorkflowId } from './connection.js';
import { entityStatusFromHistory, type RunCommit } from './entityStatus.js';
import { rootActionId } from './runAuthority.js';
import { stopIfRunaway, type RunawayVerdict } from './runaway.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';

// How often a caller waiting for an action checks that its script is not runaway.
const ACTION_WATCH_INTERVAL_MS = 2000;

/**
 * How long a sync entity has to answer its `status` query before its status is read from its history
 * instead: a waiting entity answers in milliseconds, one whose run's script holds its thread does not
 * until that script awaits or is stopped (up to the isolate timeout, 3 s, plus the stop).
 */
export const STATUS_QUERY_MS = 5000;

export interface SyncControlOptions {
  client: Client;
  /** The main task queue; action runs go to its action queue (actionTaskQueue), never behind sync runs. */
  taskQueue: string;
  /**
   * A connection's own frequency for a sync (PUT /sync/update-connection-frequency), applied to the
   * definition every time an entity is handed one, so it overrides `runs` for that connection only and
   * survives redeploys. @default none: every sync runs at its `runs`
   */
  frequencyOf?: (ref: SyncRef) => Promise<{ frequencyMs: number } | undefined>;
  /**
   * The deployed bundles (ScriptStore): an action whose bundle is small gets it, instrumented
   * (src/runtime/scriptLoader.ts), with its input and takes no `loadScript` step (a local activity,
   * and the caller lookup it makes: about a third of an action's round trip, bench/actionProfile.ts).
   * @default none: every action loads its bundle itself
   */
  scripts?: Pick<ScriptStore, 'get'>;
  /**
   * Called once a sync's entity is stopped (its connection deleted, the sync removed): what it held
   * outside Temporal goes too (its queued webhooks, src/webhooks/inboundQueue.ts).
   */
  onStop?: (ref: SyncRef) => Promise<void>;
  /**
   * What an entity execution's run committed to at its start (its `beginRun` step, kept in the step
   * ledger: StepLedger.committed), by the execution's run id. The status read from history uses it when
   * the run began in a workflow task not yet recorded (its worker was killed meanwhile, or the task is
   * still going): the history holds no `beginRun` step then, Postgres does.
   * @default none: such a run is not seen until its task is recorded
   */
  committedRun?: (executionRunId: string) => Promise<RunCommit | null>;
}

/**
 * The largest bundle an action is handed with its input. The input travels in the run's history
 * (encrypted): below the claim check's threshold (64 KiB, src/runtime/payloadStorage.ts) it costs no
 * write to payload_blobs per action; a larger bundle is loaded by the run's `loadScript` step.
 */
export const ACTION_SCRIPT_INLINE_BYTES = 32 * 1024;

export interface SyncRef {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
}

// An action is a request-response call: past this it fails with `action_timeout` rather than leaving
// the caller waiting.
const DEFAULT_ACTION_TIMEOUT_MS = 5 * 60_000;

export type ActionOutcome =
  { ok: true; output: unknown } | { ok: false; body: { error_type: 'action_script_failure'; payload: unknown } };

export function createSyncControl({
  client,
  taskQueue,
  frequencyOf,
  scripts,
  onStop,
  committedRun,
}: SyncControlOptions) {
  const loader = scripts ? createScriptLoader(scripts) : undefined;
  /** The action's bundle when it is small enough to go with the input; otherwise the run loads it. */
  async function inlineScript(definition: ActionDefinition): Promise<LoadedScript | undefined> {
    // A bundle that cannot be loaded here fails in the run's own loadScript step, with its error.
    const script = await loader?.load(definition.scriptHash, definition.environmentId).catch(() => undefined);
    // A bundle that reads svc.provider loads in the run's step, which looks the provider up.
    return script && Buffer.byteLength(script.code, 'utf8') <= ACTION_SCRIPT_INLINE_BYTES && !namesProvider(script)
      ? script
      : undefined;
  }

  const handle = (ref: SyncRef) => client.workflow.getHandle(syncWorkflowId(ref));

  async function signalExisting(ref: SyncRef, signal: string, args: unknown[] = []): Promise<void> {
    try {
      await handle(ref).signal(signal, ...args);
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) throw notFound(ref);
      if (isSignalLimit(error)) throw busy(ref, error);
      throw error;
    }
  }

  /**
   * Starts the sync's entity workflow for the connection unless it exists; never signals it.
   * `startedBy` is kept in the entity's memo (see `startedBy`). Returns the definition it was given
   * (the connection's own frequency applied) and whether this call started it.
   */
  async function startSync(
    given: SyncDefinition,
    connectionId: string,
    options?: RunOptions,
    startedBy?: string,
  ): Promise<{ workflowId: string; started: boolean; definition: SyncDefinition }> {
    const ref = { ...given, connectionId };
    const override = await frequencyOf?.(ref);
    // The entity takes a changed runsMs from `reconfigure` and moves its next run to last finish + it.
    const definition = override ? { ...given, runsMs: override.frequencyMs } : given;
    const input: ManageSyncInput = { definition, connectionId, options, version: SYNC_ENTITY_VERSION };
    const workflowId = syncWorkflowId(ref);
    try {
      await client.workflow.start('manageSync', {
        taskQueue,
        workflowId,
        args: [input],
        // A run's workflow task timeout: its runs run in its own execution (docs/architecture.md "Recovery").
        workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
        staticSummary: `sync ${definition.syncName} for ${connectionId}`,
        ...(startedBy === undefined ? {} : { memo: { startedBy } }),
      });
      return { workflowId, started: true, definition };
    } catch (error) {
      if (!(error instanceof WorkflowExecutionAlreadyStartedError)) throw error;
      return { workflowId, started: false, definition };
    }
  }

  return {
    startSync,

    /** The `startedBy` an entity was started with (undefined: none, or no such entity). */
    async startedBy(workflowId: string): Promise<string | undefined> {
      try {
        const memo = (await client.workflow.getHandle(workflowId).describe()).memo;
        return typeof memo?.['startedBy'] === 'string' ? memo['startedBy'] : undefined;
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) return undefined;
        throw error;
      }
    },

    /**
     * Starts the sync's entity workflow for the connection, or hands a running one the definition
     * (a redeploy). `auto_start: false` starts it paused. Returns the workflow id.
     */
    async ensureSync(given: SyncDefinition, connectionId: string, options?: RunOptions): Promise<string> {
      const { workflowId, started, definition } = await startSync(given, connectionId, options);
      if (!started) await client.workflow.getHandle(workflowId).signal('reconfigure', definition);
      return workflowId;
    },

    /** Runs the sync now (`sync_mode` incremental, full_refresh or full_refresh_and_clear_cache), even when paused. */
    trigger: (ref: SyncRef, mode: SyncMode = 'incremental') => signalExisting(ref, 'trigger', [{ mode }]),
    pause: (ref: SyncRef) => signalExisting(ref, 'pause'),
    resume: (ref: SyncRef) => signalExisting(ref, 'resume'),
    /** An inbound webhook of a type the sync subscribes to; other types are ignored by the sync. */
    deliverWebhook: (ref: SyncRef, event: WebhookEvent) => signalExisting(ref, 'webhook', [event]),

    /**
     * The entity's answer to its `status` query; when it gives none within STATUS_QUERY_MS (its thread
     * runs its run's script, which may be stuck until it is stopped, or no worker serves it now), the
     * status its execution's history tells (src/temporal/entityStatus.ts).
     */
    async status(ref: SyncRef): Promise<SyncStatus> {
      try {
        return await client.withDeadline(Date.now() + STATUS_QUERY_MS, () => handle(ref).query<SyncStatus>('status'));
      } catch (error) {
        if (error instanceof WorkflowNotFoundError) throw notFound(ref);
        try {
          return await entityStatusFromHistory(client, syncWorkflowId(ref), committedRun);
        } catch (fallback) {
          if (fallback instanceof WorkflowNotFoundError) throw notFound(ref);
          throw error;
        }
      }
    },

    /** The sync was removed by a deploy, or its connection deleted: stops its entity (and any run). */
    async stop(ref: SyncRef, reason: string): Promise<void> {
      try {
        await handle(ref).terminate(reason);
      } catch (error) {
        if (!(error instanceof WorkflowNotFoundError)) throw error;
      }
      await onStop?.(ref);
    },

    /**
     * Runs an action and waits for its output. An `ActionError` thrown by the script comes back as
     * `{ ok: false, body: { error_type: 'action_script_failure', payload } }`; any other failure throws
     * a ServiceError whose code is the run's failure type (script_error, http_status_error, …).
     */
    async runAction(
      input: RunActionInput,
      options: { timeoutMs?: number; workflowId?: string } = {},
    ): Promise<ActionOutcome> {
      const workflowId =
        options.workflowId ?? rootActionId({ ...input.definition, connectionId: input.connectionId }, randomUUID());
      let verdict: RunawayVerdict | null = null;
      let done = false;
      let watching: Promise<void> = Promise.resolve();
      try {
        const script = input.script ?? (await inlineScript(input.definition));
        const handle = await client.workflow.start<typeof runAction>('runAction', {
          taskQueue: actionTaskQueue(taskQueue),
          workflowId,
          // An action this code starts runs with the step ledger's bytes cut, the task cut by recorded
          // body, both decided at gates, which weigh child starts and hold the clock (RunActionInput).
          args: [
            {
              ...input,
              ...(script ? { script } : {}),
              ledgerCut: true,
              taskCutByBody: true,
              cutAtGates: true,
              gatedChildrenAndClock: true,
            },
          ],
          workflowExecutionTimeout: options.timeoutMs ?? DEFAULT_ACTION_TIMEOUT_MS,
          workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
          staticSummary: `action ${input.definition.actionName} for ${input.connectionId}`,
        });
        const watch = async (): Promise<void> => {
          while (!done) {
            await new Promise((resolve) => setTimeout(resolve, ACTION_WATCH_INTERVAL_MS));
            if (done) return;
            verdict = await stopIfRunaway(client, workflowId).catch(() => null);
            if (verdict) return;
          }
        };
        watching = watch();
        const output: unknown = await handle.result();
        return { ok: true, output };
      } catch (error) {
        if (!(error instanceof WorkflowFailedError)) throw error;
        // A watchdog that terminated the run reports just after the termination is visible.
        if (error.cause instanceof TerminatedFailure) await watching.catch(() => undefined);
        const found = verdict as RunawayVerdict | null;
        if (found) throw new ServiceError(found.code, found.message);
        const cause = error.cause;
        if (cause instanceof ApplicationFailure && cause.type === 'action_script_failure') {
          return { ok: false, body: { error_type: 'action_script_failure', payload: cause.details?.[0] ?? {} } };
        }
        if (cause instanceof ApplicationFailure) {
          // The run's own code, whatever status the API would give it elsewhere: the run failed.
          throw new RelayedError(cause.type ?? 'action_failed', cause.message, {
            status: cause.type === 'action_not_found' ? 404 : 500,
            cause,
          });
        }
        if (cause instanceof TimeoutFailure) {
          throw new ServiceError('action_timeout', `action ${input.definition.actionName} did not finish in time`, {
            cause,
          });
        }
        if (cause instanceof TerminatedFailure) {
          throw new ServiceError('action_terminated', `action ${input.definition.actionName} was terminated`, {
            cause,
          });
        }
        throw error;
      } finally {
        done = true;
      }
    },
  };
}

// What Temporal answers a signal to an execution that took its limit of signals
// (`history.maximumSignalsPerExecution`, 10,000 by default): RESOURCE_EXHAUSTED in server 1.29,
// INVALID_ARGUMENT in older servers, with this message in both.
const SIGNAL_LIMIT = /exceeded workflow execution limit for signal events/i;
const GRPC_RESOURCE_EXHAUSTED = 8;

/** Is this failure of a signal Temporal's refusal of one more signal to the execution? */
export function isSignalLimit(error: unknown): boolean {
  for (let current: unknown = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    if (SIGNAL_LIMIT.test(current.message)) return true;
    if ((current as { code?: unknown }).code === GRPC_RESOURCE_EXHAUSTED) return true;
    current = current.cause;
  }
  return false;
}

// A waiting entity continues as new within a few signals (workflows/manageSync.ts), a running one
// when its run ends: a minute is a fair first wait.
const BUSY_RETRY_AFTER_SECONDS = 60;

function busy(ref: SyncRef, cause: unknown): ServiceError {
  return new ServiceError(
    'sync_busy',
    `sync ${ref.syncName} of connection ${ref.connectionId} takes no more signals until its current run ends (Temporal's limit of signals per execution); retry in ${BUSY_RETRY_AFTER_SECONDS} s`,
    { retryable: true, retryAfterSeconds: BUSY_RETRY_AFTER_SECONDS, cause },
  );
}

function notFound(ref: SyncRef): ServiceError {
  return new ServiceError(
    'sync_not_found',
    `sync ${ref.syncName} of integration ${ref.integrationId} is not running for connection ${ref.connectionId}`,
  );
}

export type SyncControl = ReturnType<typeof createSyncControl>;
