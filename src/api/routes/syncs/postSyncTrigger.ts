import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import type { SyncMode } from '../../../runtime/definitions.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { forEachSelectedSync } from '../../../syncs/selection.js';
import { syncActionResult, syncSelection } from '../shared.js';

const SYNC_MODES = ['incremental', 'full_refresh', 'full_refresh_and_clear_cache'] as const;

export const syncTriggerBody = z
  .object({
    provider_config_key: z
      .string()
      .min(1)
      .optional()
      .describe('The integration; the `Provider-Config-Key` header when omitted.'),
    connection_id: z
      .string()
      .min(1)
      .optional()
      .describe(
        'One connection (or the `Connection-Id` header); every connection of the integration when both are omitted.',
      ),
    syncs: syncSelection,
    opts: z
      .object({
        reset: z.boolean().optional().describe('Start afresh: the run fetches everything (a full refresh).'),
        emptyCache: z.boolean().optional().describe('Erase the records first; only together with `reset: true`.'),
      })
      .strict()
      .optional(),
    sync_mode: z
      .enum(SYNC_MODES)
      .optional()
      .describe(
        'Deprecated form of `opts`: `full_refresh` refetches everything; `full_refresh_and_clear_cache` erases the records first.',
      ),
    full_resync: z.boolean().optional().describe('Deprecated form of `opts.reset`.'),
  })
  .strict();

/** The run mode a trigger body asks for: `opts`, or the deprecated `sync_mode` / `full_resync`. */
export function triggerMode(body: z.output<typeof syncTriggerBody>): SyncMode {
  if (body.opts) {
    if (body.sync_mode !== undefined || body.full_resync !== undefined) {
      throw new ServiceError(
        'invalid_request',
        'Send either `opts` or the deprecated `sync_mode` / `full_resync`, not both.',
      );
    }
    if (body.opts.emptyCache && !body.opts.reset) {
      throw new ServiceError(
        'invalid_request',
        '`opts.emptyCache` erases the records, so it needs `opts.reset: true` (a run that refetches everything).',
      );
    }
    if (body.opts.reset) return body.opts.emptyCache ? 'full_refresh_and_clear_cache' : 'full_refresh';
    return 'incremental';
  }
  if (body.sync_mode !== undefined) return body.sync_mode;
  return body.full_resync ? 'full_refresh' : 'incremental';
}

export const postSyncTriggerRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/sync/trigger',
    summary: 'Run syncs now',
    description:
      'Runs each named sync for the connection (or every connection of the integration), even when paused. A connection whose sync is not running yet (created before the deploy, say) gets it started first. `opts: { reset: true }` refetches everything; with `emptyCache: true` the records are erased first.',
    tags: ['syncs'],
    auth: 'secret-key',
    headers: [
      { name: 'Provider-Config-Key', description: 'The integration, when the body has no `provider_config_key`.' },
      { name: 'Connection-Id', description: 'One connection, when the body has no `connection_id`.' },
    ],
    body: syncTriggerBody,
    responses: { 200: { description: 'The syncs triggered', schema: syncActionResult } },
    handler: async ({ body, req, environment }) => {
      const mode = triggerMode(body);
      const providerConfigKey = body.provider_config_key ?? req.header('provider-config-key');
      if (!providerConfigKey) {
        throw new ServiceError(
          'missing_provider_config_key',
          'Send `provider_config_key` in the body or the `Provider-Config-Key` header.',
        );
      }
      const connectionId = body.connection_id ?? (req.header('connection-id') || undefined);
      const selection = { provider_config_key: providerConfigKey, connection_id: connectionId, syncs: body.syncs };
      return forEachSelectedSync(deps, environment.id, selection, {
        existing: (ref) => deps.syncs.trigger(ref, mode),
        missing: async (definition, connectionId) => {
          await deps.syncs.ensureSync(definition, connectionId);
          await deps.syncs.trigger({ ...definition, connectionId }, mode);
        },
      });
    },
  });
