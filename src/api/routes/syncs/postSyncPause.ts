import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { forEachSelectedSync } from '../../../syncs/selection.js';
import { syncActionResult, syncSelectionBody } from '../shared.js';

export const postSyncPauseRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/sync/pause',
    summary: 'Pause syncs: no scheduled runs until started again',
    description: 'A run in progress finishes. A connection whose sync is not running yet gets it created paused.',
    tags: ['syncs'],
    auth: 'secret-key',
    body: syncSelectionBody,
    responses: { 200: { description: 'The syncs paused', schema: syncActionResult } },
    handler: async ({ body, environment }) =>
      forEachSelectedSync(deps, environment.id, body, {
        existing: (ref) => deps.syncs.pause(ref),
        missing: async (definition, connectionId) => {
          await deps.syncs.ensureSync({ ...definition, autoStart: false }, connectionId);
        },
      }),
  });
