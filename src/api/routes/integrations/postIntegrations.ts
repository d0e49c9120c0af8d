import { isServiceError, ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { clientInput, createIntegrationBody, integrationAnswer, integrationView } from './integrationView.js';

export { createIntegrationBody } from './integrationView.js';

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
    responses: { 200: { description: 'The integration', schema: integrationAnswer } },
    handler: async ({ body, environment }) => {
      const existing = await deps.integrations.get(environment.id, body.unique_key).catch((error: unknown) => {
        if (isServiceError(error) && error.code === 'unknown_integration') return undefined;
        throw error;
      });
      if (existing) {
        throw new ServiceError(
          'integration_exists',
          `integration '${body.unique_key}' already exists; PATCH /integrations/${body.unique_key} changes it`,
        );
      }
      const integration = await deps.integrations.upsert(environment.id, {
        id: body.unique_key,
        provider: body.provider,
        ...(body.display_name === undefined ? {} : { display_name: body.display_name }),
        ...(body.provider_settings === undefined ? {} : { provider_settings: body.provider_settings }),
        ...clientInput(body.credentials, deps.integrations.providerAuthMode(body.provider)),
      });
      if (body.webhook) await deps.webhookSettings.setInbound(environment.id, integration.id, body.webhook);
      return { data: await integrationView(deps, integration) };
    },
  });
