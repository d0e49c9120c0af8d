/**
 * Where an activity's authority comes from (docs/architecture.md "Threat model"): the workflow
 * execution that scheduled it, never the arguments it was given.
 *
 * A deployed script runs inside a run workflow. Even a script that got hold of every workflow-side
 * function (the SDK's internals, the activity proxies, child workflow starts) can only pass arguments
 * of its choosing; it cannot change which workflow execution Temporal says is calling, nor that
 * execution's type and parent. So every activity asks Temporal (describe, cached per execution) what
 * the calling execution is, walks its parents up to the root, and accepts only these shapes:
 *
 * | calling workflow | parent                              | scope                                   |
 * | ---------------- | ----------------------------------- | --------------------------------------- |
 * | `manageSync`     | none (a client started it)          | its id `sync:<env>:<int>:<conn>:<sync>`; its run (issue 31) is `<its id>:run:<its Temporal run id>` |
 * | `runSync`        | that entity, or none                | its id `<entity id>:run:<uuid>`          |
 * | `runAction`      | none                                | its id `action:<env>:<int>:<conn>:<name>:<uuid>` |
 * | `runAction`      | a verified `manageSync`, `runSync` or `runAction` | its parent's, one level deeper |
 * | `deliverWebhook` | a verified `manageSync`, or none    | its id `<run id>:webhook`                |
 * | `deliverWebhook` | none                                | its id `event:<env>:<uuid>` (a connection event the service recorded) |
 * | `applyDeployment` | none                               | its id `deploy:<env>` (src/deploy/plan.ts)       |
 *
 * A workflow without a parent can only have been started by a Temporal client (the API, the deploy,
 * an operator), never by workflow code, so its id is a fact of the operator's. Environment ids hold no
 * colon (src/connections/environmentStore.ts), so the environment of a scope is exact.
 *
 * An execution this process's workers hold (src/temporal/runningExecutions.ts: every run whose local
 * activities run here) is looked up there, in the facts Temporal gave the worker when it began it; any
 * other is described.
 */
import type { Client } from '@temporalio/client';
import { ServiceError } from '../errors.js';
import { SCRIPT_LIMITS } from '../runtime/definitions.js';
import { runningExecution, type ExecutionFacts } from './runningExecutions.js';

/** What a verified caller may act on. `rootId` is the id of the parentless workflow it descends from. */
export interface RunAuthority {
  workflowId: string;
  runId: string;
  workflowType: string;
  /** The parentless workflow at the top of the chain. */
  rootId: string;
  rootType: string;
  environmentId: string;
  /** Nested action levels below the root (0 for the root itself and for sync runs). */
  depth: number;
}

export interface CallingExecution {
  workflowId: string;
  runId: string;
  workflowType: string;
}

/** Nested `svc.triggerAction` levels a run may reach (the workflow refuses deeper calls first). */
export const MAX_ACTION_DEPTH = SCRIPT_LIMITS.actionDepth;

const PARENT_LIMIT = MAX_ACTION_DEPTH + 3;
const CACHE_SIZE = 10_000;

export function scopeDenied(message: string): ServiceError {
  return new ServiceError('scope_denied', message);
}

/** The sync entity's id. */
export function syncEntityId(scope: {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
}): string {
  return `sync:${scope.environmentId}:${scope.integrationId}:${scope.connectionId}:${scope.syncName}`;
}

/** The id of one run of a sync: its entity's id, `:run:`, a unique part. */
export function syncRunId(
  scope: { environmentId: string; integrationId: string; connectionId: string; syncName: string },
  unique: string,
): string {
  return `${syncEntityId(scope)}:run:${unique}`;
}

/** The id of an action run the API starts: the whole scope, so that the run's authority is its id. */
export function rootActionId(
  scope: { environmentId: string; integrationId: string; connectionId: string; actionName: string },
  uuid: string,
): string {
  return `action:${scope.environmentId}:${scope.integrationId}:${scope.connectionId}:${scope.actionName}:${uuid}`;
}

/** The environment a root id names; undefined for an id of another shape. */
export function environmentOfRoot(rootId: string): string | undefined {
  const match = /^(?:sync|action|event|deploy):([^:]+)(?::|$)/.exec(rootId);
  return match?.[1];
}

