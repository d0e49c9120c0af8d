/**
 * The activities of a deploy's apply (workflows/applyDeployment.ts): the per-connection work on the
 * sync entities, each idempotent, so a step repeated after a worker died changes nothing more.
 * Only an `applyDeployment` workflow with the id `deploy:<env>` (which only the service starts) may
 * call them, and only for its own environment.
 */
import { Context } from '@temporalio/activity';
import type { DeploymentStore } from '../src/deploy/store.js';
import { syncDefinition } from '../src/deploy/plan.js';
import { ServiceError } from '../src/errors.js';
import { mapLimit } from '../src/mapLimit.js';
import type { RecordStore } from '../src/records/types.js';
import type { SyncDefinition } from '../src/runtime/definitions.js';
import { requireEnvironment, scopeDenied, type RunAuthorities } from '../src/temporal/runAuthority.js';
import type { SyncControl } from '../src/temporal/syncControl.js';
import { callingRun, translated } from './runtime.js';

export interface DeployActivityDeps {
  deployments: DeploymentStore;
  records: Pick<RecordStore, 'eraseSync'>;
  syncs: Pick<SyncControl, 'startSync' | 'startedBy' | 'stop'>;
  /** Connection ids of one integration of an environment. */
  connectionIds(environmentId: string, integrationId: string): Promise<string[]>;
  /** How many entity calls of one batch run at once. @default 16 */
  concurrency?: number;
}

export interface EntityBatch {
  environmentId: string;
  version: number;
  integrationId: string;
  connectionIds: string[];
}

/** An entity that ran before this apply: it is handed its new definition by the workflow's signal. */
export interface EntityToReconfigure {
  workflowId: string;
  definition: SyncDefinition;
}

/** What tags an entity started by this apply (in its memo), so a repeated step knows it for its own. */
export const startedByApply = (environmentId: string, version: number): string => `deploy:${environmentId}:${version}`;

export function createDeployActivities(deps: DeployActivityDeps & { authorities: RunAuthorities }) {
  const concurrency = deps.concurrency ?? 16;

  async function authorize(environmentId: string): Promise<void> {
    const authority = await callingRun(deps.authorities);
    if (authority.workflowType !== 'applyDeployment') {
      throw scopeDenied(`workflow ${authority.workflowId} (${authority.workflowType}) may not apply deploys`);
    }
    requireEnvironment(authority, environmentId);
  }

  return {
    /** The connection ids of an integration, in code-unit order (the workflow pages through them by id). */
    deployConnections: (input: { environmentId: string; integrationId: string }): Promise<string[]> =>
      translated(async () => {
        await authorize(input.environmentId);
        const ids = await deps.connectionIds(input.environmentId, input.integrationId);
        return [...ids].sort();
      }),

    /** Stops one sync's entity for each connection of the batch (stopping a stopped one does nothing). */
    stopSyncEntities: (input: EntityBatch & { syncName: string }): Promise<void> =>
      translated(async () => {
        await authorize(input.environmentId);
        await mapLimit(input.connectionIds, concurrency, async (connectionId) => {
          await deps.syncs.stop(
            {
              environmentId: input.environmentId,
              integrationId: input.integrationId,
              connectionId,
              syncName: input.syncName,
            },
            'sync removed by deploy',
          );
          Context.current().heartbeat();
        });
      }),

    /** Erases every record of a removed sync (erasing twice erases nothing more). */
    eraseSyncRecords: (input: { environmentId: string; integrationId: string; syncName: string }): Promise<number> =>
      translated(async () => {
        await authorize(input.environmentId);
        return deps.records.eraseSync(input);
      }),

    /**
     * Starts the entities of the syncs for each connection of the batch that has none, and returns
     * those that already ran, with the definition the workflow signals to them. An entity started by
     * an earlier attempt of this same step (the worker died after starting it) is recognised by its
     * memo and not returned: every entity is started or reconfigured once per apply.
     */
    startSyncEntities: (input: EntityBatch & { syncNames: string[] }): Promise<EntityToReconfigure[]> =>
      translated(async () => {
        await authorize(input.environmentId);
        const deployment = await deps.deployments.get(input.environmentId, input.version);
        if (!deployment) {
          throw new ServiceError('deploy_inconsistent', `version ${input.version} is not recorded`);
        }
        const definitions = input.syncNames.map((syncName) => {
          const sync = deployment.config.integrations
            .find((integration) => integration.id === input.integrationId)
            ?.syncs.find((candidate) => candidate.name === syncName);
          const script = deployment.scripts.find(
            (s) => s.integration === input.integrationId && s.kind === 'sync' && s.name === syncName,
          );
          if (!sync || !script) {
            throw new ServiceError('deploy_inconsistent', `no script for sync ${input.integrationId}/${syncName}`);
          }
          return syncDefinition(input.environmentId, sync, script.hash, deployment.config.models);
        });
        const tag = startedByApply(input.environmentId, input.version);
        const repeated = Context.current().info.attempt > 1;
        const work = input.connectionIds.flatMap((connectionId) =>
          definitions.map((definition) => ({ connectionId, definition })),
        );
        const existing: EntityToReconfigure[] = [];
        await mapLimit(work, concurrency, async ({ connectionId, definition }) => {
          const result = await deps.syncs.startSync(definition, connectionId, undefined, tag);
          if (!result.started && !(repeated && (await deps.syncs.startedBy(result.workflowId)) === tag)) {
            existing.push({ workflowId: result.workflowId, definition: result.definition });
          }
          Context.current().heartbeat();
        });
        return existing;
      }),

    /** Marks the version active once every step is done (false: a later version superseded it). */
    activateDeployment: (input: { environmentId: string; version: number }): Promise<boolean> =>
      translated(async () => {
        await authorize(input.environmentId);
        return deps.deployments.activate(input.environmentId, input.version);
      }),
  };
}

export type DeployActivities = ReturnType<typeof createDeployActivities>;
