import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { credentialsSchema } from '../../../connections/credentials.js';
import { connectionTagsSchema, endUserSchema, tagsWithEndUser } from '../../../connections/tags.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { connectionRecordSchema, connectionRecordView } from './connectionView.js';
import { ensureConnectionSyncs } from '../../../syncs/selection.js';

/** An empty string means absent, as in the de-facto API; a URL is refused (webhooks go to the environment's URL). */
export const webhookUrlOverride = z
  .literal('', {
    error: 'a per-connection webhook URL is not supported: webhooks go to the URL of PUT /webhook-settings',
  })
  .optional()
  .describe('Accepted only empty: webhooks go to the environment’s URL (PUT /webhook-settings).');

export const importConnectionBody = z
  .object({
    provider_config_key: z.string().min(1),
    connection_id: z.string().min(1).optional().describe('A new random id (a UUID) when omitted.'),
    credentials: credentialsSchema,
    connection_config: z.record(z.string(), z.string()).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    tags: connectionTagsSchema.optional().describe('Replace the connection’s tags (kept when omitted).'),
    end_user: endUserSchema
      .optional()
      .describe('Deprecated: kept as the tags `end_user_id`, `end_user_email`, `end_user_display_name`.'),
    webhook_url_override: webhookUrlOverride,
  })
  .strict();

export const postConnectionsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/connections',
    summary: 'Import a connection with existing credentials',
    description:
      'Creates the connection, or gives an existing one new credentials (its metadata and tags are kept unless given). Starts the deployed syncs of the integration for it (paused where `auto_start` is false).',
    tags: ['connections'],
    auth: 'secret-key',
    body: importConnectionBody,
    responses: {
      200: { description: 'The connection record (without the refresh token)', schema: connectionRecordSchema },
    },
    handler: async ({ body, environment }) => {
      const connectionId = body.connection_id ?? randomUUID();
      const tags =
        body.tags === undefined && body.end_user === undefined ? undefined : tagsWithEndUser(body.end_user, body.tags);
      const record = await deps.connections.importConnection({
        environmentId: environment.id,
        integrationId: body.provider_config_key,
        connectionId,
        credentials: body.credentials,
        ...(body.connection_config === undefined ? {} : { connection_config: body.connection_config }),
        ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
        ...(tags === undefined ? {} : { tags }),
      });
      await ensureConnectionSyncs(deps, {
        environmentId: environment.id,
        integrationId: body.provider_config_key,
        connectionId,
      });
      return connectionRecordView(deps, environment.id, record);
    },
  });
