import { z } from 'zod';
import { integrationInput } from '../../connections/integrationStore.js';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { inboundWebhookInput } from '../webhooks/settings.js';
import { integrationSchema, integrationView } from './integrationView.js';
import { webhookSettingsOf } from './shared.js';

export const patchIntegrationBody = integrationInput
  .omit({ id: true })
  .partial()
  .extend({ webhook: inboundWebhookInput.optional() })
  .strict();

export const patchIntegrationRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'patch',
    path: '/integrations/:id',
    summary: 'Change an integration',
    description: 'Fields not given keep their value; an OAuth client secret not given keeps the stored one.',
    tags: ['integrations'],
    auth: 'secret-key',
    params: z.object({ id: z.string().min(1) }).strict(),
    body: patchIntegrationBody,
    responses: { 200: { description: 'The integration', schema: integrationSchema } },
    handler: async ({ params, body, environment }) => {
      const current = await deps.integrations.get(environment.id, params.id);
      const { webhook, ...changes } = body;
      const oauthClientId = changes.oauth_client_id ?? current.oauthClientId;
      const integration = await deps.integrations.upsert(environment.id, {
        id: current.id,
        provider: changes.provider ?? current.provider,
        ...(oauthClientId === null ? {} : { oauth_client_id: oauthClientId }),
        ...(changes.oauth_client_secret === undefined ? {} : { oauth_client_secret: changes.oauth_client_secret }),
        oauth_scopes: changes.oauth_scopes ?? current.oauthScopes,
        provider_settings: changes.provider_settings ?? current.providerSettings,
      });
      if (webhook) await webhookSettingsOf(deps).setInbound(environment.id, integration.id, webhook);
      return integrationView(deps, integration);
    },
  });
