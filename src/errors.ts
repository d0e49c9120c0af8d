/**
 * One error taxonomy for the whole service. Every error a user can see has a stable snake_case
 * `code`; each boundary translates it: activities into `ApplicationFailure({ type: code })`, the run
 * workflow into the failure type the run ends with, the API into `{ error: { code, message } }` with
 * `status`, the CLI into a one-line message.
 *
 * Workflow code imports this module (workflows/runScript.ts, workflows/svc.ts): it must stay free of
 * imports, clocks and randomness.
 */

interface ErrorCodeEntry {
  /** The HTTP status the API answers with. */
  readonly status: number;
  /**
   * Statuses some call sites answer with instead, each for a reason of its own (named in `meaning`);
   * `'client_error'`: the 4xx that Express or its body parser chose.
   */
  readonly otherStatuses?: readonly number[] | 'client_error';
  /** One line: what happened. */
  readonly meaning: string;
  /**
   * How a script's run meets the code (none: only the API answers with it). docs/scripts.md ("Errors")
   * lists every code that has one, and only those (src/errors.test.ts).
   * - `operation`: an `svc` operation fails with it; the script gets an error with this `code` that it
   *   may catch (OperationError, RequestError, PaginationError), and the run fails with it if not;
   * - `realm`: the script's own realm raises it at a limit of the script's: the run fails with it even
   *   when what the script let through is not an operation's error;
   * - `run`: the run (or the API's answer to an action run) fails with it; the script never sees it.
   */
  readonly run?: 'operation' | 'realm' | 'run';
}

/**
 * Every code the service answers with, its HTTP status and what it means: the one list the API, the
 * OpenAPI document (`GET /openapi.json`, the Error schema) and docs/api.md ("Error codes") show.
 * Part of the public interface: add codes, never rename one.
 */
