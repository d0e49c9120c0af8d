import { z } from 'zod';
import { deployRequestSchema } from '../../../deploy/deployments.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { MAX_JSON_TOKENS } from '../../jsonBody.js';

export const postDeployPreviewRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/deploy/preview',
    summary: 'What a deploy would change (changes nothing)',
    tags: ['deploy'],
    auth: 'secret-key',
    body: deployRequestSchema,
    // It carries the caller's own data (src/api/jsonBody.ts): as many tokens as any body may have.
    bodyTokens: MAX_JSON_TOKENS,
    responses: {
      200: {
        description: 'The plan',
        schema: z
          .object({
            version: z.number(),
            changes: z.array(z.unknown()),
            destructive: z.boolean(),
            warnings: z.array(z.string()),
          })
          .loose(),
      },
    },
    handler: async ({ body, environment, spend }) => {
      return deps.deployments.preview(environment.id, body, spend);
    },
  });
