/**
 * The surface of the service that script authors see: the `svc` helper types and `ActionError`.
 * Scripts import these through their generated `service-integrations/models.ts`, which re-exports
 * them from `integration-service/runtime` (this file). Keep it narrow, documented and stable: every
 * change here is a change to every user's scripts.
 */

/** Configuration of one HTTP request made through `svc.get`, `svc.post`, `svc.put`, `svc.patch` or `svc.delete`. */
export interface RequestConfig {
  /**
   * Path of the request, appended to the API's base URL (from the provider catalog, or `baseUrlOverride`).
   * @example '/repos/octocat/hello-world/issues'
   */
  endpoint: string;
  /** Request headers. The connection's credentials are added by the service; do not set them here. */
  headers?: Record<string, string>;
  /**
   * Query parameters.
   * @example { page: 2, per_page: 100 }
   */
  params?: Record<string, string | number>;
  /** Request body; objects are sent as JSON. */
  data?: unknown;
  /**
   * How many times a failed request is retried, with exponential back-off. A request is retried on
   * 5xx, 429, ECONNRESET, ETIMEDOUT and ECONNABORTED, and on the statuses of `retryOn`. A
   * `Retry-After` header is honoured.
   * @default 0
   */
  retries?: number;
  /** Status codes to retry in addition to 5xx and 429. */
  retryOn?: number[];
  /**
   * The API's base URL, when the provider catalog has none or another is needed.
   * @example 'https://api.example.com/v2'
   */
  baseUrlOverride?: string;
  /**
   * Decompress a compressed response body.
   * @default false
   */
  decompress?: boolean;
  /** How the response body is read. `json` parses JSON; `text` returns a string; `arraybuffer` a base64 string. */
  responseType?: 'arraybuffer' | 'blob' | 'document' | 'json' | 'text' | 'stream';
}

/** An Axios-style response. */
export interface ServiceResponse<T = unknown> {
  /** The response body. */
  data: T;
  /** The HTTP status code. */
  status: number;
  /** Response headers, lower-cased names. */
  headers: Record<string, string>;
  /** The request configuration as given. */
  config: RequestConfig;
  /** What was sent: method and full URL (credentials removed). */
  request: { method: string; url: string };
}

/** An environment variable defined in the dashboard's Environment Settings. */
export interface EnvironmentVariable {
  name: string;
  value: string;
}

/** Credentials of a connection; the fields depend on the authentication type. */
export type Credentials =
  | {
      type: 'OAUTH2';
      access_token: string;
      /** Present only when `getConnection(…, true)` asked for it. */
      refresh_token?: string;
      expires_at?: string;
      raw: Record<string, unknown>;
    }
  | { type: 'OAUTH1'; oauth_token: string; oauth_token_secret: string; raw: Record<string, unknown> }
  | { type: 'API_KEY'; apiKey: string }
  | { type: 'BASIC'; username: string; password: string }
  /**
   * Tokens the service obtains by itself (docs/connections.md "Client credentials, service accounts
   * and app installations"): the current access token, never the client secret or private key.
   */
  | { type: 'OAUTH2_CC'; client_id: string; access_token: string; expires_at?: string; raw: Record<string, unknown> }
  | { type: 'JWT'; client_email: string; access_token: string; expires_at?: string; raw: Record<string, unknown> }
  | { type: 'APP'; app_id: string; access_token: string; expires_at?: string; raw: Record<string, unknown> }
  | { type: 'NONE' };

/** The connection record, as SPEC.md "Connection record" describes it. */
export interface ConnectionRecord {
  id: number;
  created_at: string;
  updated_at: string;
  /** The integration id. */
  provider_config_key: string;
  connection_id: string;
  credentials: Credentials;
  /** Connection settings, for example a subdomain or an instance identifier. */
  connection_config: Record<string, string>;
  account_id: number;
  metadata: Record<string, unknown>;
}

/** How `svc.paginate` walks the pages of a list endpoint. */
export type PaginationConfig =
  | {
      /** The response carries the cursor of the next page. */
      type: 'cursor';
      /** Dotted path of the next cursor in the response body. @example 'meta.next_cursor' */
      cursorPathInResponse: string;
      /** Query parameter that carries the cursor. @example 'cursor' */
      cursorNameInRequest: string;
    }
  | {
      /** The next page's URL is in a `Link` header (rel="next") or at a path of the body. */
      type: 'link';
      /** Dotted path of the next URL in the body; the `Link` header is read when omitted. */
      linkPathInResponseBody?: string;
    }
  | {
      /** Pages are addressed by an offset (or a page number with `offsetStartsAt` 1 and `offsetIncrement` 'page'). */
      type: 'offset';
      /** Query parameter of the offset. @example 'offset' */
      offsetNameInRequest: string;
      /** First offset. @default 0 */
      offsetStartsAt?: number;
      /** `items` adds the number of items received; `page` adds 1. @default 'items' */
      offsetIncrement?: 'items' | 'page';
    };

export interface PaginateConfig extends RequestConfig {
  paginate: PaginationConfig & {
    /** Dotted path of the list of items in the response body; the body itself when omitted. @example 'data.items' */
    responsePath?: string;
    /** Page size, sent as `limitNameInRequest`. */
    limit?: number;
    /** Query parameter of the page size. @example 'per_page' */
    limitNameInRequest?: string;
  };
}

