import { z } from 'zod';
import { isServiceError } from '../../../errors.js';
import { syncWorkflowId } from '../../../temporal/connection.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import type { SyncRunResult, SyncStatusName } from '../../../runtime/definitions.js';
import { selectSyncs } from '../../../syncs/selection.js';
import { redactorFor, syncNameList } from '../shared.js';

export const syncStatusQuery = z
  .object({
    provider_config_key: z.string().min(1),
    syncs: syncNameList.describe('Sync names, comma-separated (`name::base` accepted), or `*` for all.'),
    connection_id: z.string().min(1).optional(),
  })
  .strict();

/** The de-facto status names of a sync, in the order of the de-facto documentation. */
export const PUBLIC_SYNC_STATUSES = ['RUNNING', 'PAUSED', 'STOPPED', 'SUCCESS', 'ERROR'] as const;
export type PublicSyncStatus = (typeof PUBLIC_SYNC_STATUSES)[number];

/**
 * The status the API answers for what the sync entity reports (`undefined`: no entity for that
 * connection). An idle sync is `SUCCESS`, as in the de-facto API, whose idle state is its last run's.
 */
export function publicSyncStatus(status: SyncStatusName | undefined): PublicSyncStatus {
  switch (status) {
    case 'running':
      return 'RUNNING';
    case 'paused':
      return 'PAUSED';
    case 'failed':
      return 'ERROR';
    case 'idle':
      return 'SUCCESS';
    case undefined:
      return 'STOPPED';
  }
}

/** `type` of a status entry: the kind of the latest finished run. */
export function publicSyncType(latest: SyncRunResult | null): 'INCREMENTAL' | 'INITIAL' {
  return latest === null || latest.full ? 'INITIAL' : 'INCREMENTAL';
}

const writeSummary = z.object({ added: z.number(), updated: z.number(), deleted: z.number(), unchanged: z.number() });

export const syncStatusSchema = z.object({
  syncs: z.array(
    z.object({
      id: z.string().describe('Id of the sync for this connection (its workflow id).'),
      connection_id: z.string(),
      name: z.string(),
      status: z
        .enum(PUBLIC_SYNC_STATUSES)
        .describe(
          '`RUNNING` (a run in progress), `PAUSED`, `ERROR` (the last run failed), `SUCCESS` (idle after a successful run, or before the first), `STOPPED` (the sync is not running for this connection).',
        ),
      type: z
        .enum(['INCREMENTAL', 'INITIAL'])
        .describe(
          'Of the latest run: `INCREMENTAL`, or `INITIAL` when it was a full one (`sync_type: full`, or a full refresh) or no run finished yet.',
        ),
      sync_type: z.enum(['incremental', 'full']).describe('`sync_type` of service.yaml.'),
      checkpoint: z
        .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
        .nullable()
        .describe(
          'What the sync’s script last saved with svc.saveCheckpoint for this connection (GET /sync/checkpoint has its version and run); null when there is none.',
        ),
      finishedAt: z.string().nullable(),
      nextScheduledSyncAt: z.string().nullable(),
      frequency: z
        .string()
        .describe(
          'How often it runs for this connection: its own frequency (PUT /sync/update-connection-frequency), else `runs` of service.yaml, for example `1h`.',
        ),
      frequencyMs: z.number(),
      frequency_overridden: z.boolean().describe('True when `frequency` is the connection’s own.'),
      latestResult: z
        .record(z.string(), writeSummary)
        .nullable()
        .describe('Per model: added, updated, deleted, unchanged.'),
      latestError: z.object({ code: z.string(), message: z.string() }).nullable(),
      recordCount: z.record(z.string(), z.number()),
    }),
  ),
});

export const getSyncStatusRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/sync/status',
    summary: 'Status of syncs per connection',
    tags: ['syncs'],
    auth: 'secret-key',
    query: syncStatusQuery,
    responses: { 200: { description: 'One entry per (connection, sync)', schema: syncStatusSchema } },
    handler: async ({ query, environment }) => {
      const { definitions, connectionIds } = await selectSyncs(deps, environment.id, query);
      const deployment = await deps.deployments.current(environment.id);
      const runsOf = (name: string) =>
        deployment?.config.integrations
          .find((integration) => integration.id === query.provider_config_key)
          ?.syncs.find((sync) => sync.name === name)?.runs ?? '';
      const pairs = connectionIds.flatMap((connectionId) =>
        definitions.map((definition) => ({ connectionId, definition })),
      );
      const syncs = await Promise.all(
        pairs.map(async ({ connectionId, definition }) => {
          const ref = { ...definition, connectionId };
          const [own, stored] = await Promise.all([
            deps.syncFrequencies.get(ref),
            deps.checkpoints.get({
              environmentId: environment.id,
              integrationId: definition.integrationId,
              connectionId,
              syncName: definition.syncName,
            }),
          ]);
          const checkpoint = stored?.checkpoint ?? null;
          const base = {
            id: syncWorkflowId(ref),
            connection_id: connectionId,
            name: definition.syncName,
            sync_type: definition.syncType,
            frequency: own?.frequency ?? runsOf(definition.syncName),
            frequencyMs: own?.frequencyMs ?? definition.runsMs,
            frequency_overridden: own !== undefined,
          };
          try {
            const status = await deps.syncs.status(ref);
            const redact = await redactorFor(deps, ref);
            return {
              ...base,
              status: publicSyncStatus(status.status),
              type: publicSyncType(status.latestResult),
              checkpoint,
              finishedAt: status.finishedAt,
              nextScheduledSyncAt: status.nextScheduledSyncAt,
              latestResult: status.latestResult?.models ?? null,
              latestError: status.latestError && {
                ...status.latestError,
                message: redact.text(status.latestError.message),
              },
              recordCount: status.recordCount,
            };
          } catch (error) {
            if (!isServiceError(error) || error.code !== 'sync_not_found') throw error;
            return {
              ...base,
              status: publicSyncStatus(undefined),
              type: publicSyncType(null),
              checkpoint,
              finishedAt: null,
              nextScheduledSyncAt: null,
              latestResult: null,
              latestError: null,
              recordCount: {},
            };
          }
        }),
      );
      return { syncs };
    },
  });
