/**
 * Deployments: preview and apply a compiled service.yaml with its script bundles, and read what is
 * deployed (for the runtime's definitions, the API's generated endpoints and the dashboard).
 *
 * Apply checks the request and plans it (src/deploy/plan.ts, pure), records the new version
 * `applying` with its changes in one transaction (src/deploy/store.ts), then starts the apply
 * workflow (workflows/applyDeployment.ts, id `deploy:<env>`), which brings the sync entities in line
 * and marks the version `active`, and waits for it. Invalid input changes nothing. The workflow is
 * durable: a worker that dies mid-apply is replaced and the apply finishes; a caller that stops
 * waiting does not stop it. Deploys of one environment are serialised by a Postgres advisory lock
 * (version numbers) and by the workflow id (one apply at a time); a deploy first waits for an apply
 * still running. An apply that failed leaves its version `applying`, and the next deploy re-applies
 * everything.
 */
import { WorkflowFailedError, WorkflowNotFoundError, type Client } from '@temporalio/client';
import { z } from 'zod';
import { compileConfig, formatProblems } from '../config/index.js';
import type { ServiceConfig } from '../config/types.js';
import { ServiceError } from '../errors.js';
import type { RecordStore } from '../records/types.js';
import type { ActionDefinition, SyncDefinition } from '../runtime/definitions.js';
import type { ScriptStore } from '../runtime/scriptStore.js';
import { scriptHash } from '../runtime/scriptStore.js';
import { scriptKey, type DeployChange, type DeployedState } from './diff.js';
import {
  APPLY_BATCHING,
  applyWorkflowId,
  planDeployment,
  syncDefinition,
  type ApplyDeploymentInput,
  type ApplyStep,
} from './plan.js';
import type { DeployedScript, Deployment, DeploymentStore } from './store.js';

export { syncDefinition } from './plan.js';
export type { DeployedScript, Deployment } from './store.js';

export const deployRequestSchema = z
  .object({
    /** The service.yaml text; the server compiles it again, so a hand-made request cannot skip validation. */
    yaml: z.string().min(1).max(1_000_000),
    scripts: z
      .array(
        z
          .object({
            integration: z.string().min(1),
            kind: z.enum(['sync', 'action']),
            name: z.string().min(1),
            /** The bundle `service compile` produced (CommonJS, see src/cli/compile.ts). */
            code: z.string().min(1).max(5_000_000),
            /** The TypeScript it was built from, for the dashboard's Script tab. */
            source: z.string().max(5_000_000).default(''),
            sourcePath: z.string().max(1000).default(''),
          })
          .strict(),
      )
      .max(10_000),
  })
  .strict();
export type DeployRequest = z.input<typeof deployRequestSchema>;

/**
 * Runs the synchronous compile and check of a request: the API passes its route's `spend`, which charges
 * the time to the caller's rate budget (the compile of 1,000,000 characters can take seconds).
 */
export type Measure = <T>(work: () => T) => T;
const unmeasured: Measure = (work) => work();

/** Problems an `invalid_config` or `invalid_deploy_request` answer lists at most. */
export const MAX_LISTED_PROBLEMS = 100;

export interface PlannedChange {
  change: DeployChange;
  description: string;
  destructive: boolean;
  /** Connections whose workflows this change touches. */
  connections: number;
  /** Records this change erases (sync removals). */
  recordsErased: number;
}

export interface DeployPlan {
  /** Version the deploy would create. */
  version: number;
  previousVersion: number | null;
  changes: PlannedChange[];
  destructive: boolean;
  /** What the deploy does not refuse but the deployer should know (DeploymentsDeps.warnings). */
  warnings: string[];
}

