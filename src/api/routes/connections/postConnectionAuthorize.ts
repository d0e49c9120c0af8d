/**
 * POST /connections/:connection_id/authorize: a request to the connection's external API with the
 * credentials injected exactly as a run's `svc.get` & co. get them (ConnectionService.authorizeRequest:
 * base URL, provider headers, token refreshed first, credentials only for the provider's hosts). It is
 * what `service dryrun` sends its local script's requests through; the caller sends the request itself.
 * It reveals no more than GET /connections/:connection_id (the connection's credentials) and never the
 * integration's client secret (an OAuth 1 signature is computed here).
 */
import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const authorizeRequestBody = z
  .object({
    method: z.enum(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']),
    endpoint: z.string().min(1).describe('A path appended to the base URL, or an absolute http(s) URL.'),
    params: z
      .record(z.string(), z.union([z.string(), z.number()]))
      .optional()
      .describe('Query parameters.'),
    headers: z
      .record(z.string(), z.string())
      .optional()
      .describe('Headers of the request (these win over the provider’s).'),
    base_url_override: z.string().optional().describe('Another base URL on a host of the provider.'),
    form_params: z
      .record(z.string(), z.string())
      .optional()
      .describe('Fields of an application/x-www-form-urlencoded body (OAuth 1 signs them).'),
  })
  .strict();

export const authorizedRequestSchema = z.object({
  method: z.string(),
  url: z.string(),
  headers: z.record(z.string(), z.string()),
});

export const postConnectionAuthorizeRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/connections/:connection_id/authorize',
    summary: 'A request to the connection’s external API with its credentials injected, as a script’s request',
    tags: ['connections'],
    auth: 'secret-key',
    params: z.object({ connection_id: z.string().min(1) }).strict(),
    query: z.object({ provider_config_key: z.string().min(1) }).strict(),
    body: authorizeRequestBody,
    responses: { 200: { description: 'The request to send', schema: authorizedRequestSchema } },
    handler: async ({ params, query, body, environment }) => {
      const authorized = await deps.connections.authorizeRequest(
        { environmentId: environment.id, integrationId: query.provider_config_key, connectionId: params.connection_id },
        {
          method: body.method,
          endpoint: body.endpoint,
          params: body.params ?? {},
          headers: body.headers ?? {},
          baseUrlOverride: body.base_url_override,
          formParams: body.form_params,
        },
      );
      return { method: authorized.method, url: authorized.url, headers: authorized.headers };
    },
  });
