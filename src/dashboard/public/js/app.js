/* global document, window, history */
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-argument --
   Browser code in plain JavaScript, served as written (no build step): API values carry no static types here. */
/**
 * The dashboard shell: sign-in, navigation between pages (hash routes such as `#/records?…`, so the
 * server needs no route per page and every view has a link), focus management and sign-out.
 */
import { api, ApiError, clearSecretKey, isAdmin, secretKey, setSecretKey, whenUnauthorized } from './api.js';
import { announce, errorBox, h, replace } from './dom.js';
import { renderConnections } from './pages/connections.js';
import { renderEnvironments } from './pages/environments.js';
import { renderIntegrations } from './pages/integrations.js';
import { renderLogs } from './pages/logs.js';
import { renderRecords } from './pages/records.js';
import { renderSettings } from './pages/settings.js';

const pages = {
  integrations: renderIntegrations,
  connections: renderConnections,
  records: renderRecords,
  logs: renderLogs,
  settings: renderSettings,
};

/** Signed in with the service admin key, only this page: it manages environments and shows none's data. */
const adminPages = { environments: renderEnvironments };

const TITLES = {
  integrations: 'Integrations',
  connections: 'Connections',
  records: 'Records',
  logs: 'Logs',
  settings: 'Environment settings',
  environments: 'Environments',
};

let cleanup = () => undefined;

/** `#/connections/a/b?x=1` → { page: 'connections', params: ['a', 'b'], query: URLSearchParams }. */
export function parseHash(hash = window.location.hash) {
  const raw = hash.replace(/^#\/?/, '');
  const [path = '', search = ''] = raw.split('?');
  const [page = 'integrations', ...params] = path.split('/').filter(Boolean).map(decodeURIComponent);
  return { page, params, query: new URLSearchParams(search) };
}

/** The hash of a route: `#/page/param?query`, empty query values left out. */
function hashOf(page, params, query) {
  const search = new URLSearchParams(
    Object.entries(query).filter(([, value]) => value !== undefined && value !== null && value !== ''),
  ).toString();
  return `#/${[page, ...params].map(encodeURIComponent).join('/')}${search ? `?${search}` : ''}`;
}

/** Navigates to a route (adds a history entry, like a link). */
export function navigate(page, params = [], query = {}) {
  const hash = hashOf(page, params, query);
  if (window.location.hash === hash) void show();
  else window.location.hash = hash;
}

/** Replaces the current route's query without a new history entry (filters typed into a form). */
export function replaceQuery(page, params, query) {
  history.replaceState(null, '', hashOf(page, params, query));
}

const signInSection = () => document.getElementById('sign-in');
const pageContainer = () => document.getElementById('page');

function showSignIn(message = '') {
  cleanup();
  cleanup = () => undefined;
  document.getElementById('nav').hidden = true;
  document.getElementById('session').hidden = true;
  pageContainer().hidden = true;
  replace(pageContainer());
  signInSection().hidden = false;
  document.getElementById('sign-in-error').textContent = message;
  document.title = 'Sign in · Integration service';
  document.getElementById('secret-key').focus();
}

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
  const label = document.getElementById('environment-name');
  if (isAdmin()) {
    label.textContent = 'Service admin';
    return;
  }
  try {
    const environment = await api(new URL('environment', document.baseURI).pathname);
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
  document.getElementById('nav').hidden = false;
  document.getElementById('session').hidden = false;
  const container = pageContainer();
  container.hidden = false;

  const route = parseHash();
  const available = isAdmin() ? adminPages : pages;
  const fallback = isAdmin() ? 'environments' : 'integrations';
  const page = available[route.page] ? route.page : fallback;
  const render = available[page];
  for (const link of document.querySelectorAll('#nav a')) {
    link.parentElement.hidden = !available[link.dataset.page];
    if (link.dataset.page === page) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
  document.title = `${TITLES[page]} · Integration service`;

  cleanup();
  cleanup = () => undefined;
  const view = h('div', { class: 'view', dataset: { page } });
  replace(container, view);
  try {
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
  document.getElementById('sign-in-form').addEventListener('submit', (event) => {
    event.preventDefault();
    const input = document.getElementById('secret-key');
    const key = input.value.trim();
    const error = document.getElementById('sign-in-error');
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
      .catch((failure) => {
        error.textContent = failure.message;
        input.setAttribute('aria-invalid', 'true');
        input.focus();
      });
  });
  document.getElementById('sign-out').addEventListener('click', () => signOut());
  // The skip link moves focus without touching the hash, which holds the route.
  document.querySelector('.skip-link').addEventListener('click', (event) => {
    event.preventDefault();
    const target = document.querySelector('#page:not([hidden]) h1') ?? document.getElementById('main');
    target.focus();
  });
  window.addEventListener('hashchange', () => void show());
  if (secretKey()) void showEnvironmentName();
  void show();
}

start();
