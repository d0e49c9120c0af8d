/* global document, window, history */
/**
 * The dashboard shell: sign-in, navigation between pages (hash routes such as `#/records?…`, so the
 * server needs no route per page and every view has a link), focus management and sign-out.
 */
import {
  api,
  ApiError,
  clearSecretKey,
  dashboardPath,
  isAdmin,
  secretKey,
  setSecretKey,
  whenUnauthorized,
} from './api.js';
/** @import { Environment } from './api.js' */
import { announce, byId, errorBox, h, messageOf, replace } from './dom.js';
import { renderConnections } from './pages/connections.js';
import { renderEnvironments } from './pages/environments.js';
import { renderIntegrations } from './pages/integrations.js';
import { renderLogs } from './pages/logs.js';
import { renderRecords } from './pages/records.js';
import { renderSettings } from './pages/settings.js';

/**
 * What a page gets to move around: `navigate` adds a history entry, `replaceQuery` rewrites the query.
 * @typedef {{ navigate: typeof navigate, replaceQuery: typeof replaceQuery }} App
 */

/**
 * A page: draws into `view`; may answer a function that stops its timers when the user leaves.
 * @typedef {(view: HTMLElement, params: string[], query: URLSearchParams, app: App) =>
 *   Promise<void | undefined | (() => void)>} Page
 */

/** @type {Record<string, Page>} */
const pages = {
  integrations: renderIntegrations,
  connections: renderConnections,
  records: renderRecords,
  logs: renderLogs,
  settings: renderSettings,
};

/** Signed in with the service admin key, only this page: it manages environments and shows none's data. */
/** @type {Record<string, Page>} */
const adminPages = { environments: renderEnvironments };

/** @type {Record<string, string>} */
const TITLES = {
  integrations: 'Integrations',
  connections: 'Connections',
  records: 'Records',
  logs: 'Logs',
  settings: 'Environment settings',
  environments: 'Environments',
};

/** @type {() => void} */
let cleanup = () => undefined;

/**
 * `#/connections/a/b?x=1` → { page: 'connections', params: ['a', 'b'], query: URLSearchParams }.
 * @param {string} [hash]
 */
export function parseHash(hash = window.location.hash) {
  const raw = hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = raw.split('?');
  const [page = 'integrations', ...params] = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { page, params, query: new URLSearchParams(search) };
}

/**
 * The query of a route: empty values are left out.
 * @typedef {Record<string, string | null | undefined>} Query
 */

/**
 * The hash of a route: `#/page/param?query`, empty query values left out.
 * @param {string} page
 * @param {string[]} params
 * @param {Query} query
 */
function hashOf(page, params, query) {
  /** @type {[string, string][]} */
  const kept = [];
  for (const [name, value] of Object.entries(query))
    if (value !== undefined && value !== null && value !== '') kept.push([name, value]);
  const search = new URLSearchParams(kept).toString();
  return `#/${[page, ...params].map(encodeURIComponent).join('/')}${search ? `?${search}` : ''}`;
}

/**
 * Navigates to a route (adds a history entry, like a link).
 * @param {string} page
 * @param {string[]} [params]
 * @param {Query} [query]
 */
export function navigate(page, params = [], query = {}) {
  const hash = hashOf(page, params, query);
  if (window.location.hash === hash) void show();
  else window.location.hash = hash;
}

/**
 * Replaces the current route's query without a new history entry (filters typed into a form).
 * @param {string} page
 * @param {string[]} params
 * @param {Query} query
 */
export function replaceQuery(page, params, query) {
  history.replaceState(null, '', hashOf(page, params, query));
}

const signInSection = () => byId('sign-in', HTMLElement);
const pageContainer = () => byId('page', HTMLDivElement);

function showSignIn(message = '') {
  cleanup();
  cleanup = () => undefined;
  byId('nav', HTMLElement).hidden = true;
  byId('session', HTMLDivElement).hidden = true;
  pageContainer().hidden = true;
  replace(pageContainer());
  signInSection().hidden = false;
  byId('sign-in-error', HTMLParagraphElement).textContent = message;
  document.title = 'Sign in · Integration service';
  byId('secret-key', HTMLInputElement).focus();
}