export interface RunAuthorities {
  /** Verifies the calling execution (cached); throws `scope_denied` for any shape outside the table above. */
  verify(caller: CallingExecution): Promise<RunAuthority>;
}

export function createRunAuthorities({
  client,
  held = runningExecution,
}: {
  client: Client;
  /**
   * What an execution this process's workers hold is, as Temporal said when it began
   * (src/temporal/runningExecutions.ts): such an execution takes no describe.
   * @default the process's registry
   */
  held?: (workflowId: string, runId: string) => ExecutionFacts | undefined;
}): RunAuthorities {
  const cache = new Map<string, Promise<RunAuthority>>();

  async function describe(workflowId: string, runId: string): Promise<ExecutionFacts> {
    const known = held(workflowId, runId);
    if (known) return known;
    try {
      const description = await client.workflow.getHandle(workflowId, runId).describe();
      return {
        type: description.type,
        parent: description.parentExecution?.workflowId
          ? {
              workflowId: description.parentExecution.workflowId,
              runId: description.parentExecution.runId ?? '',
            }
          : undefined,
      };
    } catch (error) {
      // Temporal unreachable: a retryable failure of the step, not a verdict.
      throw new ServiceError('temporal_unavailable', `could not look up workflow ${workflowId}: ${String(error)}`, {
        retryable: true,
        cause: error,
      });
    }
  }

  async function verifyUncached(caller: CallingExecution, level: number): Promise<RunAuthority> {
    if (level > PARENT_LIMIT) throw scopeDenied(`workflow ${caller.workflowId} is nested too deep`);
    const { type, parent } = await describe(caller.workflowId, caller.runId);
    if (type !== caller.workflowType) {
      throw scopeDenied(`workflow ${caller.workflowId} is a ${type}, not a ${caller.workflowType}`);
    }
    const self = { workflowId: caller.workflowId, runId: caller.runId, workflowType: type };
    if (!parent) {
      const environmentId = environmentOfRoot(caller.workflowId);
      const shapes: Record<string, RegExp> = {
        manageSync: /^sync:[^:]+:.+:.+:[^:]+$/,
        runSync: /^sync:[^:]+:.+:.+:[^:]+:run:[^:]+$/,
        runAction: /^action:[^:]+:.+:.+:[^:]+:[^:]+$/,
        // A sync run's deliveries, or a connection event's (src/webhooks/connectionEvents.ts). An
        // `event:` root acts on nothing but the delivery rows recorded under its own id.
        deliverWebhook: /^(?:sync:[^:]+:.+:.+:[^:]+:run:[^:]+:webhook|event:[^:]+:[^:]+)$/,
        // An environment's deploy apply (src/deploy/deployments.ts starts it); acts on that environment.
        applyDeployment: /^deploy:[^:]+$/,
      };
      const shape = shapes[type];
      if (!environmentId || !shape?.test(caller.workflowId)) {
        throw scopeDenied(`workflow ${caller.workflowId} (${type}) is not a run the service started`);
      }
      return { ...self, rootId: caller.workflowId, rootType: type, environmentId, depth: 0 };
    }
    const above = await verifyCached({ ...parent, workflowType: '' }, level + 1);
    if (type === 'runSync' && above.workflowType === 'manageSync' && above.depth === 0) {
      if (caller.workflowId.startsWith(`${above.workflowId}:run:`)) return { ...above, ...self };
    } else if (type === 'deliverWebhook' && above.workflowType === 'manageSync') {
      return { ...above, ...self };
    } else if (
      type === 'runAction' &&
      (above.workflowType === 'manageSync' || above.workflowType === 'runSync' || above.workflowType === 'runAction')
    ) {
      if (above.depth + 1 > MAX_ACTION_DEPTH) {
        throw new ServiceError(
          'action_depth_exceeded',
          `actions nest at most ${MAX_ACTION_DEPTH} levels deep (svc.triggerAction)`,
        );
      }
      return { ...above, ...self, depth: above.depth + 1 };
    }
    throw scopeDenied(
      `workflow ${caller.workflowId} (${type}) may not run under ${above.workflowId} (${above.workflowType})`,
    );
  }

  function verifyCached(caller: CallingExecution, level: number): Promise<RunAuthority> {
    const key = `${caller.workflowId}\n${caller.runId}`;
    const cached = cache.get(key);
    if (cached) return cached;
    // A parent is looked up by id and run id only; its type comes from Temporal.
    const pending = (async () => {
      if (caller.workflowType === '') {
        const { type } = await describe(caller.workflowId, caller.runId);
        return verifyUncached({ ...caller, workflowType: type }, level);
      }
      return verifyUncached(caller, level);
    })();
    cache.set(key, pending);
    // Only verdicts are kept: a lookup that failed for want of Temporal is tried again next time.
    pending.catch((error: unknown) => {
      if (!(error instanceof ServiceError) || error.retryable) cache.delete(key);
    });
    if (cache.size > CACHE_SIZE) cache.delete(cache.keys().next().value!);
    return pending;
  }

  return { verify: (caller) => verifyCached(caller, 0) };
}

