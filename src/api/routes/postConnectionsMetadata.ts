import { z } from 'zod';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { metadataBody } from './shared.js';

/** POST replaces the metadata, PATCH merges into it; both answer what is now stored. */
export const connectionsMetadataRoute = (deps: ApiDeps, method: 'post' | 'patch') =>
  defineRoute({
    method,
    path: '/connections/metadata',
    summary:
      method === 'post' ? 'Replace the metadata of a connection' : 'Merge properties into the metadata of a connection',
    tags: ['connections'],
    auth: 'secret-key',
    body: metadataBody,
    responses: {
      200: {
        description: 'The metadata now stored',
        schema: z.object({ metadata: z.record(z.string(), z.unknown()) }),
      },
    },
    handler: async ({ body, environment }) => {
      const scope = {
        environmentId: environment.id,
        integrationId: body.provider_config_key,
        connectionId: body.connection_id,
      };
      if (method === 'post') await deps.connections.setMetadata(scope, body.metadata);
      else await deps.connections.updateMetadata(scope, body.metadata);
      return { metadata: await deps.connections.getMetadata(scope) };
    },
  });

export const postConnectionsMetadataRoute = (deps: ApiDeps) => connectionsMetadataRoute(deps, 'post');
