/**
 * A fake external provider on 127.0.0.1: an OAuth 2 authorization server (authorize, token with both
 * grants, PKCE S256, rotating refresh tokens, revocation), an OAuth 1.0a server (request token,
 * authorize, access token, signature checked), and an API that accepts only what the server issued.
 * It records every token request so tests can count refreshes.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

import { signOAuth1 } from '../../src/connections/oauth1.js';
import { json, startFakeUpstream } from './upstream.js';

export interface TokenRequestRecord {
  grantType: string;
  clientAuth: 'basic' | 'post' | 'none';
  body: Record<string, string>;
}

export interface FakeProviderOptions {
  clientId: string;
  clientSecret: string;
  /** How the token endpoint expects the client to authenticate. */
  clientAuth: 'basic' | 'post';
  /** expires_in of issued tokens, seconds. */
  expiresIn?: number;
}

const random = (prefix: string): string => `${prefix}_${randomBytes(12).toString('hex')}`;

/** Parses `OAuth k="v", …` into its (decoded) parameters. */
function parseOAuthHeader(header: string | undefined): Record<string, string> {
  const params: Record<string, string> = {};
  for (const match of (header ?? '').matchAll(/([a-z_]+)="([^"]*)"/g))
    params[match[1]!] = decodeURIComponent(match[2]!);
  return params;
}

