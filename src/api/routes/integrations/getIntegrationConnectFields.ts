import { z } from 'zod';
import { connectFields, isRedirectFlow } from '../../../connections/connectFields.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

const connectFieldSchema = z.object({
  name: z.string().describe('`credentials.<field>` or `connection_config.<setting>`: where the value goes.'),
  label: z.string(),
  kind: z.enum(['text', 'secret', 'multiline']),
  required: z.boolean(),
  description: z.string().optional(),
  pattern: z.string().optional().describe('A regular expression the value must match.'),
});

export const connectFieldsAnswer = z.object({
  provider: z.string(),
  display_name: z.string(),
  auth_mode: z.string(),
  docs: z.string().nullable(),
  redirect: z
    .boolean()
    .describe('True for OAuth: connecting goes through the provider (POST /connect/sessions, then its connect_url).'),
  fields: z.array(connectFieldSchema),
});

export const getIntegrationConnectFieldsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/integrations/:id/connect-fields',
    summary: 'What connecting to an integration asks for',
    description:
      'The credential fields of the integration’s auth mode (an API key; a username and password; a client id and secret; a service account’s email and private key; an app id and private key; none for OAuth) and the connection settings its provider needs. POST /connections takes the values as `credentials` and `connection_config`; the hosted connect page shows the same fields.',
    tags: ['integrations'],
    auth: 'secret-key',
    params: z.object({ id: z.string().min(1) }).strict(),
    responses: { 200: { description: 'The fields', schema: connectFieldsAnswer } },
    handler: async ({ params, environment }) => {
      const resolved = await deps.integrations.resolve(environment.id, params.id);
      return {
        provider: resolved.integration.provider,
        display_name: resolved.integration.displayName,
        auth_mode: resolved.provider.auth_mode,
        docs: resolved.provider.docs ?? null,
        redirect: isRedirectFlow(resolved.provider),
        fields: connectFields(resolved.provider),
      };
    },
  });
