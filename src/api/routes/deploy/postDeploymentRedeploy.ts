import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { booleanFlag } from '../shared.js';
import { planSchema, deploymentVersionParams } from './deploymentView.js';

export const postDeploymentRedeployRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/deployments/:version/redeploy',
    summary: 'Deploy an earlier version again (rollback)',
    description: 'Writes a new version with the content of the given one and applies it like any deploy.',
    tags: ['Deploy'],
    auth: 'secret-key',
    params: deploymentVersionParams,
    query: z.object({ allow_destructive: booleanFlag.optional() }).strict(),
    responses: {
      200: {
        description: 'The new version, active',
        schema: z.object({ version: z.number().int(), plan: planSchema }),
      },
    },
    handler: async ({ environment, params, query, spend }) => {
      const request = await deps.deployments.requestFor(environment.id, params.version);
      const { plan, deployment } = await deps.deployments.apply(environment.id, request, {
        allowDestructive: query.allow_destructive ?? false,
        redeployOf: params.version,
        measure: spend,
      });
      return { version: deployment.version, plan };
    },
  });