export async function startFakeProvider(options: FakeProviderOptions) {
  const state = {
    expiresIn: options.expiresIn ?? 3600,
    /** Delay of refresh answers, to hold concurrent refreshers in flight together. */
    refreshDelayMs: 0,
    tokenRequests: [] as TokenRequestRecord[],
    codes: new Map<string, { redirectUri: string; challenge: string | undefined; used: boolean }>(),
    accessTokens: new Set<string>(),
    refreshTokens: new Set<string>(),
    apiCalls: [] as { authorization: string | undefined }[],
    /** Every secret this server issued or was configured with: the log scan looks for them. */
    issued: [options.clientSecret] as string[],
    oauth1: {
      requestTokens: new Map<string, { secret: string; verifier: string; callback: string }>(),
      accessTokens: new Map<string, string>(),
    },
    /** Query parameters of the last authorization request. */
    lastAuthorize: undefined as URLSearchParams | undefined,
  };

  const issueTokens = (): { access_token: string; refresh_token: string } => {
    const accessToken = random('at');
    const refreshToken = random('rt');
    state.accessTokens.add(accessToken);
    state.refreshTokens.add(refreshToken);
    state.issued.push(accessToken, refreshToken);
    return { access_token: accessToken, refresh_token: refreshToken };
  };

  const server = await startFakeUpstream((req, res, body) =>
    handle(req, res, body).catch((error: unknown) => {
      json(res, 500, { error: 'server_error', error_description: String(error) });
    }),
  );

  const base = (): string => server.url;

  async function handle(req: IncomingMessage, res: ServerResponse, requestBody: string): Promise<void> {
    const url = new URL(req.url ?? '/', base());
    if (req.method === 'GET' && url.pathname === '/oauth2/authorize') {
      // The "user" approves at once: redirect back with a code, as a real server does after consent.
      state.lastAuthorize = url.searchParams;
      const redirectUri = url.searchParams.get('redirect_uri') ?? '';
      if (url.searchParams.get('client_id') !== options.clientId) return json(res, 400, { error: 'unknown client' });
      const back = new URL(redirectUri);
      if (url.searchParams.get('deny') === '1' || url.searchParams.get('scope')?.includes('deny')) {
        back.searchParams.set('error', 'access_denied');
        back.searchParams.set('error_description', 'The user said no');
      } else {
        const code = random('code');
        state.issued.push(code);
        state.codes.set(code, {
          redirectUri,
          challenge: url.searchParams.get('code_challenge') ?? undefined,
          used: false,
        });
        back.searchParams.set('code', code);
      }
      back.searchParams.set('state', url.searchParams.get('state') ?? '');
      res.writeHead(302, { Location: back.toString() }).end();
      return;
    }
    if (req.method === 'POST' && url.pathname === '/oauth2/token') {
      const body = Object.fromEntries(new URLSearchParams(requestBody));
      const basic = req.headers.authorization?.startsWith('Basic ')
        ? Buffer.from(req.headers.authorization.slice(6), 'base64').toString('utf8').split(':').map(decodeURIComponent)
        : undefined;
      const clientAuth = basic ? 'basic' : body['client_secret'] !== undefined ? 'post' : 'none';
      state.tokenRequests.push({ grantType: body['grant_type'] ?? '', clientAuth, body });
      const [id, secret] = basic ?? [body['client_id'], body['client_secret']];
      if (clientAuth !== options.clientAuth || id !== options.clientId || secret !== options.clientSecret) {
        return json(res, 401, { error: 'invalid_client', error_description: 'client authentication failed' });
      }
      if (body['grant_type'] === 'authorization_code') {
        const grant = state.codes.get(body['code'] ?? '');
        if (!grant || grant.used)
          return json(res, 400, { error: 'invalid_grant', error_description: 'unknown or used code' });
        grant.used = true;
        if (grant.redirectUri !== body['redirect_uri'])
          return json(res, 400, { error: 'invalid_grant', error_description: 'redirect_uri mismatch' });
        if (grant.challenge !== undefined) {
          const computed = createHash('sha256')
            .update(body['code_verifier'] ?? '')
            .digest('base64url');
          if (computed !== grant.challenge)
            return json(res, 400, { error: 'invalid_grant', error_description: 'PKCE verification failed' });
        }
        return json(res, 200, { ...issueTokens(), token_type: 'Bearer', expires_in: state.expiresIn, scope: 'read' });
      }
      if (body['grant_type'] === 'refresh_token') {
        await new Promise((resolve) => setTimeout(resolve, state.refreshDelayMs));
        const presented = body['refresh_token'] ?? '';
        if (!state.refreshTokens.has(presented)) {
          return json(res, 400, { error: 'invalid_grant', error_description: 'Token has been expired or revoked.' });
        }
        // Rotation, as many providers do: the old refresh token stops working, so a second refresh
        // with it would fail. A service that refreshes twice at once would break here.
        state.refreshTokens.delete(presented);
        return json(res, 200, { ...issueTokens(), token_type: 'Bearer', expires_in: state.expiresIn });
      }
      return json(res, 400, { error: 'unsupported_grant_type' });
    }
    if (req.method === 'GET' && url.pathname === '/api/me') {
      const authorization = req.headers.authorization;
      state.apiCalls.push({ authorization });
      const token = authorization?.startsWith('Bearer ') ? authorization.slice(7) : '';
      if (!state.accessTokens.has(token)) return json(res, 401, { error: 'invalid_token' });
      return json(res, 200, { id: 'user-1', query: Object.fromEntries(url.searchParams) });
    }
    // ---- OAuth 1.0a ----
    if (req.method === 'POST' && url.pathname === '/oauth1/request_token') {
      const params = parseOAuthHeader(req.headers.authorization);
      if (!verifyOAuth1(req.method, url, params, '')) return json(res, 401, { error: 'bad signature' });
      const token = random('rqt');
      const secret = random('rqs');
      state.issued.push(secret);
      state.oauth1.requestTokens.set(token, {
        secret,
        verifier: random('ver'),
        callback: params['oauth_callback'] ?? '',
      });
      res.writeHead(200, { 'Content-Type': 'application/x-www-form-urlencoded' });
      res.end(
        new URLSearchParams({
          oauth_token: token,
          oauth_token_secret: secret,
          oauth_callback_confirmed: 'true',
        }).toString(),
      );
      return;
    }
    if (req.method === 'GET' && url.pathname === '/oauth1/authorize') {
      const token = url.searchParams.get('oauth_token') ?? '';
      const pending = state.oauth1.requestTokens.get(token);
      if (!pending) return json(res, 400, { error: 'unknown request token' });
      const back = new URL(pending.callback);
      back.searchParams.set('oauth_token', token);
      back.searchParams.set('oauth_verifier', pending.verifier);
      res.writeHead(302, { Location: back.toString() }).end();
      return;
    }
    if (req.method === 'POST' && url.pathname === '/oauth1/access_token') {
      const params = parseOAuthHeader(req.headers.authorization);
      const pending = state.oauth1.requestTokens.get(params['oauth_token'] ?? '');
      if (!pending || params['oauth_verifier'] !== pending.verifier) return json(res, 401, { error: 'bad verifier' });
      if (!verifyOAuth1(req.method, url, params, pending.secret)) return json(res, 401, { error: 'bad signature' });
      state.oauth1.requestTokens.delete(params['oauth_token']!);
      const token = random('o1t');
      const secret = random('o1s');
      state.issued.push(secret);
      state.oauth1.accessTokens.set(token, secret);
      res.writeHead(200, { 'Content-Type': 'application/x-www-form-urlencoded' });
      res.end(new URLSearchParams({ oauth_token: token, oauth_token_secret: secret, user_id: '42' }).toString());
      return;
    }
    if (url.pathname === '/oauth1/api') {
      const params = parseOAuthHeader(req.headers.authorization);
      const secret = state.oauth1.accessTokens.get(params['oauth_token'] ?? '');
      if (secret === undefined || !verifyOAuth1(req.method ?? 'GET', url, params, secret)) {
        return json(res, 401, { error: 'bad signature' });
      }
      return json(res, 200, { ok: true });
    }
    json(res, 404, { error: 'not_found', path: url.pathname });
  }

  /** Recomputes the signature over the request as received, with the client's nonce and timestamp. */
  function verifyOAuth1(method: string, url: URL, params: Record<string, string>, tokenSecret: string): boolean {
    if (params['oauth_consumer_key'] !== options.clientId) return false;
    const extra: Record<string, string> = {};
    if (params['oauth_callback'] !== undefined) extra['oauth_callback'] = params['oauth_callback'];
    if (params['oauth_verifier'] !== undefined) extra['oauth_verifier'] = params['oauth_verifier'];
    const expected = signOAuth1({
      method,
      url: url.toString(),
      consumerKey: options.clientId,
      consumerSecret: options.clientSecret,
      token: params['oauth_token'],
      tokenSecret,
      nonce: params['oauth_nonce'],
      timestamp: params['oauth_timestamp'],
      extraOAuthParams: extra,
    });
    return expected.signature === params['oauth_signature'];
  }

  return {
    url: base(),
    state,
    /** Makes a refresh token unusable, as a user revoking the app's access does. */
    revokeAllRefreshTokens(): void {
      state.refreshTokens.clear();
    },
    refreshRequests(): TokenRequestRecord[] {
      return state.tokenRequests.filter((request) => request.grantType === 'refresh_token');
    },
  };
}

export type FakeProvider = Awaited<ReturnType<typeof startFakeProvider>>;
