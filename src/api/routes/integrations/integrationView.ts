/**
 * How the integration routes read and show an integration, in the de-facto shapes: the body
 * `{ unique_key, provider, display_name, credentials: { type, client_id, client_secret, scopes } }`
 * and the answer `{ data: { unique_key, provider, display_name, … } }`. The OAuth client secret is
 * stored encrypted and never shown; `provider_settings` and the inbound `webhook` settings are this
 * service's own additions.
 */
import { z } from 'zod';
import type { Integration, IntegrationInput } from '../../../connections/integrationStore.js';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { inboundWebhookInput, inboundWebhookView } from '../../../webhooks/settings.js';
import { commaList } from '../shared.js';

/** `credentials` of POST and PATCH /integrations: the application's OAuth client. */
export const integrationCredentialsInput = z
  .object({
    type: z.enum(['OAUTH2', 'OAUTH1']).describe('Must be the provider’s authentication mode.'),
    client_id: z.string().min(1).max(1024),
    client_secret: z.string().min(1).max(4096),
    scopes: z
      .union([z.string(), z.array(z.string().min(1).max(512))])
      .nullable()
      .optional()
      .describe('Comma-separated (or a list); null or absent for none.'),
    webhook_secret: z
      .null({ error: 'set the secret of inbound webhooks with `webhook: { secret }`' })
      .optional()
      .describe('Only null: the inbound webhook secret is `webhook.secret`.'),
  })
  .strict();

const integrationFields = {
  display_name: z.string().min(1).max(255).optional(),
  forward_webhooks: z
    .literal(false, { error: 'forwarding provider webhooks to the application is not supported' })
    .optional()
    .describe('Only false: inbound webhooks go to the syncs that subscribe to them, not to the application.'),
  credentials: integrationCredentialsInput.optional(),
  provider_settings: z.record(z.string(), z.unknown()).optional().describe('Overrides of the provider catalog entry.'),
  webhook: inboundWebhookInput.optional().describe('How inbound webhooks are read and verified.'),
};

export const createIntegrationBody = z
  .object({
    unique_key: z.string().describe('The integration id (provider_config_key) that the other calls use.'),
    provider: z.string().min(1).describe('The provider’s name in the catalog.'),
    ...integrationFields,
  })
  .strict();

export const patchIntegrationBody = z
  .object({
    unique_key: z.string().optional().describe('Only the current one: integrations are not renamed.'),
    provider: z.string().min(1).optional(),
    ...integrationFields,
  })
  .strict();

type CredentialsInput = z.output<typeof integrationCredentialsInput>;

/** The store's input for the OAuth client given (scopes split), after checking the type fits the provider. */
export function clientInput(
  credentials: CredentialsInput | undefined,
  authMode: string | null,
): Pick<IntegrationInput, 'oauth_client_id' | 'oauth_client_secret' | 'oauth_scopes'> {
  if (!credentials) return {};
  if (credentials.type !== authMode) {
    throw new ServiceError(
      'credentials_type_mismatch',
      `credentials of type ${credentials.type} do not fit a provider that uses ${authMode ?? 'an unknown authentication mode'}`,
    );
  }
  const scopes =
    credentials.scopes === null || credentials.scopes === undefined
      ? []
      : Array.isArray(credentials.scopes)
        ? credentials.scopes
        : credentials.scopes
            .split(',')
            .map((scope) => scope.trim())
            .filter((scope) => scope !== '');
  return {
    oauth_client_id: credentials.client_id,
    oauth_client_secret: credentials.client_secret,
    oauth_scopes: scopes,
  };
}

/** `include` of GET /integrations/:id: `webhook`, `credentials`, repeated or comma-separated. */
export const integrationInclude = commaList.pipe(z.array(z.enum(['webhook', 'credentials'])));

export const integrationSchema = z.object({
  unique_key: z.string().describe('The integration id (provider_config_key).'),
  provider: z.string(),
  display_name: z.string().describe('As set, else the provider’s.'),
  forward_webhooks: z.literal(false),
  created_at: z.string(),
  updated_at: z.string(),
  webhook_url: z.string().optional().describe('With `include=webhook`: where the provider sends its webhooks.'),
  credentials: z
    .object({
      type: z.string(),
      client_id: z.string(),
      client_secret: z.null().describe('Never returned: it is stored encrypted.'),
      has_client_secret: z.boolean(),
      scopes: z.string().nullable().describe('Comma-separated.'),
      webhook_secret: z.null(),
    })
    .nullable()
    .optional()
    .describe('With `include=credentials`: the OAuth client (null when none is set).'),
  provider_settings: z.record(z.string(), z.unknown()),
  webhook: inboundWebhookView.nullable().describe('How inbound webhooks are read; null for the defaults.'),
});
export type IntegrationView = z.infer<typeof integrationSchema>;

/** `{ data: integration }`, the de-facto answer of one integration. */
export const integrationAnswer = z.object({ data: integrationSchema });

export async function integrationView(
  deps: ApiDeps,
  integration: Integration,
  include: { webhook?: { environmentName: string }; credentials?: boolean } = {},
): Promise<IntegrationView> {
  return {
    unique_key: integration.id,
    provider: integration.provider,
    display_name: integration.displayName,
    forward_webhooks: false,
    created_at: integration.createdAt,
    updated_at: integration.updatedAt,
    ...(include.webhook
      ? {
          webhook_url: `${deps.publicUrl ?? ''}/webhook/${encodeURIComponent(include.webhook.environmentName)}/${encodeURIComponent(integration.id)}`,
        }
      : {}),
    ...(include.credentials
      ? {
          credentials:
            integration.oauthClientId === null
              ? null
              : {
                  type: integration.authMode ?? 'OAUTH2',
                  client_id: integration.oauthClientId,
                  client_secret: null,
                  has_client_secret: integration.hasOAuthClientSecret,
                  scopes: integration.oauthScopes.length === 0 ? null : integration.oauthScopes.join(','),
                  webhook_secret: null,
                },
        }
      : {}),
    provider_settings: integration.providerSettings,
    webhook: await deps.webhookSettings.inboundView(integration.environmentId, integration.id),
  };
}
