/**
 * Managing environments: create, list, rename, delete, rotate a secret key. These routes take the
 * service admin key (SERVICE_ADMIN_KEY), never an environment's secret key: environments are isolated
 * from each other, so what acts on several of them needs an authority above any one of them
 * (docs/api.md "Environments"). The admin key in turn opens no environment's data: every other route
 * refuses it.
 */
import { z } from 'zod';
import type { Environment } from '../../../connections/environmentStore.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const environmentSchema = z.object({
  id: z.string().describe('Stable id: in workflow ids and records; never changes.'),
  name: z.string().describe('Lower-case letters, digits, `_` and `-`; in inbound webhook URLs.'),
  public_key: z.string().describe('Names the environment in connect links; not a secret.'),
  created_at: z.string(),
});
export type EnvironmentView = z.infer<typeof environmentSchema>;

export const createEnvironmentBody = z
  .object({ name: z.string().min(1).max(63).describe('Lower-case letters, digits, `_` and `-`, at most 63.') })
  .strict();
export const renameEnvironmentBody = createEnvironmentBody;

const idParams = z.object({ id: z.string().min(1).max(64) }).strict();

const withKey = z.object({
  environment: environmentSchema,
  secret_key: z.string().describe('The secret key: shown this once, stored only as a SHA-256 hash.'),
});

export const environmentView = (environment: Environment): EnvironmentView => ({
  id: environment.id,
  name: environment.name,
  public_key: environment.publicKey,
  created_at: environment.createdAt,
});

const ADMIN = {
  tags: ['environments'],
  auth: 'admin-key' as const,
};

export const getEnvironmentsRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN,
    method: 'get',
    path: '/environments',
    summary: 'List the environments (service admin key)',
    responses: {
      200: {
        description: 'Every environment, by name',
        schema: z.object({ environments: z.array(environmentSchema) }),
      },
    },
    handler: async () => ({ environments: (await deps.environments.list()).map(environmentView) }),
  });

export const postEnvironmentsRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN,
    method: 'post',
    path: '/environments',
    summary: 'Create an environment; its secret key is in the answer, once (service admin key)',
    body: createEnvironmentBody,
    responses: {
      200: { description: 'The environment and its secret key', schema: withKey },
      409: { description: '`environment_exists`: the name is taken' },
    },
    handler: async ({ body }) => {
      const { environment, secretKey } = await deps.environments.create({ name: body.name });
      return { environment: environmentView(environment), secret_key: secretKey };
    },
  });

export const patchEnvironmentRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN,
    method: 'patch',
    path: '/environments/:id',
    summary: 'Rename an environment (service admin key)',
    description:
      'Only the name changes; the id, keys, connections and records stay. Inbound webhook URLs carry the name (`/webhook/<name>/<integration>`), so they change with it: `warnings` says so.',
    params: idParams,
    body: renameEnvironmentBody,
    responses: {
      200: {
        description: 'The environment now',
        schema: z.object({ environment: environmentSchema, warnings: z.array(z.string()) }),
      },
      404: { description: '`unknown_environment`' },
      409: { description: '`environment_exists`: the name is taken' },
    },
    handler: async ({ params, body }) => {
      const before = await deps.environments.get(params.id);
      const environment = await deps.environments.rename(params.id, body.name);
      const warnings =
        before.name === environment.name
          ? []
          : [
              `inbound webhook URLs of this environment's integrations are now ${deps.publicUrl ?? ''}/webhook/${environment.name}/<integration>: update them at the providers (the old name answers 404)`,
            ];
      return { environment: environmentView(environment), warnings };
    },
  });

export const deleteEnvironmentRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN,
    method: 'delete',
    path: '/environments/:id',
    summary: 'Delete an environment without connections, with everything it holds (service admin key)',
    description:
      'Refused with 409 `environment_not_empty` while the environment has connections: delete them first with the environment’s own key (DELETE /connections/:id stops their syncs and erases their records). Then the environment goes with its integrations (and OAuth client secrets), environment variables, webhook settings and secrets, deployments, logs, run history and delivery log; its key stops working.',
    params: idParams,
    responses: {
      200: {
        description: 'What was removed besides the rows that cascade',
        schema: z.object({
          deleted: z.literal(true),
          environment: environmentSchema,
          removed: z.record(z.string(), z.number()),
        }),
      },
      404: { description: '`unknown_environment`' },
      409: { description: '`environment_not_empty`: it still has connections' },
    },
    handler: async ({ params }) => {
      const { environment, removed } = await deps.environments.delete(params.id);
      return { deleted: true as const, environment: environmentView(environment), removed };
    },
  });

export const postEnvironmentRotateKeyRoute = (deps: ApiDeps) =>
  defineRoute({
    ...ADMIN,
    method: 'post',
    path: '/environments/:id/rotate-key',
    summary: 'Replace an environment’s secret key; the old key stops working immediately (service admin key)',
    description:
      'No grace period: the old key is refused from the moment this answers, by every API server (the key is looked up in Postgres on every request). The public key stays.',
    params: idParams,
    responses: {
      200: { description: 'The environment and its new secret key, shown once', schema: withKey },
      404: { description: '`unknown_environment`' },
    },
    handler: async ({ params }) => {
      const secretKey = await deps.environments.rotateSecretKey(params.id);
      return { environment: environmentView(await deps.environments.get(params.id)), secret_key: secretKey };
    },
  });

export const environmentRoutes = (deps: ApiDeps) => [
  getEnvironmentsRoute(deps),
  postEnvironmentsRoute(deps),
  patchEnvironmentRoute(deps),
  deleteEnvironmentRoute(deps),
  postEnvironmentRotateKeyRoute(deps),
];
