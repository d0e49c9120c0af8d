import { z } from 'zod';
import { connectionTagsSchema, endUserSchema } from '../../../connections/tags.js';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const connectSessionBody = z
  .object({
    provider_config_key: z.string().min(1).describe('The integration to connect (any auth mode).'),
    connection_id: z.string().min(1).describe('The connection the flow makes (or, with allow_reconnect, renews).'),
    connection_config: z
      .record(z.string(), z.string().max(2048))
      .optional()
      .describe('Connection settings the session fixes; the end user may add those it leaves open.'),
    end_user: endUserSchema
      .optional()
      .describe('Who the end user is: kept as the connection’s tags `end_user_id`, `end_user_email`, ….'),
    tags: connectionTagsSchema.optional().describe('Tags of the connection (they win over those of `end_user`).'),
    allow_reconnect: z
      .boolean()
      .optional()
      .describe('May re-authorise the connection when it exists (replacing its credentials). Default false.'),
    ttl_seconds: z
      .number()
      .int()
      .min(60)
      .max(3600)
      .optional()
      .describe('How long the session may be used, 60 to 3600 seconds; default 1800.'),
  })
  .strict();

export const connectSessionSchema = z.object({
  token: z.string().describe('`cs_…`: works once, for this integration and connection only.'),
  connect_url: z
    .string()
    .describe(
      'The link to send the end user’s browser to: for OAuth the redirect to the provider, otherwise the hosted connect page (`/connect?session=…`), which works for OAuth sessions too.',
    ),
  expires_at: z.string(),
  provider_config_key: z.string(),
  connection_id: z.string(),
  allow_reconnect: z.boolean(),
});

export const postConnectSessionsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/connect/sessions',
    summary: 'Create a connect session: a single-use, short-lived link for one end user to connect one connection',
    description:
      'The end user opens `connect_url`: for OAuth integrations GET /oauth/connect/<integration>?connect_session_token=…, which starts the OAuth flow for this connection id and no other; for API key, Basic, client credentials, service account and app integrations the hosted connect page GET /connect?session=…, where the end user enters the credentials (any session may be opened there). The token works once and expires. An existing connection is re-authorised only by a session with `allow_reconnect` (409 connection_exists otherwise).',
    tags: ['connections'],
    auth: 'secret-key',
    body: connectSessionBody,
    responses: { 200: { description: 'The session (its token is shown only now)', schema: connectSessionSchema } },
    handler: async ({ body, environment }) => {
      if (!deps.oauthFlow) {
        throw new ServiceError('connect_unavailable', 'This server has no connect flow configured.');
      }
      const allowReconnect = body.allow_reconnect ?? false;
      const { authMode } = await deps.integrations.get(environment.id, body.provider_config_key);
      const session = await deps.oauthFlow.createConnectSession({
        environmentId: environment.id,
        integrationId: body.provider_config_key,
        connectionId: body.connection_id,
        connectionConfig: body.connection_config ?? {},
        allowReconnect,
        ...(body.end_user === undefined ? {} : { endUser: body.end_user }),
        ...(body.tags === undefined ? {} : { tags: body.tags }),
        ...(body.ttl_seconds === undefined ? {} : { ttlMs: body.ttl_seconds * 1000 }),
      });
      return {
        token: session.token,
        connect_url: deps.oauthFlow.connectUrl(body.provider_config_key, session.token, authMode ?? 'OAUTH2'),
        expires_at: session.expiresAt,
        provider_config_key: body.provider_config_key,
        connection_id: body.connection_id,
        allow_reconnect: allowReconnect,
      };
    },
  });
