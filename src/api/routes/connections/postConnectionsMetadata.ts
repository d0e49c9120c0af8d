import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { metadataBody } from '../shared.js';
import { MAX_JSON_TOKENS } from '../../jsonBody.js';

const metadataAnswer = z.object({
  connection_id: z.union([z.string(), z.array(z.string())]),
  provider_config_key: z.string(),
  metadata: z.record(z.string(), z.unknown()),
});

/**
 * POST replaces the metadata, PATCH merges into it, of one connection or of several at once (all or
 * none); both answer the request as applied, as the de-facto API does (201 for POST, 200 for PATCH).
 */
export const connectionsMetadataRoute = (deps: ApiDeps, method: 'post' | 'patch') =>
  defineRoute({
    method,
    path: '/connections/metadata',
    summary:
      method === 'post' ? 'Replace the metadata of connections' : 'Merge properties into the metadata of connections',
    tags: ['connections'],
    auth: 'secret-key',
    body: metadataBody,
    // It carries the caller's own data (src/api/jsonBody.ts): as many tokens as any body may have.
    bodyTokens: MAX_JSON_TOKENS,
    responses: {
      [method === 'post' ? 201 : 200]: { description: 'The request, applied', schema: metadataAnswer },
    },
    handler: async ({ body, res, environment, spend }) => {
      const ids = Array.isArray(body.connection_id) ? body.connection_id : [body.connection_id];
      // The echo of a large body is serialized on the shared loop: charged as the body's parse is, and
      // before the write, so that a key in debt is refused before anything changes.
      const echo = spend(() => JSON.stringify(body));
      await deps.connections.writeMetadataOf(
        environment.id,
        body.provider_config_key,
        ids,
        body.metadata,
        method === 'post' ? 'replace' : 'merge',
      );
      res
        .status(method === 'post' ? 201 : 200)
        .type('json')
        .send(echo);
      return undefined;
    },
  });

export const postConnectionsMetadataRoute = (deps: ApiDeps) => connectionsMetadataRoute(deps, 'post');
