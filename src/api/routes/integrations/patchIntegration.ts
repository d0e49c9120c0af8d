import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { clientInput, integrationAnswer, integrationView, patchIntegrationBody } from './integrationView.js';

export { patchIntegrationBody } from './integrationView.js';

export const patchIntegrationRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'patch',
    path: '/integrations/:id',
    summary: 'Change an integration',
    description:
      'Fields not given keep their value; `credentials` replaces the OAuth client. An integration is not renamed: `unique_key`, when given, must be the current one.',
    tags: ['integrations'],
    auth: 'secret-key',
    params: z.object({ id: z.string().min(1) }).strict(),
    body: patchIntegrationBody,
    responses: { 200: { description: 'The integration', schema: integrationAnswer } },
    handler: async ({ params, body, environment }) => {
      const current = await deps.integrations.get(environment.id, params.id);
      if (body.unique_key !== undefined && body.unique_key !== current.id) {
        throw new ServiceError(
          'integration_rename_unsupported',
          `integration '${current.id}' cannot be renamed to '${body.unique_key}': its deployment, connections and records are kept under its id; create a new integration instead`,
        );
      }
      const provider = body.provider ?? current.provider;
      const client = clientInput(body.credentials, deps.integrations.providerAuthMode(provider));
      const integration = await deps.integrations.upsert(environment.id, {
        id: current.id,
        provider,
        display_name: body.display_name ?? current.displayNameOverride,
        ...(current.oauthClientId === null ? {} : { oauth_client_id: current.oauthClientId }),
        oauth_scopes: current.oauthScopes,
        provider_settings: body.provider_settings ?? current.providerSettings,
        ...client,
      });
      if (body.webhook) await deps.webhookSettings.setInbound(environment.id, integration.id, body.webhook);
      return { data: await integrationView(deps, integration) };
    },
  });
