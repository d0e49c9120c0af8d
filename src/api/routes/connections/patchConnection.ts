import { z } from 'zod';
import { connectionTagsSchema, endUserSchema, tagsWithEndUser } from '../../../connections/tags.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { webhookUrlOverride } from './postConnections.js';

export const patchConnectionBody = z
  .object({
    tags: connectionTagsSchema.optional().describe('The connection’s tags, replacing the current ones.'),
    end_user: endUserSchema
      .optional()
      .describe('Deprecated: sets the tags `end_user_id`, `end_user_email`, `end_user_display_name`.'),
    webhook_url_override: webhookUrlOverride,
  })
  .strict();

export const patchConnectionRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'patch',
    path: '/connections/:connection_id',
    summary: 'Change the tags of a connection',
    tags: ['connections'],
    auth: 'secret-key',
    params: z.object({ connection_id: z.string().min(1) }).strict(),
    query: z.object({ provider_config_key: z.string().min(1) }).strict(),
    body: patchConnectionBody,
    responses: { 200: { description: 'Changed', schema: z.object({ success: z.literal(true) }) } },
    handler: async ({ params, query, body, environment }) => {
      const scope = {
        environmentId: environment.id,
        integrationId: query.provider_config_key,
        connectionId: params.connection_id,
      };
      if (body.tags !== undefined || body.end_user !== undefined) {
        // Given tags replace the current ones; an end user alone changes only its own tags.
        const tags =
          body.tags === undefined
            ? { ...(await deps.connections.getConnectionStatus(scope)).tags, ...tagsWithEndUser(body.end_user, {}) }
            : tagsWithEndUser(body.end_user, body.tags);
        await deps.connections.setTags(scope, tags);
      } else {
        // Nothing to change; still a 404 for a connection that does not exist.
        await deps.connections.getMetadata(scope);
      }
      return { success: true as const };
    },
  });
