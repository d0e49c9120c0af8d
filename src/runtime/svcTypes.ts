/**
 * The data that crosses between the workflow-side `svc` and its activities. Plain types and constants
 * only: workflow code imports this file.
 */
import type { RequestConfig, ServiceResponse } from './public.js';

export type HttpMethod = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export interface HttpRequestInput {
  method: HttpMethod;
  /** The request config minus what the activity does not need (retries are the activity's policy). */
  config: RequestConfig;
}

/** A response as it is recorded in history: `config` is added back on the workflow side. */
export type HttpResult = Omit<ServiceResponse, 'config'>;

export type HttpFailureDetails =
  | { kind: 'response'; response: HttpResult }
  | { kind: 'network'; code: string; request: { method: string; url: string } };

/** ApplicationFailure types of a failed request. */
export const REQUEST_ERROR_TYPES = {
  /** The server answered 4xx/5xx. */
  status: 'http_status_error',
  /** No answer: reset, timeout, refused, DNS. */
  network: 'http_network_error',
} as const;
