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
   * Query parameters, or a query string.
   * @example { page: 2, per_page: 100 }
   */
  params?: string | Record<string, string | number>;
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
  retryOn?: number[] | null;
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
  responseType?: 'arraybuffer' | 'blob' | 'document' | 'json' | 'text' | 'stream' | undefined;
  /**
   * The run's own integration id, as the field's format lets a script name it; another integration's
   * is refused (`scope_denied`): a script acts for its own connection only.
   */
  providerConfigKey?: string;
  /** The run's own connection id; another connection's is refused (`scope_denied`). */
  connectionId?: string;
  /** Accepted for the field's format; the service honours `Retry-After` by itself. */
  retryHeader?: { at?: string; after?: string };
  /** Accepted for the field's format; a redirect gets the credentials only on the provider's hosts. */
  forwardHeadersOnRedirect?: boolean;
}

/**
 * An Axios-style response. `data` is typed `any` unless the call names its type (`svc.get<Issue[]>`),
 * as the field's format types it.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- the format's scripts read response data untyped
export interface ServiceResponse<T = any> {
  /** The response body. */
  data: T;
  /** The HTTP status code. */
  status: number;
  /** The status's reason phrase (`OK`, `Not Found`), as axios gives it. */
  statusText: string;
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

/** The authentication modes by the field's names (its models file exports them). */
export interface AuthModes {
  OAuth1: 'OAUTH1';
  OAuth2: 'OAUTH2';
  OAuth2CC: 'OAUTH2_CC';
  Basic: 'BASIC';
  ApiKey: 'API_KEY';
  App: 'APP';
  None: 'NONE';
  Jwt: 'JWT';
}
export type AuthModeType = AuthModes[keyof AuthModes];

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

/**
 * How `svc.paginate` walks the pages of a list endpoint: the keys of the field's format (snake_case),
 * each also accepted in camelCase (`responsePath`, `cursorNameInRequest`, …). Keys the script leaves
 * out come from the provider catalog's default pagination of the integration's provider, when it has
 * one (docs/scripts.md "svc.paginate"). A key the walk cannot follow fails with `invalid_pagination`
 * naming it.
 */
export interface Pagination {
  /** `cursor`, `link` or `offset`; from the provider's default when left out. */
  type?: string;
  /** Page size, sent as `limit_name_in_request`. */
  limit?: number | string;
  /** Query (or body) parameter of the page size. @example 'per_page' */
  limit_name_in_request?: string;
  /** Dotted path of the list of items in the response body; the body itself when omitted. @example 'data.items' */
  response_path?: string;
  /**
   * Send the pagination parameters in the body instead of the query.
   * @default true for POST, PUT and PATCH, false otherwise
   */
  in_body?: boolean;
  /** Called before each next page is requested, with that page's parameter and the response that named it. */
  on_page?: (state: { nextPageParam?: string | number | undefined; response: ServiceResponse }) => Promise<void>;
  /** cursor: dotted path of the next cursor in the body; the walk ends when it is missing or empty. @example 'meta.next_cursor' */
  cursor_path_in_response?: string;
  /** cursor: the parameter that carries the cursor. @example 'cursor' */
  cursor_name_in_request?: string;
  /** link: the `rel` of the next page in the `Link` header. @default 'next' (when no body path is given) */
  link_rel_in_response_header?: string;
  /** link: dotted path of the next page's URL in the body. */
  link_path_in_response_body?: string;
  /** offset: the parameter of the offset (or page number). @example 'offset' */
  offset_name_in_request?: string;
  /** offset: the first offset. @default 0 */
  offset_start_value?: number;
  /** offset: `by-response-size` adds the items received, `per-page` adds 1 (page numbers). @default 'by-response-size' */
  offset_calculation_method?: 'per-page' | 'by-response-size';

