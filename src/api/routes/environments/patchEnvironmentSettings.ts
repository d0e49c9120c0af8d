import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { environmentSettingsSchema, environmentSettingsView } from './getEnvironmentSettings.js';

export const patchEnvironmentSettingsBody = z
  .object({
    allow_public_key_connect: z.boolean().optional(),
    allow_unsigned_webhooks: z.boolean().optional(),
  })
  .strict();

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
      environmentSettingsView(
        await deps.environments.updateSettings(environment.id, {
          allowPublicKeyConnect: body.allow_public_key_connect,
          allowUnsignedWebhooks: body.allow_unsigned_webhooks,
        }),
      ),
  });
