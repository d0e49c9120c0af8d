import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { forEachSelectedSync, syncActionResult, syncSelectionBody } from './shared.js';

export const syncTriggerBody = syncSelectionBody.extend({
  sync_mode: z
    .enum(['incremental', 'full_refresh', 'full_refresh_and_clear_cache'])
    .default('incremental')
    .describe('`full_refresh` refetches everything; `full_refresh_and_clear_cache` erases the records first.'),
});

export const postSyncTriggerRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/sync/trigger',
    summary: 'Run syncs now',
    description:
      'Runs each named sync for the connection (or every connection of the integration), even when paused. A connection whose sync is not running yet (created before the deploy, say) gets it started first.',
    tags: ['syncs'],
    auth: 'secret-key',
    body: syncTriggerBody,
    responses: { 200: { description: 'The syncs triggered', schema: syncActionResult } },
    handler: async ({ body, environment }) =>
      forEachSelectedSync(deps, environment.id, body, {
        existing: (ref) => deps.syncs.trigger(ref, body.sync_mode),
        missing: async (definition, connectionId) => {
          await deps.syncs.ensureSync(definition, connectionId);
          await deps.syncs.trigger({ ...definition, connectionId }, body.sync_mode);
        },
      }),
  });
