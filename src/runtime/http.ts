/**
 * The HTTP side of `svc.get/post/put/patch/delete`, run inside an activity: authorise through the
 * connection service, send once, and classify the outcome for Temporal's retry policy. One call is one
 * attempt; the activity retry policy (attempts = retries + 1, exponential back-off) does the rest.
 */
import { AxiosError, type AxiosResponse, type ResponseType } from 'axios';
import { ApplicationFailure } from '@temporalio/common';
import type { ConnectionScope, RequestAuthorizer } from './connectionAccess.js';
import { redactJsonText, redactSecrets, redactValue } from './redaction.js';
import { isServiceError } from '../errors.js';
import { OUTBOUND_REFUSED, outboundRefusal, policyRequest } from './outbound.js';
import {
  BASE64_UTF8,
  REQUEST_ERROR_TYPES,
  type HttpAnswer,
  type HttpRequestInput,
  type HttpFailureDetails,
  type SentRequestConfig,
} from './svcTypes.js';

/** Statuses retried whatever `retryOn` says (SPEC.md Errors). */
export function isRetryableStatus(status: number, retryOn: readonly number[] | undefined): boolean {
  return status >= 500 || status === 429 || (retryOn?.includes(status) ?? false);
}

/** Connection errors retried (SPEC.md Errors); any other network error is final. */
export const RETRYABLE_NETWORK_CODES = new Set(['ECONNRESET', 'ETIMEDOUT', 'ECONNABORTED']);

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date; undefined when absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now = Date.now()): number | undefined {
  if (value === undefined || value.trim() === '') return undefined;
  const trimmed = value.trim();
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

// Per-attempt limit on waiting for a response; an attempt that hits it fails with ECONNABORTED,
// which is retryable, like any other timeout.
export const REQUEST_TIMEOUT_MS = 60_000;
// A longer Retry-After would park the run for hours; past this the request fails instead.
const MAX_RETRY_AFTER_MS = 10 * 60_000;

/**
 * How the body is read: bytes for `arraybuffer`/`blob`, text for everything else. A JSON answer (the
 * default) is read as text too and parsed on the run's workflow thread (src/runtime/httpAnswer.ts):
 * parsing it here, on the worker's main thread, stalled every environment's tasks for as long as one
 * API's answer took to parse (33.9 s for 32 MiB of `[{},{},…]`).
 */
function axiosResponseType(config: SentRequestConfig): ResponseType {
  return config.responseType === 'arraybuffer' || config.responseType === 'blob' ? 'arraybuffer' : 'text';
}

/** Whether the script asked for JSON (no responseType, or 'json'): then the workflow side parses the text. */
function wantsJson(config: SentRequestConfig): boolean {
  return config.responseType === undefined || config.responseType === 'json';
}

function lowerCaseHeaders(headers: AxiosResponse['headers'] | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries(headers ?? {})) {
    if (value === undefined || value === null) continue;
    out[key.toLowerCase()] = Array.isArray(value) ? value.join(', ') : String(value);
  }
  return out;
}

// A stream cannot cross a durable step: it is read whole, as text.
function responseBody(data: unknown): string {
  if (data instanceof ArrayBuffer || Buffer.isBuffer(data)) return Buffer.from(data as ArrayBuffer).toString('base64');
  return typeof data === 'string' ? data : '';
}

// A control character JSON writes as six (`\u0001`); \b \t \n \f \r take two, as `"` and `\\` do.
// eslint-disable-next-line no-control-regex -- control characters are what it looks for
const SIX_BYTE_ESCAPE = /[\x00-\x07\x0b\x0e-\x1f]/;

/**
 * The answer as it crosses the worker's main thread (the SDK's JSON of the step's result, the codec,
 * the claim check): its text, or, when the text holds a character JSON writes as six, the base64 of its
 * UTF-8 bytes (4/3 of the bytes, written natively, never escaped), which the run's workflow thread
 * decodes (answerText). A binary body is base64 already: it never matches. 32 MiB of `\u0001` were a 192 MiB payload; now 43 MiB. One regular-expression
 * scan decides (about 1 ms per MiB); ordinary JSON keeps its text (about 1.2 times in JSON, less than
 * base64), docs/architecture.md "A request's answer is parsed on the run's thread".
 */
function carried(answer: HttpAnswer): HttpAnswer {
  if (!SIX_BYTE_ESCAPE.test(answer.body)) return answer;
  return { ...answer, body: Buffer.from(answer.body, 'utf8').toString('base64'), encoding: BASE64_UTF8 };
}

/** The longest response body (after decompression) a `svc` request reads: 32 MiB (docs/scripts.md "Limits"). */
export const MAX_RESPONSE_BYTES = 32 * 1024 * 1024;

/** Redirects followed per attempt, as axios does by default (each hop re-authorised and re-checked). */
export const MAX_REDIRECTS = 5;

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);

/**
 * Sends one attempt of the request. Returns the response for 1xx–3xx; throws an ApplicationFailure
 * for everything else, retryable or not per SPEC.md, carrying the response as its detail and the
 * server's `Retry-After` as the next retry delay.
 *
 * Every connection goes through the outbound request policy (src/runtime/outbound.ts). Redirects are
 * followed here, not by the HTTP client: each hop is authorised again, so the connection's
 * credentials go only to the provider's hosts, and each hop's address is checked. Whatever is kept
 * or shown of the request and its answer in a failure (URL, message, body, headers) has every
 * credential value of the connection redacted.
 */
