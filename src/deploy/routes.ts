/**
 * The deploy API used by `service deploy` and the dashboard: preview, apply, the version history,
 * re-deploying an earlier version, and reading back the deployed source of every script.
 */
import { z } from 'zod';
import { defineRoute, type AnyRoute } from '../api/route.js';
import { deployRequestSchema, type Deployments } from './deployments.js';

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

const applyBody = deployRequestSchema.extend({ allow_destructive: z.boolean().default(false) }).strict();
const versionParams = z.object({ version: z.coerce.number().int().min(1) }).strict();

export function createDeployRoutes({ deployments }: { deployments: Deployments }): AnyRoute[] {
  return [
    defineRoute({
      method: 'post',
      path: '/deploy/preview',
      summary: 'Preview a deploy',
      description:
        'Compiles the service.yaml and compares it and the script bundles with what is deployed. Returns every change with its reach (connections touched, records a removal would erase). Changes nothing.',
      tags: ['Deploy'],
      auth: 'secret-key',
      body: deployRequestSchema,
      responses: { 200: { description: 'The plan', schema: planSchema } },
      handler: ({ environment, body }) => deployments.preview(environment.id, body),
    }),
    defineRoute({
      method: 'post',
      path: '/deploy',
      summary: 'Deploy a configuration and its scripts',
      description:
        'Applies the changes atomically per SPEC.md "Effects of deploying a configuration". A change that removes a sync (erasing its records) or an action fails with 409 `destructive_change_not_confirmed` unless `allow_destructive` is true. Deploys of one environment run one at a time.',
      tags: ['Deploy'],
      auth: 'secret-key',
      body: applyBody,
      responses: {
        200: {
          description: 'The new version, active',
          schema: z.object({ version: z.number().int(), plan: planSchema }),
        },
      },
      handler: async ({ environment, body }) => {
        const { allow_destructive: allowDestructive, ...request } = body;
        const { plan, deployment } = await deployments.apply(environment.id, request, { allowDestructive });
        return { version: deployment.version, plan };
      },
    }),
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
      method: 'post',
      path: '/deployments/:version/redeploy',
      summary: 'Deploy an earlier version again (rollback)',
      description: 'Writes a new version with the content of the given one and applies it like any deploy.',
      tags: ['Deploy'],
      auth: 'secret-key',
      params: versionParams,
      body: z.object({ allow_destructive: z.boolean().default(false) }).strict(),
      responses: {
        200: {
          description: 'The new version, active',
          schema: z.object({ version: z.number().int(), plan: planSchema }),
        },
      },
      handler: async ({ environment, params, body }) => {
        const request = await deployments.requestFor(environment.id, params.version);
        const { plan, deployment } = await deployments.apply(environment.id, request, {
          allowDestructive: body.allow_destructive,
          redeployOf: params.version,
        });
        return { version: deployment.version, plan };
      },
    }),
  ];
}