/** Options of `svc.log`. */
export interface LogOptions {
  /** @default 'info' */
  level?: 'debug' | 'info' | 'warn' | 'error';
}

/** The helper object of an action script. */
export interface ServiceAction {
  /** The connection this run acts for. */
  readonly connectionId: string;
  /** The integration id of this run. */
  readonly providerConfigKey: string;

  /**
   * GET request to the external API with the connection's credentials injected. Each call is a
   * durable step: after a worker crash the run continues at the step it was on and a completed
   * request is answered from the step ledger; only the request in flight at the crash may be sent again
   * (docs/scripts.md).
   * @example const res = await svc.get<{ items: Issue[] }>({ endpoint: '/issues', params: { page: 1 }, retries: 3 });
   */
  get<T = unknown>(config: RequestConfig): Promise<ServiceResponse<T>>;
  /** POST request; see {@link ServiceAction.get}. */
  post<T = unknown>(config: RequestConfig): Promise<ServiceResponse<T>>;
  /** PUT request; see {@link ServiceAction.get}. */
  put<T = unknown>(config: RequestConfig): Promise<ServiceResponse<T>>;
  /** PATCH request; see {@link ServiceAction.get}. */
  patch<T = unknown>(config: RequestConfig): Promise<ServiceResponse<T>>;
  /** DELETE request; see {@link ServiceAction.get}. */
  delete<T = unknown>(config: RequestConfig): Promise<ServiceResponse<T>>;

  /**
   * Walks every page of a list endpoint, yielding each page's items.
   * @example
   * for await (const page of svc.paginate<Issue>({ endpoint: '/issues', paginate: { type: 'link', responsePath: 'items' } })) {
   *   await svc.batchSave(page, 'Issue');
   * }
   */
  paginate<T = unknown>(config: PaginateConfig): AsyncGenerator<T[], void, undefined>;

  /**
   * Stores a log line of this run, searchable in the dashboard and through the API.
   * @example await svc.log(`fetched ${issues.length} issues`);
   */
  log(message: string, options?: LogOptions): Promise<void>;

  /** The environment variables defined in the dashboard's Environment Settings. */
  getEnvironmentVariables(): Promise<EnvironmentVariable[]>;

  /**
   * Runs another action of the same integration and connection, and returns its output.
   * @example const user = await svc.triggerAction<{ id: string }, User>('fetch-user', { id: '42' });
   */
  triggerAction<I = unknown, O = unknown>(actionName: string, input: I): Promise<O>;

  /** The connection's metadata, typed by the caller. */
  getMetadata<T = Record<string, unknown>>(): Promise<T>;
  /** Replaces the whole metadata of the connection. */
  setMetadata(metadata: Record<string, unknown>): Promise<void>;
  /** Adds or overrides only the given metadata properties. */
  updateMetadata(metadata: Record<string, unknown>): Promise<void>;

  /**
   * The connection record. The access token is refreshed when it expires within 15 minutes, or on
   * every call with `forceRefresh` (for testing only). The refresh token is left out unless
   * `refreshToken` is true. Do not keep a token longer than 5 minutes.
   * @default forceRefresh false, refreshToken false
   */
  getConnection(forceRefresh?: boolean, refreshToken?: boolean): Promise<ConnectionRecord>;
}

/** An inbound webhook delivered to a sync that lists its type in `webhook_subscriptions`. */
export interface WebhookEvent {
  /** The subscription type, as listed in `webhook_subscriptions`. */
  type: string;
  /** The webhook's JSON body as the external API sent it. */
  payload: unknown;
  /** When the service received it (ISO 8601). */
  receivedAt: string;
}

/** The helper object of a sync script. */
export interface ServiceSync extends ServiceAction {
  /**
   * When the last successful run of this sync for this connection started (its start, not its end, so
   * that what changed while it ran is fetched again, never missed); undefined on the first run and on a
   * full resync.
   */
  readonly lastSyncDate: Date | undefined;
  /** The webhook that triggered this run, when a webhook did. */
  readonly webhook: WebhookEvent | undefined;

  /**
   * Upserts records of the model into the cache, deduplicated by `id` (the last occurrence of an id wins).
   * @example await svc.batchSave(issues.map(toIssue), 'Issue');
   */
  batchSave<T extends { id: string | number }>(records: T[], modelType: string): Promise<void>;
  /**
   * Soft-deletes records of the model: they are still returned, marked deleted. Other fields are ignored.
   * @example await svc.batchDelete([{ id: '42' }], 'Issue');
   */
  batchDelete(records: { id: string | number }[], modelType: string): Promise<void>;
}

/**
 * Thrown by an action script to fail with a payload the caller receives as
 * `{ "error_type": "action_script_failure", "payload": … }`.
 * @example throw new ActionError({ message: 'issue is locked', issue: input.id });
 */
export class ActionError<T extends Record<string, unknown> = Record<string, unknown>> extends Error {
  readonly type = 'action_script_failure';
  readonly payload: T;

  constructor(payload: T) {
    super(typeof payload['message'] === 'string' ? payload['message'] : 'action script failed');
    this.name = 'ActionError';
    this.payload = payload;
  }
}

/** The shape of a sync script's default export. */
export type SyncScript = (svc: ServiceSync) => Promise<void>;
/** The shape of an action script's default export. */
export type ActionScript<I = unknown, O = unknown> = (svc: ServiceAction, input: I) => Promise<O>;
