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

export const environmentSettingsView = (environment: Environment): z.infer<typeof environmentSettingsSchema> => ({
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
    handler: async ({ environment }) => environmentSettingsView(await deps.environments.get(environment.id)),
  });
