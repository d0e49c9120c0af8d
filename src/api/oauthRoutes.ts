/**
 * The end user's side of connecting: `GET /oauth/connect/:integration` sends the browser to the
 * provider, `GET /oauth/callback` finishes and shows a plain success or failure page. Both are opened
 * by browsers, so they answer with HTML, not the JSON error envelope, and they take no secret key.
 * The connect link carries a connect session the application's backend made with POST
 * /connect/sessions (single use, bound to one connection), or, only where the environment opted in
 * (`allow_public_key_connect`), names the environment by its public key; such a link can create a
 * connection, never replace one:
 *
 *   /oauth/connect/<integration>?connect_session_token=cs_…&connection_config[subdomain]=acme
 *   /oauth/connect/<integration>?public_key=pk_…&connection_id=<id>&connection_config[subdomain]=acme
 */
import { Router, type Request, type Response } from 'express';
import type { EnvironmentStore } from '../connections/environmentStore.js';
import type { OAuthFlow } from '../connections/oauthFlow.js';
import { PAGE_HEADERS, renderResultPage } from '../connections/pages.js';
import { isServiceError, ServiceError } from '../errors.js';
import { lineLog } from '../log.js';

export interface OAuthRoutesDeps {
  flow: OAuthFlow;
  environments: EnvironmentStore;
  /** One line per failure, never with a secret in it. @default a line on stderr */
  log?: (message: string) => void;
}

function first(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (Array.isArray(value) && typeof value[0] === 'string') return value[0];
  return undefined;
}

/** The query as plain strings; repeated parameters keep their first value. */
function plainQuery(req: Request): Record<string, string | undefined> {
  const query: Record<string, string | undefined> = {};
  for (const [name, value] of Object.entries(req.query as Record<string, unknown>)) query[name] = first(value);
  return query;
}

/** `connection_config[name]=value` pairs, from the simple query parser (flat keys) or the extended one (an object). */
function connectionConfigOf(req: Request): Record<string, string> {
  const config: Record<string, string> = {};
  for (const [name, value] of Object.entries(req.query as Record<string, unknown>)) {
    const match = /^connection_config\[([^\]]+)\]$/.exec(name);
    const text = first(value);
    if (match?.[1] && text !== undefined) config[match[1]] = text;
    if (name === 'connection_config' && value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [key, nested] of Object.entries(value as Record<string, unknown>)) {
        const nestedText = first(nested);
        if (nestedText !== undefined) config[key] = nestedText;
      }
    }
  }
  return config;
}

function sendPage(res: Response, status: number, ok: boolean, title: string, message: string): void {
  res.status(status).set(PAGE_HEADERS).send(renderResultPage({ ok, title, message }));
}

export function createOAuthRouter(deps: OAuthRoutesDeps): Router {
  const log = deps.log ?? lineLog('oauth');
  const router = Router();

  router.get('/oauth/connect/:integration', async (req, res) => {
    const query = plainQuery(req);
    try {
      const fromLink = connectionConfigOf(req);
      let input;
      const sessionToken = query['connect_session_token'];
      if (sessionToken !== undefined) {
        await deps.flow.requireRedirectFlow(sessionToken);
        const bound = await deps.flow.useConnectSession(sessionToken, req.params.integration);
        // Settings the session fixes win; the end user may add the ones it left open (their subdomain, say).
        input = { ...bound, connectionConfig: { ...fromLink, ...bound.connectionConfig } };
      } else {
        const publicKey = query['public_key'];
        const environment = publicKey ? await deps.environments.findByPublicKey(publicKey) : undefined;
        if (!environment?.allowPublicKeyConnect) {
          throw new ServiceError(
            'invalid_connect_link',
            'The connect link has no valid connect_session_token: ask the application for a new link.',
          );
        }
        // Anyone who knows the public key may follow such a link: it creates a connection, never replaces one.
        input = {
          environmentId: environment.id,
          integrationId: req.params.integration,
          connectionId: query['connection_id'] ?? '',
          connectionConfig: fromLink,
          allowReconnect: false,
        };
      }
      const { authorizationUrl } = await deps.flow.start(input);
      res.set('Cache-Control', 'no-store').set('Referrer-Policy', 'no-referrer').redirect(302, authorizationUrl);
    } catch (error) {
      if (!isServiceError(error)) throw error;
      log(`connect to integration '${req.params.integration}' refused: ${error.code}: ${error.message}`);
      sendPage(res, error.status, false, 'Connection failed', error.message);
    }
  });

  router.get('/oauth/callback', async (req, res) => {
    const result = await deps.flow.callback(plainQuery(req));
    if (result.ok) {
      sendPage(
        res,
        200,
        true,
        'Connection established',
        `The connection '${result.scope.connectionId}' to '${result.scope.integrationId}' is ready.`,
      );
      return;
    }
    log(`OAuth callback failed: ${result.error.code}: ${result.error.message}`);
    sendPage(res, result.error.status, false, 'Connection failed', result.error.message);
  });

  return router;
}
