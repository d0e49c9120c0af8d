/**
 * The hosted connect page. The application's backend makes a connect session (POST /connect/sessions)
 * and sends its end user's browser to `GET /connect?session=cs_…`; the page asks for what the
 * session's integration needs (an API key, a username and password, a client id and secret, a
 * private key, or, for OAuth, only the settings the session left open) and `POST /connect` completes
 * it: credentials are checked (a first token obtained, for the kinds the service mints) before the
 * session is spent, so a typing mistake does not burn the link; OAuth continues at the provider.
 *
 * The token: the access log records paths only (server.ts), every page is sent with
 * `Referrer-Policy: no-referrer` and loads nothing, and the form carries the token in its body, not in a
 * link. The session works once and expires as POST /connect/sessions made it.
 */
import express, { Router, type Request, type Response } from 'express';
import type { ImportConnectionInput } from '../connections/credentials.js';
import type { ConnectionManager } from '../connections/types.js';
import { connectFields, isRedirectFlow, valuesOfFields, type ConnectField } from '../connections/connectFields.js';
import type { IntegrationStore } from '../connections/integrationStore.js';
import type { OAuthFlow } from '../connections/oauthFlow.js';
import { PAGE_HEADERS, renderConnectPage, renderResultPage } from '../connections/pages.js';
import { validateConnectionConfig } from '../connections/providers/catalog.js';
import { isServiceError, ServiceError } from '../errors.js';
import { lineLog } from '../log.js';

export interface ConnectPageDeps {
  flow: OAuthFlow;
  integrations: IntegrationStore;
  connections: Pick<ConnectionManager, 'connectWith'>;
  /** One line per refusal, never with the token or a secret in it. @default a line on stderr */
  log?: (message: string) => void;
}

/** A private key is a few kilobytes; nothing else on the form comes close. */
const FORM_LIMIT = '64kb';

/**
 * Refused forms one session may send before it is spent. A refusal of minted credentials (OAUTH2_CC,
 * JWT, APP) is the provider's token endpoint's answer, so without a bound a connect link would be an
 * oracle for guessing a client secret there for as long as it lives. Counted in this process: with
 * several API servers behind a balancer, at most this many per server.
 */
export const CONNECT_FORM_ATTEMPTS = 5;
/** Sessions whose refusals are counted at once; the oldest count is forgotten first. */
const COUNTED_SESSIONS = 10_000;

