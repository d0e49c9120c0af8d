/**
 * The data that crosses between the workflow-side `svc` and its activities. Plain types and constants
 * only: workflow code imports this file.
 */
import type { IntegrationInfo, Pagination, RequestConfig, ServiceResponse } from './public.js';
import type { RunErrorCode } from '../errors.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

/**
 * A request config as the run sends it to the activity: checked and normalised (the query as a record,
 * no retries, which are the activity's policy, and nothing the activity does not read).
 */
export interface SentRequestConfig {
  endpoint: string;
  headers?: Record<string, string>;
  params?: Record<string, string | number>;
  data?: unknown;
  retryOn?: number[];
  baseUrlOverride?: string;
  decompress?: boolean;
  responseType?: RequestConfig['responseType'];
}

export interface HttpRequestInput {
  method: HttpMethod;
  config: SentRequestConfig;
  /**
   * Which page of a `svc.paginate` walk this request is (0 the first); absent for other requests. Read
   * by local runs that answer from recordings (a recording of the field's format holds one page).
   */
  page?: number;
}

/** A response with its body as the script sees it: `config` and `statusText` are added on the workflow side. */
export type HttpResult = Omit<ServiceResponse, 'config' | 'statusText'>;

/**
 * A response as the request step records it since issue 31's JSON hole (src/runtime/httpAnswer.ts):
 * the body as the API sent it, as text, parsed on the run's workflow thread, never on the worker's
 * main thread. Histories written before it hold an HttpResult (the body parsed); the workflow side
 * reads both.
 */
export interface HttpAnswer {
  status: number;
  headers: Record<string, string>;
  request: { method: string; url: string };
  /** The body: its text (UTF-8, BOM removed, as axios read it), or base64 for `arraybuffer`/`blob`. */
  body: string;
  /**
   * `base64-utf8`: `body` holds the text's UTF-8 bytes as base64, for a text JSON would write at up to
   * six times its size (control characters); the run's workflow thread decodes it (answerText).
   * Absent: `body` is as above.
   */
  encoding?: typeof BASE64_UTF8;
  /** The script asked for JSON (the default): `data` is the body parsed, or the text where it is not JSON. */
  json: boolean;
}

/** HttpAnswer.encoding of a body carried as the base64 of its text's UTF-8 bytes. */
export const BASE64_UTF8 = 'base64-utf8';

/** What a request step's result or failure detail holds: today's form, or the older parsed one. */
export type RecordedResponse = HttpAnswer | HttpResult;

export type HttpFailureDetails =
  | { kind: 'response'; response: RecordedResponse }
  | { kind: 'network'; code: string; request: { method: string; url: string } };

/** ApplicationFailure types of a failed request. */
export const REQUEST_ERROR_TYPES = {
  /** The server answered 4xx/5xx. */
  status: 'http_status_error',
  /** No answer: reset, timeout, refused, DNS. */
  network: 'http_network_error',
} as const satisfies Record<string, RunErrorCode>;

/** What the run learns of its integration (activity getIntegration): what the script sees, and the provider's default pagination. */
export interface IntegrationDescription {
  integration: IntegrationInfo;
  /** The provider catalog's `paginate` of the integration's provider, when it has one. */
  pagination?: Pagination;
}

const REASON_PHRASES: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  301: 'Moved Permanently',
  302: 'Found',
  304: 'Not Modified',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  409: 'Conflict',
  410: 'Gone',
  422: 'Unprocessable Entity',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
  503: 'Service Unavailable',
  504: 'Gateway Timeout',
};

/** A response's `statusText` (axios has it): the status's reason phrase, '' for one not listed. */
export function reasonPhrase(status: number): string {
  return REASON_PHRASES[status] ?? '';
}