export const ERROR_CODES = {
  action_depth_exceeded: {
    status: 400,
    run: 'operation',
    meaning: 'svc.triggerAction nested actions deeper than allowed.',
  },
  action_failed: { status: 500, run: 'operation', meaning: 'An action run failed without a code of its own.' },
  action_not_found: { status: 404, run: 'operation', meaning: 'The integration has no deployed action of that name.' },
  action_script_failure: {
    status: 422,
    run: 'run',
    meaning: 'The action script threw ActionError; its payload is in the body.',
  },
  action_terminated: { status: 500, run: 'run', meaning: 'The action run was terminated before it finished.' },
  action_timeout: { status: 504, run: 'run', meaning: 'The action run did not finish in time.' },
  admin_key_not_configured: {
    status: 403,
    meaning: 'The route needs SERVICE_ADMIN_KEY, which this server does not set.',
  },
  admin_key_required: { status: 403, meaning: 'The route manages environments and needs the service admin key.' },
  async_actions_unsupported: { status: 400, meaning: 'X-Async: actions run synchronously here.' },
  base_url_not_allowed: {
    status: 403,
    run: 'operation',
    meaning: 'A base URL override names a host that is not the integration’s.',
  },
  batch_too_large: {
    status: 500,
    run: 'operation',
    meaning: 'svc.batchSave or svc.batchDelete got more records than one call takes (a run’s failure).',
  },
  checkpoint_not_advancing: {
    status: 500,
    run: 'run',
    meaning:
      'A run reached its execution’s limit without getting further: a checkpoint it had been at, or no record saved (a run’s failure).',
  },
  client_secret_required: {
    status: 400,
    meaning: 'The change sends the OAuth client secret to another endpoint and must give the secret again.',
  },
  connect_session_attempts: { status: 401, meaning: 'The connect link was refused too often and no longer works.' },
  connect_session_expired: { status: 401, meaning: 'The connect link expired.' },
  connect_session_used: { status: 401, meaning: 'The connect link was already used.' },
  connect_unavailable: { status: 501, meaning: 'This server has no connect flow configured.' },
  connection_credentials_rejected: { status: 400, meaning: 'The provider refused the credentials; nothing was saved.' },
  connection_exists: {
    status: 409,
    meaning: 'The connection exists and the connect session does not allow reconnecting.',
  },
  connection_refresh_failed: {
    status: 424,
    run: 'operation',
    meaning: 'The provider no longer accepts the connection’s grant.',
  },
  connection_refresh_unavailable: {
    status: 503,
    run: 'operation',
    meaning: 'The token could not be refreshed now; try again later.',
  },
  connection_secrets_bound: {
    status: 409,
    meaning: 'Connections hold secrets given for the token endpoint; the change would send them elsewhere.',
  },
  corrupt_credentials: { status: 500, run: 'operation', meaning: 'Stored credentials do not have a known shape.' },
  credentials_type_mismatch: {
    status: 400,
    run: 'operation',
    meaning: 'The credentials do not fit the provider’s authentication mode.',
  },
  database_unreachable: { status: 503, meaning: 'Postgres cannot be reached right now; retryable.' },
  decryption_failed: {
    status: 500,
    run: 'operation',
    meaning: 'A stored secret could not be decrypted with the configured keys.',
  },
  deploy_failed: {
    status: 500,
    meaning: 'Applying the deploy failed; it stays applying, and the next deploy re-applies every sync.',
  },
  deploy_in_progress: { status: 409, meaning: 'An earlier apply of the environment is still running.' },
  deploy_inconsistent: { status: 500, meaning: 'A deployment lacks a script its configuration declares.' },
  deploy_timeout: {
    status: 504,
    meaning: 'The deploy is recorded and still being applied; GET /deployments shows it active when done.',
  },
  deployment_not_found: { status: 404, meaning: 'The environment has no deployment of that version.' },
  destructive_change_not_confirmed: { status: 409, meaning: 'The deploy removes things and was not confirmed.' },
  environment_busy: {
    status: 500,
    run: 'run',
    meaning: 'The sync run could not begin: too many of its environment’s were running.',
  },
  environment_exists: { status: 409, meaning: 'An environment of that name exists.' },
  environment_not_empty: { status: 409, meaning: 'The environment still has connections or integrations.' },
  fixture_missing: {
    status: 500,
    run: 'operation',
    meaning: 'service test: the recorded fixture has no answer to a request of the run (a run’s failure).',
  },
  http_error: {
    status: 500,
    run: 'operation',
    meaning: 'A request failed without a code of its own (a run’s failure; in src/client, an answer not JSON).',
  },
  http_network_error: {
    status: 500,
    run: 'operation',
    meaning: 'A script’s request got no answer: reset, timeout, refused, DNS (a run’s failure).',
  },
  http_status_error: {
    status: 500,
    run: 'operation',
    meaning: 'A script’s request was answered 4xx or 5xx after its retries (a run’s failure).',
  },
  integration_exists: { status: 409, meaning: 'An integration with that unique key exists.' },
  integration_has_connections: { status: 409, meaning: 'The integration still has connections.' },
  integration_rename_unsupported: { status: 400, meaning: 'An integration keeps its id; create a new one instead.' },
  internal_error: { status: 500, meaning: 'The server failed; the failure is logged with the request id.' },
  invalid_admin_key: { status: 401, meaning: 'This is not the service admin key.' },
  invalid_argument: { status: 500, meaning: 'A command-line option has a value that cannot be read.' },
  invalid_authorization: { status: 401, meaning: 'The Authorization header is not `Bearer <key>`.' },
  invalid_checkpoint: {
    status: 500,
    run: 'operation',
    meaning: 'svc.saveCheckpoint was given no valid checkpoint (a run’s failure).',
  },
  invalid_config: {
    status: 422,
    otherStatuses: [400],
    meaning: 'service.yaml has errors, each listed (400 when read from a file, 422 in a deploy).',
  },
  invalid_connect_link: { status: 401, meaning: 'The connect link has no valid connect session token.' },
  invalid_connect_request: { status: 400, meaning: 'The connect form or request is malformed.' },
  invalid_connect_session: { status: 401, meaning: 'The link has no connect session.' },
  invalid_connection: { status: 400, meaning: 'The connection to import is malformed.' },
  invalid_connection_config: {
    status: 400,
    run: 'operation',
    meaning: 'A connection setting does not match its pattern, or is URL syntax where a URL uses it.',
  },
  invalid_connection_id: { status: 400, meaning: 'The connection id is malformed.' },
  invalid_cursor: { status: 400, meaning: 'The cursor is not one this service returned.' },
  invalid_dashboard_options: { status: 500, meaning: 'The dashboard was mounted with invalid options.' },
  invalid_deploy_request: {
    status: 400,
    otherStatuses: [422],
    meaning: 'The deploy request is malformed (400), or its scripts do not match service.yaml (422).',
  },
  invalid_encryption_key: { status: 500, meaning: 'An encryption key is not base64 of 32 bytes.' },
  invalid_environment_id: { status: 400, meaning: 'The environment id is malformed.' },
  invalid_environment_name: { status: 400, meaning: 'The environment name is malformed.' },
  invalid_environment_variable: { status: 400, meaning: 'An environment variable’s name or value is malformed.' },
  invalid_filter: { status: 400, meaning: 'filter takes added, updated and deleted only.' },
  invalid_frequency: { status: 400, meaning: 'The sync frequency cannot be read or is below the minimum.' },
  invalid_ids: { status: 400, meaning: 'Too many ids in one read.' },
  invalid_integration: { status: 400, meaning: 'The integration is malformed.' },
  invalid_json: { status: 400, meaning: 'The request body is not valid JSON.' },
  invalid_limit: { status: 400, meaning: 'limit is out of range.' },
  invalid_metadata: { status: 400, meaning: 'The connection metadata is malformed.' },
  invalid_modified_after: { status: 400, meaning: 'modified_after is not a date-time.' },
  invalid_oauth_callback: { status: 400, meaning: 'The OAuth callback lacks or mangles a parameter.' },
  invalid_oauth_state: { status: 400, meaning: 'The connect attempt is unknown or already completed.' },
  invalid_operation: {
    status: 500,
    run: 'operation',
    meaning: 'A run’s script called an operation it may not (a run’s failure).',
  },
  invalid_pagination: {
    status: 500,
    run: 'operation',
    meaning: 'svc.paginate cannot follow its configuration or the answers (a run’s failure).',
  },
  invalid_private_key: { status: 400, meaning: 'The private key of the credentials cannot be read.' },
  invalid_provider_catalog: { status: 500, meaning: 'The provider catalog (SERVICE_PROVIDERS_FILE) is invalid.' },
  invalid_provider_settings: { status: 400, meaning: 'The integration’s provider_settings are invalid.' },
  invalid_record: { status: 400, run: 'operation', meaning: 'A record does not fit its model.' },
  invalid_record_id: { status: 400, run: 'operation', meaning: 'A record id is missing or malformed.' },
  invalid_request: {
    status: 400,
    run: 'operation',
    otherStatuses: 'client_error',
    meaning: 'The request is malformed; every invalid field is in `errors` (another 4xx when Express chose it).',
  },
  invalid_request_url: { status: 400, run: 'operation', meaning: 'A URL in the request is not a URL.' },
  invalid_script: { status: 500, run: 'realm', meaning: 'The script bundle cannot be loaded (a run’s failure).' },
  invalid_secret_key: {
    status: 401,
    otherStatuses: [400],
    meaning: 'No environment has this secret key (401), or a new key does not have the shape of one (400).',
  },
  invalid_settings: { status: 500, meaning: 'The environment variables of the server are invalid.' },
  invalid_store_options: { status: 500, meaning: 'A store was created with invalid options.' },
  invalid_tags: { status: 400, meaning: 'The connection tags are malformed.' },
  invalid_temporal_tls: { status: 500, meaning: 'The Temporal TLS settings are invalid.' },
  invalid_webhook_signature: { status: 401, meaning: 'The webhook signature is missing or wrong.' },
  mcp_session_not_found: {
    status: 404,
    meaning: '/mcp: no open session of this connection has this Mcp-Session-Id; send initialize again.',
  },
  mcp_session_required: { status: 400, meaning: 'GET and DELETE /mcp act on a session: send Mcp-Session-Id.' },
  metadata_too_large: {
    status: 413,
    run: 'operation',
    meaning: 'The connection metadata would exceed its size limit.',
  },
  missing_authorization: { status: 401, meaning: 'The request has no Authorization header.' },
  missing_base_url: {
    status: 400,
    run: 'operation',
    meaning: 'The provider has no base URL and the integration sets none.',
  },
  missing_connect_field: { status: 400, meaning: 'The connect form lacks a required field.' },
  missing_connection_config: {
    status: 400,
    run: 'operation',
    meaning: 'The connection lacks a setting the provider needs.',
  },
  missing_connection_headers: { status: 400, meaning: 'The route needs Connection-Id and Provider-Config-Key.' },
  missing_encryption_key: { status: 500, meaning: 'No encryption key is configured.' },
  missing_oauth_client: {
    status: 400,
    run: 'operation',
    meaning: 'The integration has no OAuth client id.',
  },
  missing_provider_config_key: { status: 400, meaning: 'The request names no provider config key.' },
  missing_webhook_type: { status: 400, meaning: 'The webhook does not say its type.' },
  not_ready: { status: 503, meaning: 'GET /readyz: Postgres or Temporal does not answer.' },
  oauth_authorization_denied: { status: 400, meaning: 'The provider did not authorize the connection.' },
  oauth_state_expired: { status: 400, meaning: 'The connect attempt expired.' },
  oauth_token_exchange_failed: { status: 502, meaning: 'The provider did not exchange the code for a token.' },
  operation_failed: {
    status: 500,
    run: 'operation',
    meaning: 'An svc operation failed without a code of its own, after its retries (a run’s failure).',
  },
  outbound_request_refused: {
    status: 403,
    run: 'operation',
    meaning: 'The outbound policy refused the request’s address.',
  },
  payload_too_large: { status: 413, run: 'realm', meaning: 'The request body is larger than this server’s limit.' },
  proxy_response_too_large: {
    status: 502,
    meaning: 'The external API answered with more than the proxy passes on (32 MiB).',
  },
  proxy_upstream_unreachable: { status: 502, meaning: 'The external API could not be reached through the proxy.' },
  rate_limited: { status: 429, meaning: 'Too many requests for this key; Retry-After says when to retry.' },
  record_scope_contended: {
    status: 503,
    run: 'operation',
    meaning: 'The records of the connection and model are locked; retryable.',
  },
  record_too_large: { status: 500, run: 'realm', meaning: 'A record exceeds the size limit (a run’s failure).' },
  result_not_serializable: {
    status: 500,
    run: 'realm',
    meaning: 'The script returned a value that is not JSON (a run’s failure).',
  },
  route_not_found: { status: 404, meaning: 'No route has this method and path.' },
  run_failed: {
    status: 500,
    run: 'run',
    meaning: 'A sync run ended without a code of its own: cancelled or timed out (a run’s failure).',
  },
  run_history_limit: {
    status: 500,
    run: 'run',
    meaning: 'The run neared Temporal’s history limits (a run’s failure).',
  },
  run_max_executions: {
    status: 500,
    run: 'run',
    meaning:
      'A sync run spanned SYNC_RUN_MAX_EXECUTIONS executions and was stopped, its checkpoint kept (a run’s failure).',
  },
  run_superseded: {
    status: 409,
    run: 'operation',
    meaning: 'A newer run of the sync has begun; this one may no longer write.',
  },
  run_timeout: { status: 500, meaning: 'The run exceeded its maximum duration (a run’s failure).' },
  scope_denied: { status: 403, run: 'operation', meaning: 'The key may not reach this connection or integration.' },
  script_error: { status: 500, run: 'run', meaning: 'The script threw (a run’s failure).' },
  script_memory_limit: {
    status: 500,
    run: 'realm',
    meaning: 'The script exceeded its memory limit (a run’s failure).',
  },
  script_not_found: { status: 404, run: 'run', meaning: 'No script bundle with this hash was deployed.' },
  script_out_of_memory: {
    status: 500,
    run: 'run',
    meaning: 'The script’s worker ran out of memory (a run’s failure).',
  },
  script_runaway: { status: 500, run: 'run', meaning: 'The run was stopped as a runaway (a run’s failure).' },
  script_timeout: { status: 500, run: 'run', meaning: 'One activation of the script ran too long (a run’s failure).' },
  sync_busy: { status: 429, meaning: 'The sync takes no more signals until its run ends; Retry-After says when.' },
  sync_endpoint_removed: { status: 404, meaning: 'A deploy removed the sync behind this generated endpoint.' },
  sync_not_found: { status: 404, meaning: 'The sync is not running for this connection.' },
  sync_paused: {
    status: 500,
    run: 'run',
    meaning:
      'The sync was paused while its run spanned executions: the run stopped at its next continuation, its checkpoint kept (a run’s failure).',
  },
  temporal_unavailable: { status: 500, run: 'operation', meaning: 'Temporal did not answer a lookup.' },
  temporal_unreachable: { status: 500, meaning: 'Temporal cannot be reached at the configured address.' },
  too_many_runs: {
    status: 429,
    meaning: 'The environment has as many actions running as it may; Retry-After says when.',
  },
  too_many_timers: {
    status: 500,
    run: 'operation',
    meaning: 'The script had more setTimeout timers waiting than a run allows (a run’s failure).',
  },
  unknown_connection: { status: 404, run: 'operation', meaning: 'No such connection in this environment.' },
  unknown_environment: { status: 404, run: 'operation', meaning: 'No such environment.' },
  unknown_environment_variable: { status: 404, meaning: 'No such environment variable.' },
  unknown_integration: { status: 404, run: 'operation', meaning: 'No such integration in this environment.' },
  unknown_model: { status: 404, meaning: 'No deployed sync of the integration writes this model.' },
  unknown_provider: { status: 400, run: 'operation', meaning: 'The provider is not in the catalog.' },
  unknown_run: { status: 404, meaning: 'No such run in this environment.' },
  unknown_sync: { status: 404, meaning: 'The integration has no deployed sync of that name.' },
  unsupported_auth_mode: { status: 400, meaning: 'The provider’s authentication mode has no connect flow.' },
  webhook_expired: {
    status: 500,
    run: 'run',
    meaning: 'The queued webhook a run was to handle is gone (a run’s failure).',
  },
  webhook_queue_full: {
    status: 429,
    meaning: 'The sync’s or the environment’s webhook queue is full; Retry-After says when.',
  },
  webhook_replayed: { status: 409, meaning: 'This signed webhook was already received.' },
  webhook_signature_required: { status: 401, meaning: 'Unsigned webhooks are not accepted here.' },
  webhook_timestamp_out_of_tolerance: { status: 401, meaning: 'The webhook was signed too long ago.' },
  webhook_url_refused: { status: 400, meaning: 'The webhook URL is refused by the outbound policy.' },
} as const satisfies Record<string, ErrorCodeEntry>;