  /** camelCase of `response_path`. */
  responsePath?: string;
  /** camelCase of `limit_name_in_request`. */
  limitNameInRequest?: string;
  /** camelCase of `cursor_path_in_response`. */
  cursorPathInResponse?: string;
  /** camelCase of `cursor_name_in_request`. */
  cursorNameInRequest?: string;
  /** camelCase of `link_path_in_response_body`. */
  linkPathInResponseBody?: string;
  /** camelCase of `link_rel_in_response_header`. */
  linkRelInResponseHeader?: string;
  /** camelCase of `offset_name_in_request`. */
  offsetNameInRequest?: string;
  /** camelCase of `offset_start_value`. */
  offsetStartsAt?: number;
  /** `page` is `offset_calculation_method: 'per-page'`, `items` is `'by-response-size'`. */
  offsetIncrement?: 'items' | 'page';
}

/** A request of any method (`svc.proxy`), or the first page of `svc.paginate`. */
export interface ProxyConfiguration extends RequestConfig {
  /** @default 'GET' */
  method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE' | 'get' | 'post' | 'patch' | 'put' | 'delete';
  /** How `svc.paginate` walks the pages; ignored by the other methods. */
  paginate?: Pagination;
}

/** @deprecated The name before ProxyConfiguration: `svc.paginate` takes a ProxyConfiguration. */
export type PaginateConfig = ProxyConfiguration;

/** The integration of the run, as `svc.getIntegration()` answers it. */
export interface IntegrationInfo {
  /** The integration id. */
  unique_key: string;
  provider: string;
  display_name: string;
  created_at: string;
  updated_at: string;
  /** Where the provider sends this integration's webhooks (POST /webhook/<environment>/<integration>). */
  webhook_url?: string;
}

/** What `svc.getToken()` answers: the access token, or the credentials of a type without one. */
export type TokenAnswer =
  | string
  | { oAuthToken: string; oAuthTokenSecret: string }
  | Exclude<Credentials, { access_token: string } | { type: 'OAUTH1' }>;

/** The shape of a zod schema (zod 3 or 4) that `svc.zodValidateInput` needs: its `safeParse`. */
export interface ZodLikeSchema<Z> {
  safeParse(
    input: unknown,
  ):
    | { success: true; data: Z }
    | { success: false; error: { issues: readonly { message: string; path: readonly PropertyKey[] }[] } };
}

/** Options of `svc.log`. */
export interface LogOptions {
  /** @default 'info' */
  level?: 'debug' | 'info' | 'warn' | 'error' | 'http' | 'verbose' | 'silly';
}

/* eslint-disable @typescript-eslint/no-explicit-any -- the format's scripts read response data and log values untyped */
/** The helper object of an action script. */
export interface ServiceAction {
  /** The connection this run acts for. */
  readonly connectionId: string;
  /** The integration id of this run. */
  readonly providerConfigKey: string;
  /**
   * The integration's provider, its catalog name (`github`, `avalara-sandbox`), as it was when the run
   * loaded its script.
   */
  readonly provider?: string;

  /**
   * The class an action throws to refuse with a payload (the same as the `ActionError` export).
   * @example throw new svc.ActionError({ message: 'issue is locked', issue: input.id });
   */
  readonly ActionError: typeof ActionError;

  /**
   * GET request to the external API with the connection's credentials injected. Each call is a
   * durable step: after a worker crash the run continues at the step it was on and a completed
   * request is answered from the step ledger; only the request in flight at the crash may be sent again
   * (docs/scripts.md).
   * @example const res = await svc.get<{ items: Issue[] }>({ endpoint: '/issues', params: { page: 1 }, retries: 3 });
   */
  get<T = any>(config: Omit<ProxyConfiguration, 'method'>): Promise<ServiceResponse<T>>;
  /** POST request; see {@link ServiceAction.get}. */
  post<T = any>(config: Omit<ProxyConfiguration, 'method'>): Promise<ServiceResponse<T>>;
  /** PUT request; see {@link ServiceAction.get}. */
  put<T = any>(config: Omit<ProxyConfiguration, 'method'>): Promise<ServiceResponse<T>>;
  /** PATCH request; see {@link ServiceAction.get}. */
  patch<T = any>(config: Omit<ProxyConfiguration, 'method'>): Promise<ServiceResponse<T>>;
  /** DELETE request; see {@link ServiceAction.get}. */
  delete<T = any>(config: Omit<ProxyConfiguration, 'method'>): Promise<ServiceResponse<T>>;
  /**
   * A request of the config's `method` (default GET); see {@link ServiceAction.get}.
   * @example await svc.proxy({ method: 'POST', endpoint: '/search', data: { q: 'open' } });
   */
  proxy<T = any>(config: ProxyConfiguration): Promise<ServiceResponse<T>>;

