import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { forEachSelectedSync } from '../../../syncs/selection.js';
import { syncActionResult, syncSelectionBody } from '../shared.js';

export const postSyncStartRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/sync/start',
    summary: 'Start (resume) paused syncs',
    description:
      'A sync whose run time passed while paused runs at once. A connection whose sync is not running yet gets it started.',
    tags: ['syncs'],
    auth: 'secret-key',
    body: syncSelectionBody,
    responses: { 200: { description: 'The syncs started', schema: syncActionResult } },
    handler: async ({ body, environment }) =>
      forEachSelectedSync(deps, environment.id, body, {
        existing: (ref) => deps.syncs.resume(ref),
        missing: async (definition, connectionId) => {
          await deps.syncs.ensureSync({ ...definition, autoStart: true }, connectionId);
        },
      }),
  });