export async function sendRequest(
  connections: RequestAuthorizer,
  scope: ConnectionScope,
  { method, config }: HttpRequestInput,
): Promise<HttpAnswer> {
  const authorize = async (request: { method: string; endpoint: string; params: Record<string, string | number> }) => {
    try {
      return await connections.authorizeRequest(scope, {
        ...request,
        baseUrlOverride: config.baseUrlOverride,
        headers: config.headers ?? {},
      });
    } catch (error) {
      if (isServiceError(error)) {
        throw ApplicationFailure.create({ type: error.code, message: error.message, nonRetryable: !error.retryable });
      }
      throw error;
    }
  };
  const first = await authorize({ method, endpoint: config.endpoint, params: config.params ?? {} });
  const secrets = first.secrets ?? [];
  // The connection service built the URL with the query, credentials included: redact before it is kept.
  const request = { method, url: redactUrl(first.url, secrets) };
  let authorized = first;
  let data = config.data;
  try {
    for (let hop = 0; ; hop++) {
      const headers: Record<string, string> = { ...authorized.headers };
      // Axios asks for compressed bodies by default; without `decompress` the body would arrive compressed.
      const hasAcceptEncoding = Object.keys(headers).some((key) => key.toLowerCase() === 'accept-encoding');
      if (config.decompress !== true && !hasAcceptEncoding) headers['Accept-Encoding'] = 'identity';
      const response = await policyRequest({
        method: authorized.method,
        url: authorized.url,
        headers,
        data,
        responseType: axiosResponseType(config),
        decompress: config.decompress === true,
        timeout: REQUEST_TIMEOUT_MS,
        // A bigger (decompressed) body fails the request: one API's answer never fills the worker.
        maxContentLength: MAX_RESPONSE_BYTES,
        maxBodyLength: Infinity,
      });
      const location = response.headers['location'] as unknown;
      if (REDIRECT_STATUSES.has(response.status) && typeof location === 'string' && location !== '') {
        if (hop >= MAX_REDIRECTS) {
          throw networkFailure(method, request, 'ERR_FR_TOO_MANY_REDIRECTS', `more than ${MAX_REDIRECTS} redirects`);
        }
        // 303, and 301/302 after a POST, continue as a GET without the body (RFC 9110 section 15.4).
        const asGet =
          response.status === 303 ||
          ((response.status === 301 || response.status === 302) && authorized.method === 'POST');
        if (asGet) data = undefined;
        authorized = await authorize({
          method: asGet ? 'GET' : authorized.method,
          endpoint: new URL(location, authorized.url).toString(),
          params: {},
        });
        continue;
      }
      const result: HttpAnswer = {
        status: response.status,
        headers: lowerCaseHeaders(response.headers),
        request,
        body: responseBody(response.data),
        json: wantsJson(config),
      };
      if (response.status < 400) return carried(result);
      // The body is redacted as text, its JSON string literals as the values they spell (escapes too).
      const redacted: HttpAnswer = carried({
        ...redactValue({ ...result, body: '' }, secrets),
        body: redactJsonText(result.body, secrets),
      });
      const details: HttpFailureDetails = { kind: 'response', response: redacted };
      const retryable = isRetryableStatus(response.status, config.retryOn);
      const retryAfter = retryable ? parseRetryAfter(result.headers['retry-after']) : undefined;
      throw ApplicationFailure.create({
        type: REQUEST_ERROR_TYPES.status,
        message: `${method} ${request.url} answered ${response.status}`,
        nonRetryable: !retryable || (retryAfter !== undefined && retryAfter > MAX_RETRY_AFTER_MS),
        details: [details],
        ...(retryAfter !== undefined && retryAfter <= MAX_RETRY_AFTER_MS ? { nextRetryDelay: retryAfter } : {}),
      });
    }
  } catch (error) {
    if (error instanceof ApplicationFailure) throw error;
    const refused = outboundRefusal(error);
    if (refused) {
      throw ApplicationFailure.create({
        type: OUTBOUND_REFUSED,
        message: `${method} ${request.url}: ${redactSecrets(refused.message, secrets)}`,
        nonRetryable: true,
      });
    }
    if (error instanceof AxiosError) {
      throw networkFailure(method, request, error.code ?? 'ERR_NETWORK', redactSecrets(error.message, secrets));
    }
    throw error;
  }
}

function networkFailure(
  method: string,
  request: { method: string; url: string },
  code: string,
  message: string,
): ApplicationFailure {
  const details: HttpFailureDetails = { kind: 'network', code, request };
  return ApplicationFailure.create({
    type: REQUEST_ERROR_TYPES.network,
    message: `${method} ${request.url} failed: ${code} ${message}`,
    nonRetryable: !RETRYABLE_NETWORK_CODES.has(code),
    details: [details],
  });
}

// Credentials the connection service put into the query string must not reach history or logs: every
// credential value is redacted (by value), and parameters named like a credential (by name) too, for
// connection services that do not say which values are secret.
const SECRET_QUERY_KEYS = /^(api[_-]?key|key|token|access[_-]?token|auth|signature|oauth_.*|client_secret|password)$/i;

function redactUrl(url: string, secrets: readonly string[]): string {
  const parsed = new URL(url);
  for (const [key, value] of [...parsed.searchParams.entries()]) {
    if (SECRET_QUERY_KEYS.test(key) || secrets.some((secret) => value.includes(secret))) {
      parsed.searchParams.set(key, 'REDACTED');
    }
  }
  parsed.username = '';
  parsed.password = '';
  return redactSecrets(parsed.toString(), secrets);
}
