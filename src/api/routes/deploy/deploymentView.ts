/**
 * The version history of deploys, used by `service deploy --redeploy` and the dashboard: list, one
 * version with the deployed source of every script, its request, and re-deploying it. (Preview and
 * apply are src/api/routes/deploy/postDeployPreview.ts and postDeploy.ts.)
 */
import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../../route.js';
import { booleanFlag } from '../shared.js';
import { deployRequestSchema, type Deployments } from '../../../deploy/deployments.js';

const planSchema = z.object({
  version: z.number().int(),
  previousVersion: z.number().int().nullable(),
  destructive: z.boolean(),
  changes: z.array(
    z.object({
      change: z.record(z.string(), z.unknown()),
      description: z.string(),
      destructive: z.boolean(),
      connections: z.number().int(),
      recordsErased: z.number().int(),
    }),
  ),
});

const deploymentSummary = z.object({
  version: z.number().int(),
  status: z.enum(['applying', 'active', 'superseded']),
  createdAt: z.string(),
  activatedAt: z.string().nullable(),
  redeployOf: z.number().int().nullable(),
});

/** A version is a Postgres integer: a larger number names no version (404), not an overflow (500). */
const versionParams = z.object({ version: z.coerce.number().int().min(1).max(2_147_483_647) }).strict();

export function createDeployRoutes({ deployments }: { deployments: Deployments }): AnyRoute[] {
  return [
    defineRoute({
      method: 'get',
      path: '/deployments',
      summary: 'List deployed versions, newest first',
      tags: ['Deploy'],
      auth: 'secret-key',
      responses: { 200: { description: 'Versions', schema: z.object({ deployments: z.array(deploymentSummary) }) } },
      handler: async ({ environment }) => ({
        deployments: (await deployments.list(environment.id)).map((deployment) => ({
          version: deployment.version,
          status: deployment.status,
          createdAt: deployment.createdAt,
          activatedAt: deployment.activatedAt,
          redeployOf: deployment.redeployOf,
          changes: deployment.changes,
        })),
      }),
    }),
    defineRoute({
      method: 'get',
      path: '/deployments/:version',
      summary: 'One deployed version: its service.yaml, normalized config and the source of every script',
      tags: ['Deploy'],
      auth: 'secret-key',
      params: versionParams,
      responses: { 200: { description: 'The version' } },
      handler: ({ environment, params }) => deployments.get(environment.id, params.version),
    }),
    defineRoute({
      method: 'get',
      path: '/deployments/:version/request',
      summary: 'The deploy request of a version (its service.yaml and script bundles), to deploy it again or elsewhere',
      tags: ['Deploy'],
      auth: 'secret-key',
      params: versionParams,
      responses: { 200: { description: 'A body for POST /deploy', schema: deployRequestSchema } },
      handler: ({ environment, params }) => deployments.requestFor(environment.id, params.version),
    }),
    defineRoute({
      method: 'post',
      path: '/deployments/:version/redeploy',
      summary: 'Deploy an earlier version again (rollback)',
      description: 'Writes a new version with the content of the given one and applies it like any deploy.',
      tags: ['Deploy'],
      auth: 'secret-key',
      params: versionParams,
      query: z.object({ allow_destructive: booleanFlag.optional() }).strict(),
      responses: {
        200: {
          description: 'The new version, active',
          schema: z.object({ version: z.number().int(), plan: planSchema }),
        },
      },
      handler: async ({ environment, params, query }) => {
        const request = await deployments.requestFor(environment.id, params.version);
        const { plan, deployment } = await deployments.apply(environment.id, request, {
          allowDestructive: query.allow_destructive ?? false,
          redeployOf: params.version,
        });
        return { version: deployment.version, plan };
      },
    }),
  ];
}