/** A connection scope as activities are given it. */
export interface ClaimedConnection {
  environmentId: string;
  integrationId: string;
  connectionId: string;
}

/** Refuses a connection scope that is not the one of the verified run. */
export function requireConnection(authority: RunAuthority, claimed: ClaimedConnection): void {
  const prefix = `${claimed.environmentId}:${claimed.integrationId}:${claimed.connectionId}:`;
  const root = authority.rootId;
  const ok =
    !claimed.environmentId.includes(':') && (root.startsWith(`sync:${prefix}`) || root.startsWith(`action:${prefix}`));
  if (!ok) {
    throw scopeDenied(
      `run ${authority.workflowId} may act only on its own connection, not on ${claimed.integrationId}/${claimed.connectionId} of environment ${claimed.environmentId}`,
    );
  }
}

/** Refuses an integration other than the verified run's. */
export function requireIntegration(
  authority: RunAuthority,
  claimed: { environmentId: string; integrationId: string },
): void {
  const prefix = `${claimed.environmentId}:${claimed.integrationId}:`;
  const root = authority.rootId;
  if (
    claimed.environmentId.includes(':') ||
    !(root.startsWith(`sync:${prefix}`) || root.startsWith(`action:${prefix}`))
  ) {
    throw scopeDenied(`run ${authority.workflowId} may act only in its own integration`);
  }
}

/** Refuses an environment other than the verified run's. */
export function requireEnvironment(authority: RunAuthority, environmentId: string): void {
  if (environmentId !== authority.environmentId) {
    throw scopeDenied(`run ${authority.workflowId} may act only in its own environment`);
  }
}

/** Refuses a webhook workflow that reports on another sync than the one it belongs to. */
export function requireSyncWebhook(authority: RunAuthority, claimed: ClaimedConnection & { syncName: string }): void {
  const entity = syncEntityId(claimed);
  const own =
    authority.workflowType === 'deliverWebhook' &&
    authority.workflowId.startsWith(`${entity}:run:`) &&
    (authority.rootId === entity || authority.rootId === authority.workflowId);
  if (!own) throw scopeDenied(`workflow ${authority.workflowId} may deliver only the webhooks of its own sync`);
}

/**
 * The run id of a verified caller that runs a script: an entity's run is named by the execution it runs
 * in (`<entity id>:run:<Temporal run id>`, a value no script chooses); a `runSync` or `runAction` run is
 * its workflow id.
 */
export function runIdOf(authority: RunAuthority): string {
  return authority.workflowType === 'manageSync'
    ? `${authority.workflowId}:run:${authority.runId}`
    : authority.workflowId;
}

/** Refuses a sync scope (and run id) that is not the verified sync run's own. */
export function requireSyncRun(
  authority: RunAuthority,
  claimed: ClaimedConnection & { syncName: string; runId?: string },
): void {
  if (authority.rootType !== 'manageSync' && authority.rootType !== 'runSync') {
    throw scopeDenied(`run ${authority.workflowId} is not a sync run: it cannot write records`);
  }
  const entity = syncEntityId(claimed);
  const own = authority.rootId === entity || authority.rootId.startsWith(`${entity}:run:`);
  if (!own || (authority.workflowType !== 'runSync' && authority.workflowType !== 'manageSync')) {
    throw scopeDenied(`run ${authority.workflowId} may write only the records of its own sync`);
  }
  if (claimed.runId !== undefined && claimed.runId !== runIdOf(authority)) {
    throw scopeDenied(`run ${runIdOf(authority)} may write only as itself`);
  }
}
