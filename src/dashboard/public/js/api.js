/* global document, window, sessionStorage, fetch */
/**
 * The REST API, called from the browser with the environment secret key as a Bearer token. The key
 * lives in sessionStorage: this tab only, gone when the tab closes or the user signs out
 * (docs/dashboard.md explains the choice).
 */

/** @import { ServiceConfig } from '../../../config/types.js' */

/**
 * The answers of the API routes the pages read. `Api.*` are the types src/client derives from the routes'
 * schemas, written out for the browser by scripts/dashboardApiTypes.ts (src/dashboard/types/api.d.ts),
 * so a route whose answer changes under a page fails the type check; `api()` answers `unknown`, and
 * each call site says which of these it received.
 * @typedef {{ code: string, message: string }} ErrorBody
 * @typedef {Api.Integration} Integration
 * @typedef {Api.ConnectionSummary} ConnectionSummary
 * @typedef {Api.ConnectionRecord} ConnectionRecord
 * @typedef {'applying' | 'active' | 'superseded'} DeploymentStatus
 * @typedef {{ version: number, status: DeploymentStatus, createdAt: string, activatedAt: string | null }} DeploymentSummary
 * @typedef {{
 *   integration: string, kind: 'sync' | 'action', name: string, hash: string, sourcePath: string,
 *   source: string | null,
 * }} DeployedScript
 * @typedef {DeploymentSummary & { config: ServiceConfig, scripts: DeployedScript[] }} Deployment
 * @typedef {Api.SyncRun['models'][string]} WriteSummary
 * @typedef {Api.EnvironmentVariable} EnvironmentVariable
 * @typedef {Api.EnvironmentView} Environment
 * @typedef {{ temporal_ui_url?: string | null, temporal_namespace?: string, features?: { keys?: boolean } }} DashboardConfig
 */

const KEY = 'integration-service.secret-key';
// Set when the key is the service admin key: the dashboard then shows the Environments page only.
const ADMIN = 'integration-service.admin';

export class ApiError extends Error {
  /**
   * @param {number} status the HTTP status, 0 when the service could not be reached
   * @param {string} code the API's error code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

export function secretKey() {
  return sessionStorage.getItem(KEY);
}

/**
 * @param {string} value
 * @param {{ admin?: boolean }} [options] `admin`: the service admin key (default: as before)
 */
export function setSecretKey(value, { admin = isAdmin() } = {}) {
  sessionStorage.setItem(KEY, value);
  if (admin) sessionStorage.setItem(ADMIN, '1');
  else sessionStorage.removeItem(ADMIN);
}

export function clearSecretKey() {
  sessionStorage.removeItem(KEY);
  sessionStorage.removeItem(ADMIN);
}

/** Signed in with the service admin key (not an environment's key). */
export function isAdmin() {
  return sessionStorage.getItem(ADMIN) === '1';
}

/** @type {(error: ApiError) => void} */
let onUnauthorized = () => undefined;
/**
 * Called when the API refuses the key (rotated, or wrong): the app signs out.
 * @param {(error: ApiError) => void} handler
 */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/**
 * @typedef {{
 *   method?: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
 *   query?: Record<string, string | number | null | undefined>,
 *   body?: unknown,
 *   headers?: Record<string, string>,
 *   key?: string | null,
 * }} ApiOptions
 */

/**
 * Calls the API. `path` is absolute (`/records`); `query` values that are undefined or empty are left
 * out. Resolves with the JSON body (the caller says which shape it expects); rejects with ApiError
 * carrying the API's code and message.
 * @param {string} path
 * @param {ApiOptions} [options]
 * @returns {Promise<unknown>}
 */
export async function api(path, { method = 'GET', query, body, headers = {}, key = secretKey() } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null || value === '') continue;
    url.searchParams.set(name, String(value));
  }
  /** @type {Record<string, string>} */
  const sent = { Accept: 'application/json', ...headers };
  /** @type {RequestInit} */
  const init = { method, headers: sent, cache: 'no-store' };
  if (key) sent['Authorization'] = `Bearer ${key}`;
  if (body !== undefined) {
    sent['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new ApiError(0, 'network_error', 'The service cannot be reached. Check that it is running.');
  }
  const text = await response.text();
  /** @type {unknown} */
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    const failure = /** @type {{ error?: Partial<ErrorBody> } | undefined} */ (json);
    const code = failure?.error?.code ?? 'http_error';
    const message = failure?.error?.message ?? `The service answered ${response.status} to ${method} ${url.pathname}.`;
    const error = new ApiError(response.status, code, message);
    if (response.status === 401 && key && key === secretKey()) onUnauthorized(error);
    throw error;
  }
  return json;
}

/**
 * Headers of the connection-scoped routes.
 * @param {string} integration
 * @param {string} connection
 */
export function connectionHeaders(integration, connection) {
  return { 'Provider-Config-Key': integration, 'Connection-Id': connection };
}

/** @type {Promise<DashboardConfig> | undefined} */
let configPromise;
/**
 * The dashboard's own settings (Temporal Web UI link), from ../config.json relative to the page.
 * @returns {Promise<DashboardConfig>}
 */
export function dashboardConfig() {
  configPromise ??= fetch(new URL('config.json', document.baseURI), { cache: 'no-store' })
    .then((response) => (response.ok ? /** @type {Promise<DashboardConfig>} */ (response.json()) : {}))
    .catch(() => ({}));
  return configPromise;
}

/**
 * The Temporal Web UI page of a run, or null when the dashboard has no UI URL configured.
 * @param {DashboardConfig | null | undefined} config
 * @param {string | null | undefined} runId
 */
export function temporalRunUrl(config, runId) {
  if (!config?.temporal_ui_url || !runId) return null;
  return `${config.temporal_ui_url}/namespaces/${encodeURIComponent(config.temporal_namespace ?? 'default')}/workflows/${encodeURIComponent(runId)}`;
}

/**
 * The dashboard's own routes sit beside the page (`/dashboard/...`), the API at the origin's root.
 * @param {string} name
 */
export function dashboardPath(name) {
  return new URL(name, document.baseURI).pathname;
}

/** @returns {Promise<DeploymentSummary[]>} every deployed version */
export async function deployments() {
  const answer = /** @type {{ deployments: DeploymentSummary[] }} */ (await api('/deployments'));
  return answer.deployments;
}

/**
 * One deployed version with its config and scripts.
 * @param {number} version
 */
export async function deployment(version) {
  return /** @type {Deployment} */ (await api(`/deployments/${version}`));
}

/** The active deployment with its config and scripts, or null when nothing is deployed. */
export async function activeDeployment() {
  const active = (await deployments()).find((summary) => summary.status === 'active');
  if (!active) return null;
  return deployment(active.version);
}
