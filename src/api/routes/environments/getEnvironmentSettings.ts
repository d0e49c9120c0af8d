import { z } from 'zod';
import type { Environment } from '../../../connections/environmentStore.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const environmentSettingsSchema = z.object({
  name: z.string(),
  public_key: z.string().describe('Names the environment in connect links; not a secret.'),
  allow_public_key_connect: z
    .boolean()
    .describe('Connect links with the public key alone (no connect session) may create connections. Default false.'),
  allow_unsigned_webhooks: z
    .boolean()
    .describe('Inbound webhooks of integrations without a webhook secret are accepted unsigned. Default false.'),
});

export const patchEnvironmentSettingsBody = z
  .object({
    allow_public_key_connect: z.boolean().optional(),
    allow_unsigned_webhooks: z.boolean().optional(),
  })
  .strict();

const view = (environment: Environment): z.infer<typeof environmentSettingsSchema> => ({
  name: environment.name,
  public_key: environment.publicKey,
  allow_public_key_connect: environment.allowPublicKeyConnect,
  allow_unsigned_webhooks: environment.allowUnsignedWebhooks,
});

export const getEnvironmentSettingsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/environment-settings',
    summary: 'The environment’s public key and its opt-ins (public-key connect, unsigned webhooks)',
    tags: ['environment'],
    auth: 'secret-key',
    responses: { 200: { description: 'The settings', schema: environmentSettingsSchema } },
    handler: async ({ environment }) => view(await deps.environments.get(environment.id)),
  });

export const patchEnvironmentSettingsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'patch',
    path: '/environment-settings',
    summary: 'Turn the environment’s opt-ins on or off',
    description:
      'Both are off by default. `allow_public_key_connect` lets anyone who knows the public key start a connect flow that creates a new connection of any id (never replaces one); `allow_unsigned_webhooks` accepts inbound webhooks of integrations that have no webhook secret.',
    tags: ['environment'],
    auth: 'secret-key',
    body: patchEnvironmentSettingsBody,
    responses: { 200: { description: 'The settings now', schema: environmentSettingsSchema } },
    handler: async ({ body, environment }) =>
      view(
        await deps.environments.updateSettings(environment.id, {
          allowPublicKeyConnect: body.allow_public_key_connect,
          allowUnsignedWebhooks: body.allow_unsigned_webhooks,
        }),
      ),
  });
