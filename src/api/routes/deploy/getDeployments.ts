import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { deploymentSummarySchema } from './deploymentView.js';

export const getDeploymentsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/deployments',
    summary: 'List deployed versions, newest first',
    tags: ['Deploy'],
    auth: 'secret-key',
    responses: {
      200: { description: 'Versions', schema: z.object({ deployments: z.array(deploymentSummarySchema) }) },
    },
    handler: async ({ environment }) => ({
      deployments: (await deps.deployments.list(environment.id)).map((deployment) => ({
        version: deployment.version,
        status: deployment.status,
        createdAt: deployment.createdAt,
        activatedAt: deployment.activatedAt,
        redeployOf: deployment.redeployOf,
        changes: deployment.changes,
      })),
    }),
  });
