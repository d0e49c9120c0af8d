/** How the integration routes show an integration: never its OAuth client secret. */
import { z } from 'zod';
import type { Integration } from '../../connections/integrationStore.js';
import type { ApiDeps } from '../deps.js';
import { inboundWebhookView } from '../webhooks/settings.js';
import { webhookSettingsOf } from './shared.js';

export const integrationSchema = z.object({
  id: z.string().describe('The integration id (provider_config_key).'),
  provider: z.string(),
  oauth_client_id: z.string().nullable(),
  has_oauth_client_secret: z.boolean(),
  oauth_scopes: z.array(z.string()),
  provider_settings: z.record(z.string(), z.unknown()),
  webhook: inboundWebhookView.nullable().describe('How inbound webhooks are read; null for the defaults.'),
  created_at: z.string(),
  updated_at: z.string(),
});
export type IntegrationView = z.infer<typeof integrationSchema>;

export async function integrationView(deps: ApiDeps, integration: Integration): Promise<IntegrationView> {
  return {
    id: integration.id,
    provider: integration.provider,
    oauth_client_id: integration.oauthClientId,
    has_oauth_client_secret: integration.hasOAuthClientSecret,
    oauth_scopes: integration.oauthScopes,
    provider_settings: integration.providerSettings,
    webhook: await webhookSettingsOf(deps).inboundView(integration.environmentId, integration.id),
    created_at: integration.createdAt,
    updated_at: integration.updatedAt,
  };
}
