import { z } from 'zod';
import { isServiceError } from '../../errors.js';
import { syncWorkflowId } from '../../temporal/connection.js';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { commaList, selectSyncs } from './shared.js';

export const syncStatusQuery = z
  .object({
    provider_config_key: z.string().min(1),
    syncs: commaList.describe('Sync names, comma-separated, or `*` for all.'),
    connection_id: z.string().min(1).optional(),
  })
  .strict();

const writeSummary = z.object({ added: z.number(), updated: z.number(), deleted: z.number(), unchanged: z.number() });

export const syncStatusSchema = z.object({
  syncs: z.array(
    z.object({
      id: z.string().describe('Id of the sync for this connection (its workflow id).'),
      connection_id: z.string(),
      name: z.string(),
      status: z.enum(['running', 'idle', 'paused', 'failed', 'not_started']),
      type: z.enum(['full', 'incremental']),
      finishedAt: z.string().nullable(),
      nextScheduledSyncAt: z.string().nullable(),
      frequency: z.string().describe('`runs` of service.yaml, for example `1h`.'),
      frequencyMs: z.number(),
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
          const base = {
            id: syncWorkflowId(ref),
            connection_id: connectionId,
            name: definition.syncName,
            type: definition.syncType,
            frequency: runsOf(definition.syncName),
            frequencyMs: definition.runsMs,
          };
          try {
            const status = await deps.syncs.status(ref);
            return {
              ...base,
              status: status.status,
              finishedAt: status.finishedAt,
              nextScheduledSyncAt: status.nextScheduledSyncAt,
              latestResult: status.latestResult?.models ?? null,
              latestError: status.latestError,
              recordCount: status.recordCount,
            };
          } catch (error) {
            if (!isServiceError(error) || error.code !== 'sync_not_found') throw error;
            return {
              ...base,
              status: 'not_started' as const,
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