/** @param {string} key */
async function signIn(key) {
  // Any keyed route tells whether the key is valid; this one is small.
  let refused;
  try {
    await api('/environment-variables', { key });
    setSecretKey(key, { admin: false });
    return;
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 401) throw error;
    refused = error;
  }
  // Not an environment's key: the service admin key, perhaps, which opens the Environments page only.
  try {
    await api('/environments', { key });
  } catch (error) {
    // Neither: the environment route's answer says so best.
    if (error instanceof ApiError && (error.status === 401 || error.code === 'admin_key_not_configured')) throw refused;
    throw error;
  }
  setSecretKey(key, { admin: true });
}

function signOut(message = '') {
  clearSecretKey();
  history.replaceState(null, '', '#/integrations');
  showSignIn(message);
  announce(message || 'Signed out.');
}

async function showEnvironmentName() {
  const label = byId('environment-name', HTMLSpanElement);
  if (isAdmin()) {
    label.textContent = 'Service admin';
    return;
  }
  try {
    const environment = /** @type {Environment} */ (await api(dashboardPath('environment')));
    label.textContent = `Environment: ${environment.name}`;
  } catch {
    label.textContent = '';
  }
}

async function show() {
  if (!secretKey()) {
    showSignIn();
    return;
  }
  signInSection().hidden = true;
  byId('nav', HTMLElement).hidden = false;
  byId('session', HTMLDivElement).hidden = false;
  const container = pageContainer();
  container.hidden = false;

  const route = parseHash();
  const available = isAdmin() ? adminPages : pages;
  const fallback = isAdmin() ? 'environments' : 'integrations';
  const page = available[route.page] ? route.page : fallback;
  const render = available[page];
  for (const link of document.querySelectorAll('#nav a')) {
    const name = link instanceof HTMLElement ? link.dataset['page'] : undefined;
    if (link.parentElement) link.parentElement.hidden = !(name && available[name]);
    if (name === page) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${TITLES[page] ?? page} · Integration service`;

  cleanup();
  cleanup = () => undefined;
  const view = h('div', { class: 'view', dataset: { page } });
  replace(container, view);
  try {
    if (!render) throw new Error(`No page ${page}.`);
    const stop = await render(view, route.params, route.query, { navigate, replaceQuery });
    if (typeof stop === 'function') cleanup = stop;
  } catch (error) {
    view.append(errorBox(error));
  }
  // Land keyboard and screen-reader users on the new page's heading.
  const title = view.querySelector('h1');
  if (title && document.activeElement?.closest('#page') == null) title.focus({ preventScroll: false });
}

function start() {
  whenUnauthorized(() => signOut('The secret key is no longer valid. Sign in again.'));
  byId('sign-in-form', HTMLFormElement).addEventListener('submit', (event) => {
    event.preventDefault();
    const input = byId('secret-key', HTMLInputElement);
    const key = input.value.trim();
    const error = byId('sign-in-error', HTMLParagraphElement);
    if (!key) {
      error.textContent = 'Paste the environment secret key (or the service admin key).';
      input.setAttribute('aria-invalid', 'true');
      input.focus();
      return;
    }
    error.textContent = '';
    signIn(key)
      .then(() => {
        input.value = '';
        input.removeAttribute('aria-invalid');
        announce('Signed in.');
        void showEnvironmentName();
        const home = isAdmin() ? '#/environments' : '#/integrations';
        if (!window.location.hash || window.location.hash === '#') window.location.hash = home;
        else void show();
      })
      .catch((/** @type {unknown} */ failure) => {
        error.textContent = messageOf(failure);
        input.setAttribute('aria-invalid', 'true');
        input.focus();
      });
  });
  byId('sign-out', HTMLButtonElement).addEventListener('click', () => signOut());
  // The skip link moves focus without touching the hash, which holds the route.
  document.querySelector('.skip-link')?.addEventListener('click', (event) => {
    event.preventDefault();
    const target = document.querySelector('#page:not([hidden]) h1') ?? document.getElementById('main');
    if (target instanceof HTMLElement) target.focus();
  });
  window.addEventListener('hashchange', () => void show());
  if (secretKey()) void showEnvironmentName();
  void show();
}

start();
