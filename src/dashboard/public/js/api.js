/* global document, window, sessionStorage, fetch */
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument --
   Browser code in plain JavaScript, served as written (no build step): API values carry no static types here. */
/**
 * The REST API, called from the browser with the environment secret key as a Bearer token. The key
 * lives in sessionStorage: this tab only, gone when the tab closes or the user signs out
 * (docs/dashboard.md explains the choice).
 */

const KEY = 'integration-service.secret-key';
// Set when the key is the service admin key: the dashboard then shows the Environments page only.
const ADMIN = 'integration-service.admin';

export class ApiError extends Error {
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

let onUnauthorized = () => undefined;
/** Called when the API refuses the key (rotated, or wrong): the app signs out. */
export function whenUnauthorized(handler) {
  onUnauthorized = handler;
}

/**
 * Calls the API. `path` is absolute (`/records`); `query` values that are undefined or empty are left
 * out. Resolves with the JSON body; rejects with ApiError carrying the API's code and message.
 */
export async function api(path, { method = 'GET', query, body, headers = {}, key = secretKey() } = {}) {
  const url = new URL(path, window.location.origin);
  for (const [name, value] of Object.entries(query ?? {})) {
    if (value === undefined || value === null || value === '') continue;
    url.searchParams.set(name, String(value));
  }
  const init = { method, headers: { Accept: 'application/json', ...headers }, cache: 'no-store' };
  if (key) init.headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url, init);
  } catch {
    throw new ApiError(0, 'network_error', 'The service cannot be reached. Check that it is running.');
  }
  const text = await response.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  if (!response.ok) {
    const code = json?.error?.code ?? 'http_error';
    const message = json?.error?.message ?? `The service answered ${response.status} to ${method} ${url.pathname}.`;
    const error = new ApiError(response.status, code, message);
    if (response.status === 401 && key && key === secretKey()) onUnauthorized(error);
    throw error;
  }
  return json;
}

/** Headers of the connection-scoped routes. */
export function connectionHeaders(integration, connection) {
  return { 'Provider-Config-Key': integration, 'Connection-Id': connection };
}

let configPromise;
/** The dashboard's own settings (Temporal Web UI link), from ../config.json relative to the page. */
export function dashboardConfig() {
  configPromise ??= fetch(new URL('config.json', document.baseURI), { cache: 'no-store' })
    .then((response) => (response.ok ? response.json() : {}))
    .catch(() => ({}));
  return configPromise;
}

/** The dashboard's own routes sit beside the page (`/dashboard/...`), the API at the origin's root. */
export function dashboardPath(name) {
  return new URL(name, document.baseURI).pathname;
}

/** The active deployment with its config and scripts, or null when nothing is deployed. */
export async function activeDeployment() {
  const { deployments } = await api('/deployments');
  const active = deployments.find((deployment) => deployment.status === 'active');
  if (!active) return null;
  return api(`/deployments/${active.version}`);
}
