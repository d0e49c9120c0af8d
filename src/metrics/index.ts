/**
 * The service's Prometheus metrics. Each process (API server, worker) counts what happens in it and
 * serves its own counts (src/metrics/server.ts); docs/operations.md "Metrics" lists them and what to
 * alert on.
 *
 * Labels are names from service.yaml (integration, sync, action, model) and small fixed sets (status,
 * outcome): never connection ids, run ids or anything else an end user or a script chooses, so the
 * number of series is bounded by the deployed configuration.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';

/** The registry of this process; one per process, as the processes are scraped one by one. */
export const metricsRegistry = new Registry();

let defaultsCollected = false;

/** Adds Node's process metrics (CPU, memory, event loop lag) to the registry; once per process. */
export function collectProcessMetrics(): void {
  if (defaultsCollected) return;
  defaultsCollected = true;
  collectDefaultMetrics({ register: metricsRegistry });
}

const registers = [metricsRegistry];

/** The API's requests, by route template (never the raw path), method and status; `_count` counts them. */
export const httpRequestDuration = new Histogram({
  name: 'service_http_request_duration_seconds',
  help: 'API requests by route template, method and status, with their latency',
  labelNames: ['method', 'route', 'status'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
  registers,
});

export const syncRunsStarted = new Counter({
  name: 'service_sync_runs_started_total',
  help: 'Sync runs started (one per execution that took its fencing token), per integration and sync',
  labelNames: ['integration', 'sync'] as const,
  registers,
});

export const syncRunsFinished = new Counter({
  name: 'service_sync_runs_finished_total',
  help: 'Sync runs finished, per integration, sync and status (success or failed)',
  labelNames: ['integration', 'sync', 'status'] as const,
  registers,
});

export const syncRunDuration = new Histogram({
  name: 'service_sync_run_duration_seconds',
  help: 'How long sync runs took from start to end, per integration, sync and status',
  labelNames: ['integration', 'sync', 'status'] as const,
  buckets: [0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21_600],
  registers,
});

export const syncRecords = new Counter({
  name: 'service_sync_records_total',
  help: 'Records written by successful sync runs, per integration, sync, model and action (added, updated, deleted)',
  labelNames: ['integration', 'sync', 'model', 'action'] as const,
  registers,
});

export const actionDuration = new Histogram({
  name: 'service_action_duration_seconds',
  help: 'Actions as their callers saw them, per integration, action and outcome (success, action_error, failed)',
  labelNames: ['integration', 'action', 'outcome'] as const,
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
  registers,
});

export const webhookDeliveries = new Counter({
  name: 'service_webhook_deliveries_total',
  help: 'Outbound webhook deliveries that ended, by outcome (delivered, or failed after every attempt)',
  labelNames: ['outcome'] as const,
  registers,
});

export const webhookAttempts = new Counter({
  name: 'service_webhook_delivery_attempts_total',
  help: 'Outbound webhook attempts, by result (ok: the application answered 2xx; error: anything else)',
  labelNames: ['result'] as const,
  registers,
});

export const tokenRefreshFailures = new Counter({
  name: 'service_token_refresh_failures_total',
  help: 'Failed access-token refreshes, per integration, error code and whether the user must reconnect',
  labelNames: ['integration', 'code', 'permanent'] as const,
  registers,
});

export const retentionDeletedRows = new Counter({
  name: 'service_retention_deleted_rows_total',
  help: 'Rows the retention job deleted, per table',
  labelNames: ['table'] as const,
  registers,
});

export const retentionLastSuccess = new Gauge({
  name: 'service_retention_last_success_timestamp_seconds',
  help: 'When the retention job of this process last finished a round without error (Unix time)',
  registers,
});

export const mcpSessionsOpen = new Gauge({
  name: 'service_mcp_sessions',
  help: 'MCP sessions (POST /mcp) open in this API process, all environments together',
  registers,
});

export const mcpSessionsClosed = new Counter({
  name: 'service_mcp_sessions_closed_total',
  help: 'MCP sessions this process closed itself, by reason (limit: the environment opened more than its limit; idle; shutdown)',
  labelNames: ['reason'] as const,
  registers,
});

// The codes a failed token request can carry as a label: OAuth 2's (RFC 6749 5.2, OpenID Connect, RFC
// 8628) and the service's own (src/connections). Anything else a token endpoint answers is `other`.
const KNOWN_TOKEN_CODES = new Set([
  'invalid_request',
  'invalid_client',
  'invalid_grant',
  'unauthorized_client',
  'unsupported_grant_type',
  'invalid_scope',
  'access_denied',
  'server_error',
  'temporarily_unavailable',
  'invalid_token',
  'expired_token',
  'interaction_required',
  'login_required',
  'consent_required',
  'slow_down',
  'no_refresh_token',
  'credentials_type_mismatch',
  'invalid_token_response',
  'unsupported_auth_mode',
  'invalid_private_key',
  'token_endpoint_unreachable',
]);

/**
 * A label value from outside the configuration (a provider's OAuth error code): one of the known codes
 * or `http_<status>`, `other` otherwise, so a token endpoint that answers a new code each time cannot
 * grow the number of series without bound.
 */
export function codeLabel(code: string): string {
  return KNOWN_TOKEN_CODES.has(code) || /^http_[1-5]\d\d$/.test(code) ? code : 'other';
}
