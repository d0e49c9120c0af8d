/**
 * DELETE /sync/checkpoint (issue 32): resets the checkpoint a sync's script saved for one connection, after
 * which the sync's next run starts from the beginning.
 */
import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { checkpointRefOf, syncCheckpointQuery } from './getSyncCheckpoint.js';

export const deleteSyncCheckpointRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'delete',
    path: '/sync/checkpoint',
    summary: 'Reset a sync’s checkpoint for one connection',
    description:
      'The sync’s next run starts from the beginning (its script’s `svc.getCheckpoint()` answers null). A run under way keeps going from where it is and may save a checkpoint again; a full resync (`POST /sync/trigger` with `full_refresh`) also clears it.',
    tags: ['syncs'],
    auth: 'secret-key',
    query: syncCheckpointQuery,
    responses: {
      200: {
        description: 'Reset',
        schema: z.object({ deleted: z.boolean().describe('False when there was no checkpoint.') }),
      },
      404: { description: '`unknown_connection`, `unknown_sync`' },
    },
    handler: async ({ query, environment }) => ({
      deleted: await deps.checkpoints.clear(await checkpointRefOf(deps, environment.id, query)),
    }),
  });
