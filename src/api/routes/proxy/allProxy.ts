/**
 * ALL /proxy/*: an authenticated pass-through to the connection's external API. The path after
 * /proxy and the query go to the API's base URL (the provider catalog's, or `Base-Url-Override`, which
 * must be a host of the provider); the connection's credentials are injected by
 * ConnectionService.authorizeRequest, and the connection obeys the outbound request policy
 * (src/runtime/outbound.ts: no internal address unless allowed, redirects not followed). `Retries: n` retries
 * on 5xx, 429, ECONNRESET, ETIMEDOUT and ECONNABORTED and on the statuses of `Retry-On: 409,423`, with
 * exponential back-off, honouring `Retry-After` (SPEC.md "Errors"). The answer is the API's answer:
 * status, headers (hop-by-hop ones dropped) and body bytes as received.
 */
import type { Request } from 'express';
import { AxiosError } from 'axios';
import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import {
  isRetryableStatus,
  MAX_RESPONSE_BYTES,
  parseRetryAfter,
  RETRYABLE_NETWORK_CODES,
} from '../../../runtime/http.js';
import { outboundRefusal, policyRequest, refusedError } from '../../../runtime/outbound.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute, type AnyRoute, type HttpMethod } from '../../route.js';
import { readBodyBytes } from '../../body.js';
import { scopeOf } from '../shared.js';

const MAX_RETRIES = 10;

// Hop-by-hop headers (RFC 9110 section 7.6.1) and the length, which the sender recomputes.
const HOP_BY_HOP = ['connection', 'keep-alive', 'transfer-encoding', 'te', 'trailer', 'upgrade', 'content-length'];
// What else belongs to this service and must not reach the external API.
const NOT_FORWARDED = new Set([
  ...HOP_BY_HOP,
  'host',
  'proxy-authorization',
  'proxy-connection',
  'authorization',
  'connection-id',
  'provider-config-key',
  'retries',
  'retry-on',
  'base-url-override',
  'x-request-id',
]);
const NOT_RETURNED = new Set(HOP_BY_HOP);
// The de-facto client sends the external API's own headers as `<Product>-Proxy-<Name>` and flags of
// its own (`<Product>-Is-Sync`, `<Product>-Is-Dry-Run`, `<Product>-Activity-Log-Id`, `Decompress`): the
// first reach the external API without the prefix, the others not at all (docs/api.md, compatibility).
const PREFIXED = /^[a-z0-9]+-proxy-(.+)$/;
const CLIENT_FLAGS = /^(?:[a-z0-9]+-(?:is-sync|is-dry-run|activity-log-id)|decompress)$/;

const proxyParams = z.object({ path: z.array(z.string()) });

/** A header's value; an empty one is absent (the de-facto client sends `Base-Url-Override: ''` on every call). */
const headerOf = (req: Request, name: string): string | undefined => req.header(name) || undefined;