function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function createConnectPageRouter(deps: ConnectPageDeps): Router {
  const log = deps.log ?? lineLog('connect');
  const router = Router();
  const refusals = new Map<string, number>();

  /** One more refused form of `token`'s session; true when it has had its CONNECT_FORM_ATTEMPTS. */
  function refusedOnceMore(token: string): boolean {
    const count = (refusals.get(token) ?? 0) + 1;
    refusals.delete(token);
    if (count >= CONNECT_FORM_ATTEMPTS) return true;
    refusals.set(token, count);
    if (refusals.size > COUNTED_SESSIONS) refusals.delete(refusals.keys().next().value!);
    return false;
  }

  const sendResult = (res: Response, status: number, ok: boolean, title: string, message: string): void => {
    res.status(status).set(PAGE_HEADERS).send(renderResultPage({ ok, title, message }));
  };

  /** The session's integration and the form for it. */
  async function formOf(token: string) {
    const bound = await deps.flow.peekConnectSession(token);
    const resolved = await deps.integrations.resolve(bound.environmentId, bound.integrationId);
    const fields = connectFields(resolved.provider, bound.connectionConfig);
    const name = resolved.integration.displayName;
    const redirect = isRedirectFlow(resolved.provider);
    return {
      bound,
      resolved,
      fields,
      page: {
        title: `Connect ${name}`,
        intro: redirect
          ? `You will continue to ${name} to approve the connection.`
          : `Enter the credentials this application may use with ${name}. They are stored encrypted.`,
        session: token,
        fields,
        submitLabel: redirect ? `Continue to ${name}` : 'Connect',
        ...(resolved.provider.docs === undefined ? {} : { docs: resolved.provider.docs }),
      },
    };
  }

  function refused(res: Response, error: ServiceError): void {
    log(`connect page refused: ${error.code}`);
    sendResult(res, error.status, false, 'Connection failed', error.message);
  }

  router.get('/connect', async (req: Request, res: Response) => {
    try {
      const token = text(req.query['session']);
      if (!token) {
        throw new ServiceError(
          'invalid_connect_session',
          'This link has no connect session; ask the application for a new link.',
        );
      }
      const { page } = await formOf(token);
      res.status(200).set(PAGE_HEADERS).send(renderConnectPage(page));
    } catch (error) {
      if (!isServiceError(error)) throw error;
      refused(res, error);
    }
  });

  router.post(
    '/connect',
    express.urlencoded({ extended: false, limit: FORM_LIMIT }),
    async (req: Request, res: Response) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const token = text(body['session']) ?? '';
      let form: Awaited<ReturnType<typeof formOf>>;
      try {
        form = await formOf(token);
      } catch (error) {
        if (!isServiceError(error)) throw error;
        refused(res, error);
        return;
      }
      const submitted = Object.fromEntries(Object.entries(body).map(([name, value]) => [name, text(value)]));
      const { bound, resolved, fields, page } = form;
      try {
        const values = valuesOfFields(resolved.provider, fields, submitted);
        // Settings the session fixed win over anything the form sent.
        const connectionConfig = { ...values.connectionConfig, ...bound.connectionConfig };
        validateConnectionConfig(resolved.provider, connectionConfig);
        if (values.credentials === undefined) {
          const spent = await deps.flow.useConnectSession(token, bound.integrationId);
          const { authorizationUrl } = await deps.flow.start({ ...spent, connectionConfig });
          res.status(303).set(PAGE_HEADERS).location(authorizationUrl).send();
          return;
        }
        await deps.connections.connectWith(
          {
            environmentId: bound.environmentId,
            integrationId: bound.integrationId,
            connectionId: bound.connectionId,
            // Checked against the credentials schema by connectWith.
            credentials: values.credentials as ImportConnectionInput['credentials'],
            connection_config: connectionConfig,
            ...(bound.tags === undefined ? {} : { tags: bound.tags }),
          },
          {
            replace: bound.allowReconnect,
            claim: async () => {
              await deps.flow.useConnectSession(token, bound.integrationId);
            },
          },
        );
        sendResult(
          res,
          200,
          true,
          'Connection established',
          `You are connected to ${resolved.integration.displayName}.`,
        );
      } catch (error) {
        if (!isServiceError(error)) throw error;
        // The session is spent only by a completed connect: a mistake can be corrected on the same page,
        // CONNECT_FORM_ATTEMPTS times.
        if (error.code !== 'connection_exists' && refusedOnceMore(token)) {
          await deps.flow.useConnectSession(token, bound.integrationId).catch(() => undefined);
          refused(
            res,
            new ServiceError(
              'connect_session_attempts',
              `The credentials were refused ${CONNECT_FORM_ATTEMPTS} times; this link no longer works. Ask the application for a new one. (Last refusal: ${error.message})`,
            ),
          );
          return;
        }
        if (error.status === 401 || error.code === 'connection_exists') {
          refused(res, error);
          return;
        }
        log(`connect page: the form was refused: ${error.code}`);
        res
          .status(error.status)
          .set(PAGE_HEADERS)
          .send(renderConnectPage({ ...page, error: error.message, values: visibleValues(fields, submitted) }));
      }
    },
  );

  return router;
}

/** The non-secret values of a refused form, to show again. */
function visibleValues(fields: ConnectField[], submitted: Record<string, string | undefined>): Record<string, string> {
  const values: Record<string, string> = {};
  for (const field of fields) {
    const value = submitted[field.name];
    if (field.kind === 'text' && value !== undefined) values[field.name] = value;
  }
  return values;
}