  /**
   * Walks every page of a list endpoint, yielding each page's items: cursor, link or offset style,
   * the parameters in the query (or in the body: `in_body`, the default for POST, PUT and PATCH).
   * Keys left out come from the provider's default pagination. Each page is one durable request; the
   * walk never requests the same page twice in a row.
   * @example
   * for await (const page of svc.paginate<Issue>({ endpoint: '/issues', paginate: { type: 'link', response_path: 'items' } })) {
   *   await svc.batchSave(page, 'Issue');
   * }
   */
  paginate<T = any>(config: ProxyConfiguration): AsyncGenerator<T[], undefined, void>;

  /**
   * Stores a log line of this run, searchable in the dashboard and through the API. A value that is
   * not a string is logged as JSON; `{ level }` as the last argument sets the level.
   * @example await svc.log(`fetched ${issues.length} issues`);
   * @example await svc.log('skipped a label', { level: 'warn' });
   */
  log(message: any, options?: LogOptions | { [key: string]: any; level?: never }): Promise<void>;
  log(message: string, ...args: [any, LogOptions]): Promise<void>;

  /** The environment variables defined in the dashboard's Environment Settings. */
  getEnvironmentVariables(): Promise<EnvironmentVariable[]>;

  /**
   * Runs another action of the same integration and connection, and returns its output. The field's
   * four-argument form (integration id, connection id, action, input) is accepted with this run's own
   * integration and connection.
   * @example const user = await svc.triggerAction<{ id: string }, User>('fetch-user', { id: '42' });
   */
  triggerAction<I = unknown, O = any>(actionName: string, input: I): Promise<O>;
  triggerAction<I = unknown, O = any>(
    providerConfigKey: string,
    connectionId: string,
    actionName: string,
    input?: I,
  ): Promise<O>;

  /** The connection's metadata, typed by the caller. */
  getMetadata<T = Record<string, any>>(): Promise<T>;
  /** Replaces the whole metadata of the connection. */
  setMetadata(metadata: Record<string, any>): Promise<void>;
  /** Adds or overrides only the given metadata properties. */
  updateMetadata(metadata: Record<string, any>): Promise<void>;
  /** `fieldMapping` of the connection's metadata (the field's older name for part of it), `{}` when absent. */
  getFieldMapping(): Promise<Record<string, string>>;

  /**
   * The connection record. The access token is refreshed when it expires within 15 minutes, or on
   * every call with `forceRefresh` (for testing only). The refresh token is left out unless
   * `refreshToken` is true. Do not keep a token longer than 5 minutes. The field's form
   * `(providerConfigKey?, connectionId?, { forceRefresh?, refreshToken? })` is accepted for this run's
   * own integration and connection.
   * @default forceRefresh false, refreshToken false
   */
  getConnection(forceRefresh?: boolean, refreshToken?: boolean): Promise<ConnectionRecord>;
  getConnection(
    providerConfigKeyOverride?: string,
    connectionIdOverride?: string,
    options?: { forceRefresh?: boolean; refreshToken?: boolean; refreshGithubAppJwtToken?: boolean },
  ): Promise<ConnectionRecord>;
  /** The connection's access token (OAuth 1: token and secret; other types: their credentials). */
  getToken(): Promise<TokenAnswer>;