export type ErrorCode = keyof typeof ERROR_CODES;

type RunErrorCodeOf<Kind extends ErrorCodeEntry['run']> = {
  [C in ErrorCode]: (typeof ERROR_CODES)[C] extends { run: Kind } ? C : never;
}[ErrorCode];

/** A code a run can fail with: the type of a run's ApplicationFailure, the `code` of an OperationError. */
export type RunErrorCode = RunErrorCodeOf<'operation' | 'realm' | 'run'>;

/** A code the script's realm raises (workflows/realm/bootstrap.ts, workflows/scriptRealm.ts). */
export type RealmErrorCode = RunErrorCodeOf<'realm'>;

export const isRunErrorCode = (code: unknown): code is RunErrorCode =>
  typeof code === 'string' && Object.hasOwn(ERROR_CODES, code) && 'run' in ERROR_CODES[code as ErrorCode];

export const isRealmErrorCode = (code: unknown): code is RealmErrorCode =>
  isRunErrorCode(code) && (ERROR_CODES[code] as ErrorCodeEntry).run === 'realm';

/**
 * The code a run fails with for the type of a failure another boundary reported (an activity's
 * ApplicationFailure, a child run's): the type itself when it is a run's code, else `fallback`. An
 * activity that fails with anything but a ServiceError (a database error after its retries) has its
 * error's class name as its type: that is no code, and the run does not pass it on as one.
 */
