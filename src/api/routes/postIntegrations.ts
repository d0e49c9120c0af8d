import { integrationInput } from '../../connections/integrationStore.js';
import { isServiceError, ServiceError } from '../../errors.js';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { inboundWebhookInput } from '../webhooks/settings.js';
import { integrationSchema, integrationView } from './integrationView.js';
import { webhookSettingsOf } from './shared.js';

export const createIntegrationBody = integrationInput.extend({ webhook: inboundWebhookInput.optional() });

export const postIntegrationsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/integrations',
    summary: 'Create an integration',
    description:
      'The OAuth client secret is stored encrypted and never returned. 409 when the id exists (PATCH changes it).',
    tags: ['integrations'],
    auth: 'secret-key',
    body: createIntegrationBody,
    responses: { 200: { description: 'The integration', schema: integrationSchema } },
    handler: async ({ body, environment }) => {
      const existing = await deps.integrations.get(environment.id, body.id).catch((error: unknown) => {
        if (isServiceError(error) && error.code === 'unknown_integration') return undefined;
        throw error;
      });
      if (existing) {
        throw new ServiceError(
          'integration_exists',
          `integration '${body.id}' already exists; PATCH /integrations/${body.id} changes it`,
          {
            status: 409,
          },
        );
      }
      const { webhook, ...input } = body;
      const integration = await deps.integrations.upsert(environment.id, input);
      if (webhook) await webhookSettingsOf(deps).setInbound(environment.id, integration.id, webhook);
      return integrationView(deps, integration);
    },
  });
