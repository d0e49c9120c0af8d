/**
 * GET /sync/checkpoint (issue 32): the checkpoint a sync's script saved for one connection
 * (svc.saveCheckpoint). Its reset is deleteSyncCheckpoint.ts.
 */
import { z } from 'zod';
import { BASE_VARIANT } from '../../../syncs/checkpointStore.js';
import { selectSyncs } from '../../../syncs/selection.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const syncCheckpointQuery = z
  .object({
    provider_config_key: z.string().min(1),
    connection_id: z.string().min(1),
    sync: z
      .string()
      .min(1)
      .regex(/^[^*,]+$/, { error: 'sync must name one sync: no wildcard (`*`) or list (`a,b`) here' })
      .describe('The name of one sync (no wildcard, no list).'),
    variant: z
      .literal(BASE_VARIANT, { error: 'sync variants are not supported: only the default variant `base` exists' })
      .optional()
      .describe('Only `base`, the default variant.'),
  })
  .strict();

export const syncCheckpointSchema = z.object({
  checkpoint: z
    .record(z.string(), z.union([z.string(), z.number(), z.boolean()]))
    .nullable()
    .describe('What the script last saved with svc.saveCheckpoint; null when there is none.'),
  version: z.number().nullable().describe('1 on its first save, one more on each save since.'),
  updated_at: z.string().nullable(),
  run_id: z.string().nullable().describe('The execution that saved it (GET /runs/:run_id/history, GET /logs).'),
});

export const checkpointRefOf = async (
  deps: ApiDeps,
  environmentId: string,
  query: z.infer<typeof syncCheckpointQuery>,
) => {
  // The connection and the deployed sync must exist: unknown_connection, unknown_sync otherwise.
  await selectSyncs(deps, environmentId, {
    provider_config_key: query.provider_config_key,
    connection_id: query.connection_id,
    syncs: [query.sync],
  });
  return {
    environmentId,
    integrationId: query.provider_config_key,
    connectionId: query.connection_id,
    syncName: query.sync,
  };
};

export const getSyncCheckpointRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/sync/checkpoint',
    summary: 'The checkpoint a sync saved for one connection',
    description:
      'What the sync’s script last saved with `svc.saveCheckpoint` (docs/scripts.md "Resumable syncs"): the next run, or the next execution of a run that continues, starts from it.',
    tags: ['syncs'],
    auth: 'secret-key',
    query: syncCheckpointQuery,
    responses: {
      200: { description: 'The checkpoint, or nulls when there is none', schema: syncCheckpointSchema },
      404: { description: '`unknown_connection`, `unknown_sync`' },
    },
    handler: async ({ query, environment }) => {
      const stored = await deps.checkpoints.get(await checkpointRefOf(deps, environment.id, query));
      return {
        checkpoint: stored?.checkpoint ?? null,
        version: stored?.version ?? null,
        updated_at: stored?.updatedAt ?? null,
        run_id: stored?.runId ?? null,
      };
    },
  });
