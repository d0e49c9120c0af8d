import { z } from 'zod';
import { credentialsSchema } from '../../connections/connectionService.js';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { connectionRecordSchema } from './getConnection.js';
import { ensureConnectionSyncs } from './shared.js';

export const importConnectionBody = z
  .object({
    provider_config_key: z.string().min(1),
    connection_id: z.string().min(1),
    credentials: credentialsSchema,
    connection_config: z.record(z.string(), z.string()).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();

export const postConnectionsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/connections',
    summary: 'Import a connection with existing credentials',
    description:
      'Creates the connection, or gives an existing one new credentials (its metadata is kept unless given). Starts the deployed syncs of the integration for it (paused where `auto_start` is false).',
    tags: ['connections'],
    auth: 'secret-key',
    body: importConnectionBody,
    responses: {
      200: { description: 'The connection record (without the refresh token)', schema: connectionRecordSchema },
    },
    handler: async ({ body, environment }) => {
      const record = await deps.connections.importConnection({
        environmentId: environment.id,
        integrationId: body.provider_config_key,
        connectionId: body.connection_id,
        credentials: body.credentials,
        ...(body.connection_config === undefined ? {} : { connection_config: body.connection_config }),
        ...(body.metadata === undefined ? {} : { metadata: body.metadata }),
      });
      await ensureConnectionSyncs(deps, {
        environmentId: environment.id,
        integrationId: body.provider_config_key,
        connectionId: body.connection_id,
      });
      return record;
    },
  });
