/**
 * What a deploy does, computed without any I/O: the changes between the deployed and the new state
 * (src/deploy/diff.ts), and the steps the apply workflow (workflows/applyDeployment.ts) takes to
 * bring the running syncs in line with them. Reach (connections touched, records erased) needs the
 * database and is added by src/deploy/deployments.ts.
 */
import { modelsReferenced } from '../config/checkRecord.js';
import type { ModelConfig, ServiceConfig, SyncConfig } from '../config/types.js';
import type { SyncDefinition } from '../runtime/definitions.js';
import { describeChange, diffDeployments, isDestructive, type DeployChange, type DeployedState } from './diff.js';

/** One step of an apply, done for every connection of the integration. */
export type ApplyStep =
  /** Stop the sync's entity for every connection, then erase all its records. */
  | { kind: 'remove_sync'; integration: string; sync: string }
  /** Start the syncs' entities, or hand a running one its new definition. */
  | { kind: 'ensure_syncs'; integration: string; syncs: string[] };

export interface PlannedChangeCore {
  change: DeployChange;
  description: string;
  destructive: boolean;
}

export interface DeploymentPlanCore {
  changes: PlannedChangeCore[];
  destructive: boolean;
  /** In order: every removal before any start, so no run of a removed sync writes after its erase. */
  steps: ApplyStep[];
}

/** The deployed state and whether its own apply finished (`applying`: it may be half applied). */
export type CurrentState = DeployedState & { status?: 'applying' | 'active' | 'superseded' };

// Fields whose change alters what the sync workflows run; the others are documentation.
const DEFINITION_FIELDS = new Set([
  'script',
  'models',
  'runs',
  'sync_type',
  'track_deletes',
  'auto_start',
  'webhook_subscriptions',
  'record_validation',
]);

/**
 * The steps that bring running syncs from one deployed state to `config`. With `everything` (the
 * previous apply did not finish) every sync of `config` is ensured, not only the changed ones.
 */
export function applySteps(config: ServiceConfig, changes: readonly DeployChange[], everything: boolean): ApplyStep[] {
  const steps: ApplyStep[] = [];
  for (const change of changes) {
    if (change.kind === 'sync_removed')
      steps.push({ kind: 'remove_sync', integration: change.integration, sync: change.sync });
  }
  const touched = (integration: string, sync: string): boolean =>
    changes.some(
      (change) =>
        change.integration === integration &&
        ((change.kind === 'sync_added' && change.sync === sync) ||
          (change.kind === 'sync_changed' &&
            change.sync === sync &&
            change.fields.some((field) => DEFINITION_FIELDS.has(field)))),
    );
  for (const integration of config.integrations) {
    const syncs = integration.syncs
      .filter((sync) => everything || touched(integration.id, sync.name))
      .map((sync) => sync.name);
    if (syncs.length > 0) steps.push({ kind: 'ensure_syncs', integration: integration.id, syncs });
  }
  return steps;
}

/** What deploying `next` over `current` changes, and how the apply brings the running syncs in line. */
export function planDeployment(current: CurrentState | null, next: DeployedState): DeploymentPlanCore {
  const changes = diffDeployments(current, next).map((change) => ({
    change,
    description: describeChange(change),
    destructive: isDestructive(change),
  }));
  return {
    changes,
    destructive: changes.some((planned) => planned.destructive),
    steps: applySteps(
      next.config,
      changes.map((planned) => planned.change),
      current?.status === 'applying',
    ),
  };
}

/** What the apply workflow (workflows/applyDeployment.ts) is started with: the version and its steps. */
export interface ApplyDeploymentInput {
  environmentId: string;
  version: number;
  steps: ApplyStep[];
  /** Where a continued run picks up: the step, and the last connection id of it done. */
  cursor?: { step: number; after: string | null; done: number };
  /**
   * How the apply pages through connections: `size` per activity call, `parallel` calls at once.
   * Absent in applies started before it existed, which go on as they began: 50, one at a time.
   */
  batch?: ApplyBatching;
}

export interface ApplyBatching {
  size: number;
  parallel: number;
}

/**
 * What a new apply uses: 4 calls of 100 connections at once, each starting 16 entities at a time
 * (activities/deploy.ts), so 64 starts are in flight. bench/load.ts measures the deploy that adds a
 * sync to every connection (docs/reliability.md "Load at full size").
 */
export const APPLY_BATCHING: ApplyBatching = { size: 100, parallel: 4 };

/** The workflow id of an environment's apply: one at a time per environment, by Temporal's id uniqueness. */
export const applyWorkflowId = (environmentId: string): string => `deploy:${environmentId}`;

/** The definition the workflows run, from the deployed config. */
export function syncDefinition(
  environmentId: string,
  sync: SyncConfig,
  hash: string,
  models: readonly ModelConfig[],
): SyncDefinition {
  const validation = sync.recordValidation ?? 'off';
  return {
    environmentId,
    integrationId: sync.integration,
    syncName: sync.name,
    syncType: sync.syncType,
    runsMs: sync.runsMs,
    autoStart: sync.autoStart,
    trackDeletes: sync.trackDeletes,
    models: sync.outputs.map((output) => output.model),
    scriptHash: hash,
    webhookSubscriptions: sync.webhookSubscriptions,
    ...(validation === 'off'
      ? {}
      : {
          recordValidation: {
            mode: validation,
            models: modelsReferenced(
              models,
              sync.outputs.map((output) => output.model),
            ),
          },
        }),
  };
}