export const runErrorCode = (type: unknown, fallback: RunErrorCode): RunErrorCode =>
  isRunErrorCode(type) ? type : fallback;

/** The statuses a code may be thrown with instead of its own (none for most). */
type OtherStatus<C extends ErrorCode> = C extends ErrorCode
  ? (typeof ERROR_CODES)[C] extends { otherStatuses: 'client_error' }
    ? number
    : (typeof ERROR_CODES)[C] extends { otherStatuses: readonly (infer S extends number)[] }
      ? S
      : never
  : never;

export interface ServiceErrorOptions<C extends ErrorCode> {
  /** Only where the code's entry lists other statuses; otherwise the status is the code's. */
  status?: OtherStatus<C>;
  details?: unknown;
  retryable?: boolean;
  /** When to try again, in seconds: the API answers it as `Retry-After` (with a 429 or a 503). */
  retryAfterSeconds?: number;
  cause?: unknown;
}

export class ServiceError<C extends ErrorCode = ErrorCode> extends Error {
  override readonly name: string = 'ServiceError';
  /** Stable, snake_case; part of the public interface (ERROR_CODES, or a relayed code: RelayedError). */
  readonly code: string;
  /** HTTP status the API answers with: the code's, from ERROR_CODES. */
  readonly status: number;
  /** Extra structured detail for the caller (validation problems, say); never secrets. */
  readonly details: unknown;
  /** False when trying again cannot help (bad input, missing configuration). */
  readonly retryable: boolean;
  /** Seconds after which trying again may succeed (`Retry-After`); undefined when not known. */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: C, message: string, options: ServiceErrorOptions<C> = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    const status: number | undefined = options.status;
    this.status = status ?? ERROR_CODES[code].status;
    this.details = options.details;
    this.retryable = options.retryable ?? false;
    this.retryAfterSeconds = options.retryAfterSeconds;
  }
}

/**
 * A failure whose code and status another boundary chose, passed on as they are: the type of an
 * action run's ApplicationFailure (a code of the run, or one its activities translated), the answer of
 * the service's API to a local run. Its code need not be in ERROR_CODES.
 */
export class RelayedError extends ServiceError {
  override readonly code: string;
  override readonly status: number;

  constructor(
    code: string,
    message: string,
    options: { status: number; details?: unknown; retryable?: boolean; cause?: unknown },
  ) {
    super('internal_error', message, {
      details: options.details,
      ...(options.retryable === undefined ? {} : { retryable: options.retryable }),
      cause: options.cause,
    });
    this.code = code;
    this.status = options.status;
  }
}

export const isServiceError = (error: unknown): error is ServiceError => error instanceof ServiceError;