  /** The run's integration: id, provider, display name, times, and its inbound webhook URL. */
  getIntegration(queries?: { include?: ('webhook' | 'credentials')[] }): Promise<IntegrationInfo>;
  /** Where the provider should send this integration's webhooks (`getIntegration().webhook_url`). */
  getWebhookURL(): Promise<string | null | undefined>;

  /**
   * Checks an action's input with a zod schema (zod 3 or 4): answers `{ success: true, data }`, or logs
   * each problem at level error and throws `ActionError({ message: 'Invalid input provided' })`.
   * @example const { data } = await svc.zodValidateInput({ zodSchema: createIssueSchema, input });
   */
  zodValidateInput<T = any, Z = any>(options: {
    zodSchema: ZodLikeSchema<Z>;
    input: T;
  }): Promise<{ success: true; data: Z }>;
}
/* eslint-enable @typescript-eslint/no-explicit-any */

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
  batchSave<T extends object>(records: T[], modelType: string): Promise<void>;
  /**
   * Soft-deletes records of the model: they are still returned, marked deleted. Other fields are ignored.
   * @example await svc.batchDelete([{ id: '42' }], 'Issue');
   */
  batchDelete<T extends object>(records: T[], modelType: string): Promise<void>;

  /**
   * The checkpoint this sync last saved for this connection, or null (the first run, after
   * `clearCheckpoint`, after a full resync). A run that nears its execution's limits continues in a
   * next execution, which starts the script again: read the checkpoint first and go on from it
   * (docs/scripts.md "Resumable syncs").
   * @example const checkpoint = await svc.getCheckpoint<{ cursor: string }>();
   */
  getCheckpoint<T extends Checkpoint = Checkpoint>(): Promise<T | null>;
  /**
   * Saves where the sync has got to: a flat object of strings, numbers and booleans (at most 16 keys,
   * strings of at most 4000 characters). Save it after the `batchSave` of the page it points past: a
   * run is continued in a next execution only right after a `saveCheckpoint`, or at the history limit
   * when it has one.
   * @example await svc.batchSave(page.items, 'Issue'); await svc.saveCheckpoint({ cursor: page.next });
   */
  saveCheckpoint<T extends Checkpoint = Checkpoint>(checkpoint: T): Promise<void>;
  /** Forgets the checkpoint: the next run starts from the beginning (a full sync calls it at its end). */
  clearCheckpoint(): Promise<void>;
  /**
   * Starts a pass over the whole of a model: every record of it that no execution of this run saves
   * before `trackDeletesEnd(model)` is then marked deleted. For an incremental sync that does a full
   * pass now and then; `track_deletes: true` does the same for a whole full sync.
   */
  trackDeletesStart(modelType: string): Promise<void>;
  /** Ends the pass `trackDeletesStart(model)` began in this run: marks the records it did not save deleted. */
  trackDeletesEnd(modelType: string): Promise<void>;
}

/** A checkpoint's values (svc.saveCheckpoint). */
export type CheckpointValue = string | number | boolean;
/** A checkpoint: a flat object, at most 16 keys. */
export type Checkpoint = Record<string, CheckpointValue>;

/**
 * Thrown by an action script to fail with a payload the caller receives as
 * `{ "error_type": "action_script_failure", "payload": … }`. Also `svc.ActionError`.
 * @example throw new ActionError({ message: 'issue is locked', issue: input.id });
 */
export class ActionError<T = Record<string, unknown>> extends Error {
  readonly type = 'action_script_failure';
  readonly payload: T;

  constructor(payload?: T) {
    const message = (payload as { message?: unknown } | undefined)?.message;
    super(typeof message === 'string' ? message : 'action script failed');
    this.name = 'ActionError';
    this.payload = payload ?? ({} as T);
  }
}

/** The shape of a sync script's default export. */
export type SyncScript = (svc: ServiceSync) => Promise<void>;
/** The shape of an action script's default export. */
export type ActionScript<I = unknown, O = unknown> = (svc: ServiceAction, input: I) => Promise<O>;
