import { z } from 'zod';
import { deployRequestSchema } from '../../../deploy/deployments.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { booleanFlag } from '../shared.js';
import { MAX_JSON_TOKENS } from '../../jsonBody.js';

export const postDeployRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/deploy',
    summary: 'Deploy a compiled service.yaml with its script bundles',
    description:
      'Removing a sync or an action needs `allow_destructive=true` (409 destructive_change_not_confirmed otherwise).',
    tags: ['deploy'],
    auth: 'secret-key',
    query: z.object({ allow_destructive: booleanFlag.optional() }).strict(),
    body: deployRequestSchema,
    // It carries the caller's own data (src/api/jsonBody.ts): as many tokens as any body may have.
    bodyTokens: MAX_JSON_TOKENS,
    responses: {
      200: {
        description: 'The plan applied and the version now active',
        schema: z.object({ version: z.number(), changes: z.array(z.unknown()), warnings: z.array(z.string()) }),
      },
    },
    handler: async ({ body, query, environment, spend }) => {
      const { plan, deployment } = await deps.deployments.apply(environment.id, body, {
        allowDestructive: query.allow_destructive ?? false,
        measure: spend,
      });
      return { version: deployment.version, changes: plan.changes, warnings: plan.warnings };
    },
  });