function parseHeaders(req: Request): { retries: number; retryOn: number[]; baseUrlOverride: string | undefined } {
  const problems: string[] = [];
  const retriesText = headerOf(req, 'retries');
  const retries = retriesText === undefined ? 0 : Number(retriesText);
  if (!Number.isInteger(retries) || retries < 0 || retries > MAX_RETRIES) {
    problems.push(`header Retries must be an integer from 0 to ${MAX_RETRIES}, got '${retriesText ?? ''}'`);
  }
  const retryOnText = headerOf(req, 'retry-on');
  const retryOn = (retryOnText ?? '')
    .split(',')
    .map((part) => part.trim())
    .filter((part) => part !== '')
    .map(Number);
  if (retryOn.some((status) => !Number.isInteger(status) || status < 100 || status > 599)) {
    problems.push(`header Retry-On must be comma-separated HTTP statuses, got '${retryOnText ?? ''}'`);
  }
  const baseUrlOverride = headerOf(req, 'base-url-override');
  if (baseUrlOverride !== undefined && !/^https?:\/\/[^\s]+$/i.test(baseUrlOverride)) {
    problems.push('header Base-Url-Override must be an http(s) URL');
  }
  if (problems.length > 0) {
    throw new ServiceError('invalid_request', `Invalid request: ${problems.join('; ')}`, {
      details: problems,
    });
  }
  return { retries, retryOn, baseUrlOverride };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export function proxyRoutes(deps: ApiDeps): AnyRoute[] {
  const initialMs = deps.proxy?.retryInitialMs ?? 1000;
  const maximumMs = deps.proxy?.retryMaximumMs ?? 30_000;
  const timeoutMs = deps.proxy?.timeoutMs ?? 60_000;
  const methods: HttpMethod[] = ['get', 'post', 'put', 'patch', 'delete'];
  return methods.map((method) =>
    defineRoute({
      method,
      path: '/proxy/*path',
      summary: `${method.toUpperCase()} the external API of a connection, credentials injected`,
      description:
        'Headers: `Retries` (0–10), `Retry-On` (extra statuses to retry, comma-separated), `Base-Url-Override` (a host of the provider only: 403 base_url_not_allowed otherwise). The answer is the external API’s own status, headers and body; an internal address is 403 outbound_request_refused unless SERVICE_OUTBOUND_ALLOW opens it.',
      tags: ['proxy'],
      auth: 'secret-key',
      connectionScoped: true,
      params: proxyParams,
      responses: { 200: { description: 'The external API’s answer, passed through' } },
      handler: async ({ req, res, params, connection }) => {
        const scope = scopeOf(connection);
        const { retries, retryOn, baseUrlOverride } = parseHeaders(req);
        const search = req.originalUrl.includes('?') ? req.originalUrl.slice(req.originalUrl.indexOf('?')) : '';
        const endpoint = `/${params.path.map(encodeURIComponent).join('/')}${search}`;
        const headers: Record<string, string> = {};
        for (const [name, value] of Object.entries(req.headers)) {
          // An empty header means absent, so the de-facto client's empty ones do not reach the external API.
          if (value === undefined || value === '' || CLIENT_FLAGS.test(name)) continue;
          const target = PREFIXED.exec(name)?.[1] ?? name;
          if (NOT_FORWARDED.has(target)) continue;
          headers[target] = Array.isArray(value) ? value.join(', ') : value;
        }
        if (headers['accept-encoding'] === undefined) headers['accept-encoding'] = 'identity';
        const bytes = req.method === 'GET' ? undefined : await readBodyBytes(req, { inflate: false });
        const body = bytes && bytes.length > 0 ? bytes : undefined;
        const authorized = await deps.connections.authorizeRequest(scope, {
          method: req.method,
          endpoint,
          baseUrlOverride,
          headers,
          params: {},
        });
        for (let attempt = 0; ; attempt++) {
          let delay = Math.min(maximumMs, initialMs * 2 ** attempt);
          try {
            // The outbound request policy (src/runtime/outbound.ts): the address is checked as connected.
            const response = await policyRequest<Buffer>({
              method: authorized.method,
              url: authorized.url,
              headers: authorized.headers,
              data: body,
              responseType: 'arraybuffer',
              decompress: false,
              // The body is held whole before it is passed on: at most this much of it.
              maxContentLength: MAX_RESPONSE_BYTES,
              timeout: timeoutMs,
            });
            if (attempt < retries && isRetryableStatus(response.status, retryOn)) {
              const retryAfter = parseRetryAfter(String(response.headers['retry-after'] ?? ''));
              if (retryAfter === undefined || retryAfter <= maximumMs) {
                delay = retryAfter ?? delay;
                await sleep(delay);
                continue;
              }
            }
            res.status(response.status);
            for (const [name, value] of Object.entries(response.headers)) {
              if (value === undefined || value === null || NOT_RETURNED.has(name.toLowerCase())) continue;
              res.setHeader(name, Array.isArray(value) ? value.map(String) : String(value));
            }
            res.end(Buffer.from(response.data));
            return undefined;
          } catch (error) {
            const refused = outboundRefusal(error);
            if (refused) throw refusedError(refused);
            if (!(error instanceof AxiosError)) throw error;
            const code = error.code ?? 'ERR_NETWORK';
            if (code === 'ERR_BAD_RESPONSE' && /maxContentLength/.test(error.message)) {
              throw new ServiceError(
                'proxy_response_too_large',
                `the external API's answer to ${authorized.method} is larger than ${MAX_RESPONSE_BYTES / 1024 / 1024} MiB, the most the proxy passes on; ask for less (a page, a range)`,
              );
            }
            if (attempt < retries && RETRYABLE_NETWORK_CODES.has(code)) {
              await sleep(delay);
              continue;
            }
            throw new ServiceError(
              'proxy_upstream_unreachable',
              `${authorized.method} to the external API failed after ${attempt + 1} attempt(s): ${code}`,
              { retryable: true },
            );
          }
        }
      },
    }),
  );
}