export interface DeploymentsDeps {
  store: DeploymentStore;
  scripts: ScriptStore;
  records: Pick<RecordStore, 'countSyncRecords'>;
  /** Starts the apply workflow and waits for it (the runtime's data converter). */
  temporal: Client;
  /**
   * The queue the apply runs on (its activities follow it; the entities it starts go to the main
   * queue): the action queue, as a deployer waits on it like on an action, never behind sync runs.
   */
  applyTaskQueue: string;
  /** Connection ids of one integration of an environment. */
  connectionIds(environmentId: string, integrationId: string): Promise<string[]>;
  /**
   * What a deploy should say but does not refuse (a sync subscribed to webhooks that the environment
   * will not accept, say): shown by preview and apply, and by `service deploy`.
   */
  warnings?: (environmentId: string, config: ServiceConfig) => Promise<string[]>;
  /** How long apply waits for its workflow (and for one still running before it). @default 15 minutes */
  applyTimeoutMs?: number;
}

const DEFAULT_APPLY_TIMEOUT_MS = 15 * 60_000;

/** `promise`, or `onTimeout()` thrown once `ms` passed. */
async function within<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(onTimeout()), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export function createDeployments(deps: DeploymentsDeps) {
  const { store } = deps;
  const applyTimeoutMs = deps.applyTimeoutMs ?? DEFAULT_APPLY_TIMEOUT_MS;

  const current = (environmentId: string): Promise<Deployment | null> => store.current(environmentId);

  /** Compiles and checks a request; throws with every problem, changing nothing. */
  function prepare(request: DeployRequest): {
    config: ServiceConfig;
    yaml: string;
    scripts: DeployedScript[];
    codes: Map<string, string>;
  } {
    const parsed = deployRequestSchema.safeParse(request);
    if (!parsed.success) {
      throw new ServiceError('invalid_deploy_request', 'The deploy request is malformed.', {
        details: parsed.error.issues,
      });
    }
    const compiled = compileConfig(parsed.data.yaml);
    if (compiled.config === null) {
      // A file can have a problem every few characters: the answer lists the first ones and says how many.
      const listed = compiled.problems.slice(0, MAX_LISTED_PROBLEMS);
      const more =
        compiled.problems.length > listed.length
          ? `\n… and ${compiled.problems.length - listed.length} more problems (${compiled.problems.length} in all; the first ${listed.length} are listed)`
          : '';
      throw new ServiceError('invalid_config', `${formatProblems('service.yaml', listed, parsed.data.yaml)}${more}`, {
        details: listed,
      });
    }
    const config = compiled.config;
    const declared = new Set<string>();
    for (const integration of config.integrations) {
      for (const sync of integration.syncs) declared.add(scriptKey(integration.id, 'sync', sync.name));
      for (const action of integration.actions) declared.add(scriptKey(integration.id, 'action', action.name));
    }
    const codes = new Map<string, string>();
    const scripts: DeployedScript[] = [];
    const problems: string[] = [];
    for (const script of parsed.data.scripts) {
      const key = scriptKey(script.integration, script.kind, script.name);
      if (!declared.has(key)) problems.push(`script ${key} is not declared in service.yaml`);
      else if (codes.has(key)) problems.push(`script ${key} is given twice`);
      const hash = scriptHash(script.code);
      codes.set(key, script.code);
      scripts.push({
        integration: script.integration,
        kind: script.kind,
        name: script.name,
        hash,
        source: script.source,
        sourcePath: script.sourcePath,
      });
    }
    for (const key of declared)
      if (!codes.has(key))
        problems.push(`script ${key} is declared in service.yaml but missing; run \`service compile\``);
    if (problems.length > 0) {
      const listed = problems.slice(0, MAX_LISTED_PROBLEMS);
      const more =
        problems.length > listed.length ? ` (${problems.length} problems; the first ${listed.length} are listed)` : '';
      throw new ServiceError(
        'invalid_deploy_request',
        `The scripts do not match service.yaml: ${listed.join('; ')}${more}.`,
        {
          status: 422,
          details: listed,
        },
      );
    }
    return { config, yaml: parsed.data.yaml, scripts, codes };
  }

  /** The pure plan with its reach (connections touched, records erased), and the apply's steps. */
  async function plan(
    environmentId: string,
    next: DeployedState,
    previous: Deployment | null,
  ): Promise<{ plan: DeployPlan; steps: ApplyStep[] }> {
    const core = planDeployment(previous, next);
    const connectionCounts = new Map<string, Promise<number>>();
    const connectionsOf = (integration: string): Promise<number> => {
      let count = connectionCounts.get(integration);
      if (!count) {
        count = deps.connectionIds(environmentId, integration).then((ids) => ids.length);
        connectionCounts.set(integration, count);
      }
      return count;
    };
    const planned: PlannedChange[] = [];
    for (const { change, description, destructive } of core.changes) {
      planned.push({
        change,
        description,
        destructive,
        connections: change.kind.startsWith('sync') ? await connectionsOf(change.integration) : 0,
        recordsErased:
          change.kind === 'sync_removed'
            ? await deps.records.countSyncRecords({
                environmentId,
                integrationId: change.integration,
                syncName: change.sync,
              })
            : 0,
      });
    }
    return {
      plan: {
        version: (await store.latestVersion(environmentId)) + 1,
        previousVersion: previous?.version ?? null,
        changes: planned,
        destructive: core.destructive,
        warnings: (await deps.warnings?.(environmentId, next.config)) ?? [],
      },
      steps: core.steps,
    };
  }

  /** Waits for an apply of the environment that is still running (started by a process that died, say). */
  async function settlePreviousApply(environmentId: string): Promise<void> {
    const handle = deps.temporal.workflow.getHandle(applyWorkflowId(environmentId));
    try {
      const { status } = await handle.describe();
      if (status.name !== 'RUNNING') return;
    } catch (error) {
      if (error instanceof WorkflowNotFoundError) return;
      throw error;
    }
    await within(
      handle.result().catch(() => undefined),
      applyTimeoutMs,
      () =>
        new ServiceError(
          'deploy_in_progress',
          'An earlier deploy of this environment is still being applied; try again once GET /deployments shows it active.',
        ),
    );
  }

  /** Starts the apply workflow of a recorded version and waits for it. */
  async function runApply(input: ApplyDeploymentInput): Promise<void> {
    const handle = await deps.temporal.workflow.start('applyDeployment', {
      taskQueue: deps.applyTaskQueue,
      workflowId: applyWorkflowId(input.environmentId),
      args: [input],
      staticSummary: `apply deploy version ${input.version}`,
    });
    try {
      await within(
        handle.result(),
        applyTimeoutMs,
        () =>
          new ServiceError(
            'deploy_timeout',
            `Version ${input.version} is recorded and still being applied after ${Math.round(applyTimeoutMs / 1000)} s; it goes on in the background and GET /deployments shows it active when done.`,
          ),
      );
    } catch (error) {
      if (!(error instanceof WorkflowFailedError)) throw error;
      const cause = error.cause?.cause instanceof Error ? error.cause.cause : error.cause;
      throw new ServiceError(
        'deploy_failed',
        `Applying version ${input.version} failed: ${cause?.message ?? error.message}. The version stays 'applying'; the next deploy re-applies everything.`,
        { cause: error },
      );
    }
  }

  return {
    current,

    /** The changes a deploy would make, with their reach; changes nothing. */
    async preview(environmentId: string, request: DeployRequest, measure: Measure = unmeasured): Promise<DeployPlan> {
      const prepared = measure(() => prepare(request));
      const next = { config: prepared.config, scripts: prepared.scripts };
      return (await plan(environmentId, next, await current(environmentId))).plan;
    },

    /**
     * Applies a deploy. Destructive changes (sync or action removed) need `allowDestructive`; without
     * it the deploy fails with `destructive_change_not_confirmed` and changes nothing.
     */
    async apply(
      environmentId: string,
      request: DeployRequest,
      options: { allowDestructive?: boolean; redeployOf?: number; measure?: Measure } = {},
    ): Promise<{ plan: DeployPlan; deployment: Deployment }> {
      const prepared = (options.measure ?? unmeasured)(() => prepare(request));
      return store.withLock(environmentId, async () => {
        await settlePreviousApply(environmentId);
        const previous = await current(environmentId);
        const next = { config: prepared.config, scripts: prepared.scripts };
        const { plan: deployPlan, steps } = await plan(environmentId, next, previous);
        if (deployPlan.destructive && !options.allowDestructive) {
          const destructive = deployPlan.changes
            .filter((change) => change.destructive)
            .map((change) => change.description);
          throw new ServiceError(
            'destructive_change_not_confirmed',
            `This deploy removes things: ${destructive.join('; ')}. Confirm it (service deploy asks, or pass --allow-destructive).`,
            { details: deployPlan },
          );
        }
        for (const code of prepared.codes.values()) await deps.scripts.put(code, environmentId);
        const changes: DeployChange[] = deployPlan.changes.map((planned) => planned.change);
        await store.record(environmentId, {
          version: deployPlan.version,
          config: prepared.config,
          yaml: prepared.yaml,
          scripts: prepared.scripts,
          changes,
          redeployOf: options.redeployOf ?? null,
        });
        await runApply({ environmentId, version: deployPlan.version, steps, batch: APPLY_BATCHING });
        const deployment = await current(environmentId);
        if (deployment?.version !== deployPlan.version) {
          throw new ServiceError('deploy_inconsistent', 'the deployment vanished while it was applied');
        }
        return { plan: deployPlan, deployment };
      });
    },

    async list(environmentId: string): Promise<Omit<Deployment, 'config' | 'yaml' | 'scripts'>[]> {
      return (await store.list(environmentId, 100)).map((deployment) => {
        const { config: _config, yaml: _yaml, scripts: _scripts, ...rest } = deployment;
        return rest;
      });
    },

    async get(environmentId: string, version: number): Promise<Deployment> {
      const deployment = await store.get(environmentId, version);
      if (!deployment)
        throw new ServiceError('deployment_not_found', `Environment has no deployment version ${version}.`);
      return deployment;
    },

    /** The version in force, by number only (the generated endpoints check it on every request). */
    currentVersion: (environmentId: string): Promise<number | null> => store.currentVersion(environmentId),

    /** The last superseded versions, newest first (to name an endpoint a deploy removed). */
    superseded: (environmentId: string, limit: number) => store.superseded(environmentId, limit),

    /** The request that re-deploys an earlier version (its YAML and bundles), for rollbacks. */
    async requestFor(environmentId: string, version: number): Promise<DeployRequest> {
      const deployment = await this.get(environmentId, version);
      const scripts = await Promise.all(
        deployment.scripts.map(async (script) => ({
          integration: script.integration,
          kind: script.kind,
          name: script.name,
          code: await deps.scripts.get(script.hash, environmentId),
          source: script.source,
          sourcePath: script.sourcePath,
        })),
      );
      return { yaml: deployment.yaml, scripts };
    },

    /** The deployed definitions of one integration's syncs (to start them for a new connection). */
    async syncDefinitions(environmentId: string, integrationId: string): Promise<SyncDefinition[]> {
      const deployment = await current(environmentId);
      const integration = deployment?.config.integrations.find((candidate) => candidate.id === integrationId);
      if (!deployment || !integration) return [];
      return integration.syncs.flatMap((sync) => {
        const script = deployment.scripts.find(
          (s) => s.integration === integrationId && s.kind === 'sync' && s.name === sync.name,
        );
        return script ? [syncDefinition(environmentId, sync, script.hash, deployment.config.models)] : [];
      });
    },

    /** The deployed action, or `action_not_found` (never deployed, or removed by a deploy). */
    async actionDefinition(
      environmentId: string,
      integrationId: string,
      actionName: string,
    ): Promise<ActionDefinition> {
      const deployment = await current(environmentId);
      const script = deployment?.scripts.find(
        (s) => s.integration === integrationId && s.kind === 'action' && s.name === actionName,
      );
      if (!script) {
        throw new ServiceError(
          'action_not_found',
          `Integration '${integrationId}' has no deployed action '${actionName}'${deployment ? '' : ' (nothing is deployed in this environment)'}. Check the name, or deploy it.`,
        );
      }
      return { environmentId, integrationId, actionName, scriptHash: script.hash };
    },
  };
}

export type Deployments = ReturnType<typeof createDeployments>;
