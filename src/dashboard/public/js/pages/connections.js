/* global setTimeout, clearTimeout */
/**
 * Connections per integration; per connection its settings and metadata (never its credentials), its
 * syncs with their status, last result and next run, the controls (trigger, pause, resume, full
 * resync) and a chart of recent runs.
 */
import { api, ApiError, dashboardConfig } from '../api.js';
import { runsChart } from '../chart.js';
import { connectSection } from './connect.js';
import { announce, errorBox, field, h, messageOf, pageTitle, replace, select, time } from '../dom.js';

/** @import { ConnectionRecord, ConnectionSummary, ErrorBody, Integration, WriteSummary } from '../api.js' */
/** @import { App } from '../app.js' */
/** @import { Run } from '../chart.js' */

/**
 * GET /sync/status (src/api/routes/syncs/getSyncStatus.ts).
 * @typedef {Api.SyncStatus} SyncStatus
 */

const POLL_MS = 2000;

/**
 * @param {HTMLElement} view
 * @param {string[]} params
 * @param {URLSearchParams} _query
 * @param {App} app
 */
export async function renderConnections(view, params, _query, app) {
  const [integrationParam, connectionId] = params;
  const { data: integrations } = /** @type {{ data: Integration[] }} */ (await api('/integrations'));
  if (integrationParam && connectionId) return renderConnection(view, integrationParam, connectionId);

  view.append(pageTitle('Connections'));
  const first = integrations[0];
  if (!first) {
    view.append(h('p', { class: 'empty' }, 'No integrations yet.'));
    return;
  }
  const integration = integrationParam ?? first.unique_key;
  const picker = select(
    { id: 'connections-integration' },
    integrations.map((i) => [i.unique_key, i.unique_key]),
    integration,
  );
  picker.addEventListener('change', () => app.navigate('connections', [picker.value]));
  view.append(h('div', { class: 'toolbar' }, field('Integration', picker)));

  const { connections } = /** @type {{ connections: ConnectionSummary[] }} */ (
    await api('/connections', { query: { provider_config_key: integration } })
  );
  const creating = await connectSection(integration, (connectionId) =>
    app.navigate('connections', [integration, connectionId]),
  );
  if (connections.length === 0) {
    view.append(h('p', { class: 'empty' }, `No connections of ${integration} yet.`), creating);
    return;
  }
  view.append(
    h(
      'table',
      { class: 'list' },
      h('caption', { class: 'visually-hidden' }, `Connections of ${integration}`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Connection', 'Auth', 'Created', 'Updated', 'Token refresh'].map((c) => h('th', { scope: 'col' }, c)),
        ),
      ),
      h(
        'tbody',
        {},
        connections.map((c) =>
          h(
            'tr',
            {},
            h(
              'th',
              { scope: 'row' },
              h(
                'a',
                { href: `#/connections/${encodeURIComponent(integration)}/${encodeURIComponent(c.connection_id)}` },
                c.connection_id,
              ),
            ),
            h('td', {}, c.auth_mode),
            h('td', {}, time(c.created_at)),
            h('td', {}, time(c.updated_at)),
            h(
              'td',
              {},
              c.needs_reauth
                ? h('span', { class: 'status status-failed' }, `Needs re-auth: ${c.refresh_error?.message ?? ''}`)
                : c.refresh_error
                  ? h('span', { class: 'status status-failed' }, `Refresh failed: ${c.refresh_error.message}`)
                  : 'ok',
            ),
          ),
        ),
      ),
    ),
  );
  view.append(creating);
}

/**
 * The connection's record; when its token cannot be refreshed (the route answers 424 or 503), its
 * summary from the list instead, which carries no credentials and no settings but says why.
 */
/**
 * @typedef {Pick<ConnectionSummary, 'connection_id' | 'created_at' | 'updated_at' | 'refresh_error' | 'needs_reauth' | 'metadata'>
 *   & Pick<ConnectionRecord, 'connection_config'>} ConnectionView
 * @param {string} integration
 * @param {string} connectionId
 * @returns {Promise<ConnectionView>}
 */
async function connectionOrSummary(integration, connectionId) {
  try {
    return /** @type {ConnectionRecord} */ (
      await api(`/connections/${encodeURIComponent(connectionId)}`, {
        query: { provider_config_key: integration },
      })
    );
  } catch (error) {
    if (!(error instanceof ApiError) || !error.code.startsWith('connection_refresh_')) throw error;
    const { connections } = /** @type {{ connections: ConnectionSummary[] }} */ (
      await api('/connections', { query: { provider_config_key: integration, connectionId } })
    );
    const summary = connections.find((c) => c.connection_id === connectionId);
    if (!summary) throw error;
    return { ...summary, connection_config: {} };
  }
}

/**
 * @param {HTMLElement} view
 * @param {string} integration
 * @param {string} connectionId
 */
async function renderConnection(view, integration, connectionId) {
  view.append(
    h(
      'nav',
      { 'aria-label': 'Breadcrumb', class: 'breadcrumb' },
      h(
        'ol',
        {},
        h('li', {}, h('a', { href: '#/connections' }, 'Connections')),
        h('li', {}, h('a', { href: `#/connections/${encodeURIComponent(integration)}` }, integration)),
        h('li', { 'aria-current': 'page' }, connectionId),
      ),
    ),
    pageTitle(`Connection ${connectionId}`),
  );
  // The route answers the credentials too; they are dropped here and never rendered.
  const record = await connectionOrSummary(integration, connectionId);
  const { connection_config: settings, metadata } = record;
  if (record.needs_reauth) {
    view.append(
      h(
        'p',
        { class: 'notice error', role: 'alert', dataset: { needsReauth: 'true' } },
        `Needs re-auth: the provider refused this connection’s token refresh (${record.refresh_error?.message ?? 'no detail'}) at `,
        time(record.refresh_error?.at),
        '. Its syncs and actions fail until the user connects again.',
      ),
    );
  }

  view.append(
    h(
      'div',
      { class: 'columns' },
      h(
        'section',
        { 'aria-labelledby': 'settings-title' },
        h('h2', { id: 'settings-title' }, 'Settings'),
        Object.keys(settings ?? {}).length === 0
          ? h('p', { class: 'empty' }, 'No connection settings.')
          : h(
              'dl',
              { class: 'facts' },
              Object.entries(settings).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
            ),
        h(
          'dl',
          { class: 'facts' },
          h('dt', {}, 'Integration'),
          h('dd', {}, integration),
          h('dt', {}, 'Created'),
          h('dd', {}, time(record.created_at)),
          h('dt', {}, 'Updated'),
          h('dd', {}, time(record.updated_at)),
        ),
        h(
          'p',
          {},
          h(
            'a',
            {
              href: `#/records?integration=${encodeURIComponent(integration)}&connection=${encodeURIComponent(connectionId)}`,
            },
            'Browse records',
          ),
          ' · ',
          h(
            'a',
            {
              href: `#/logs?integration=${encodeURIComponent(integration)}&connection=${encodeURIComponent(connectionId)}`,
            },
            'Logs',
          ),
        ),
      ),
      h(
        'section',
        { 'aria-labelledby': 'metadata-title' },
        h('h2', { id: 'metadata-title' }, 'Metadata'),
        Object.keys(metadata ?? {}).length === 0
          ? h('p', { class: 'empty' }, 'No metadata.')
          : h(
              'pre',
              { class: 'json', tabindex: '0', 'aria-label': 'Metadata as JSON' },
              JSON.stringify(metadata, null, 2),
            ),
      ),
    ),
  );

  const syncsSection = h('section', { 'aria-labelledby': 'syncs-title' }, h('h2', { id: 'syncs-title' }, 'Syncs'));
  view.append(syncsSection);
  return renderSyncs(syncsSection, integration, connectionId);
}

const ACTIONS = [
  { id: 'trigger', label: 'Trigger', path: '/sync/trigger', body: {}, done: 'triggered' },
  { id: 'pause', label: 'Pause', path: '/sync/pause', body: {}, done: 'paused' },
  { id: 'resume', label: 'Resume', path: '/sync/start', body: {}, done: 'resumed' },
  {
    id: 'full-resync',
    label: 'Full resync',
    path: '/sync/trigger',
    body: { opts: { reset: true } },
    done: 'fully resynced',
  },
];

/**
 * The state a row shows for the API's status (the de-facto names), as the page and its styles name it.
 * @type {Record<string, string>}
 */
const STATES = { RUNNING: 'running', SUCCESS: 'idle', PAUSED: 'paused', ERROR: 'failed', STOPPED: 'not_started' };
const stateOf = (/** @type {SyncStatus} */ sync) => STATES[sync.status] ?? String(sync.status).toLowerCase();

/** @param {Record<string, WriteSummary> | null} result */
function summary(result) {
  if (!result) return '—';
  const parts = Object.entries(result).map(
    ([model, c]) =>
      `${model}: ${c.added} added, ${c.updated} updated, ${c.deleted} deleted, ${c.unchanged ?? 0} unchanged`,
  );
  return parts.join('; ') || 'no records';
}

/**
 * `runs` as service.yaml writes it: "1h" reads "every 1h"; "every 5 minutes" already says "every".
 * @param {string | null | undefined} runs
 */
function frequencyText(runs) {
  if (!runs) return 'every —';
  return /^every\s/i.test(runs.trim()) ? runs.trim() : `every ${runs}`;
}

/**
 * @param {HTMLElement} section
 * @param {string} integration
 * @param {string} connectionId
 */
async function renderSyncs(section, integration, connectionId) {
  const status = async () =>
    /** @type {{ syncs: SyncStatus[] }} */ (
      await api('/sync/status', {
        query: { provider_config_key: integration, syncs: '*', connection_id: connectionId },
      })
    );
  /** @type {{ syncs: SyncStatus[] }} */
  let current;
  try {
    current = await status();
  } catch (error) {
    if (error instanceof ApiError && error.code === 'unknown_sync') {
      section.append(h('p', { class: 'empty' }, 'No deployed syncs.'));
      return undefined;
    }
    throw error;
  }
  if (current.syncs.length === 0) {
    section.append(h('p', { class: 'empty' }, 'No deployed syncs for this integration.'));
    return undefined;
  }
  const config = await dashboardConfig();
  const message = h('p', { class: 'notice', role: 'status' });
  /**
   * @type {Map<string, {
   *   cells: { status: HTMLSpanElement, error: HTMLDivElement, finished: HTMLElement, next: HTMLElement, result: HTMLElement, records: HTMLElement },
   *   buttons: HTMLButtonElement[], chartSlot: HTMLDivElement, last: string | undefined, lastFinished: string | null | undefined,
   * }>}
   */
  const rows = new Map();
  const charts = h('div', { class: 'charts' }, h('h2', {}, 'Recent runs'));

  const tbody = h('tbody', {});
  for (const sync of current.syncs) {
    const cells = {
      status: h('span', { class: 'status' }),
      error: h('div', { class: 'meta error-text', dataset: { role: 'error' } }),
      finished: h('td', {}),
      next: h('td', {}),
      result: h('td', {}),
      records: h('td', {}),
    };
    const buttons = ACTIONS.map((action) =>
      h(
        'button',
        {
          type: 'button',
          class: action.id === 'trigger' ? 'primary small' : 'small',
          dataset: { action: action.id },
          'aria-label': `${action.label} sync ${sync.name}`,
          onclick: async (event) => {
            const button = /** @type {HTMLButtonElement} */ (event.currentTarget);
            button.disabled = true;
            try {
              await api(action.path, {
                method: 'POST',
                body: {
                  provider_config_key: integration,
                  connection_id: connectionId,
                  syncs: [sync.name],
                  ...action.body,
                },
              });
              message.className = 'notice';
              message.textContent = `Sync ${sync.name} ${action.done}.`;
              await refresh();
            } catch (error) {
              message.className = 'notice error';
              message.textContent = `Could not ${action.label.toLowerCase()} sync ${sync.name}: ${messageOf(error)}`;
            } finally {
              button.disabled = false;
              update(sync.name);
            }
          },
        },
        action.label,
      ),
    );
    const chartSlot = h('div', { class: 'chart-slot', dataset: { sync: sync.name } });
    charts.append(h('section', { 'aria-label': `Runs of ${sync.name}` }, h('h3', {}, sync.name), chartSlot));
    rows.set(sync.name, { cells, buttons, chartSlot, last: undefined, lastFinished: undefined });
    tbody.append(
      h(
        'tr',
        { dataset: { sync: sync.name } },
        h(
          'th',
          { scope: 'row' },
          sync.name,
          h('div', { class: 'meta' }, `${sync.sync_type}, ${frequencyText(sync.frequency)}`),
        ),
        h('td', {}, cells.status, cells.error),
        cells.finished,
        cells.next,
        cells.result,
        cells.records,
        h('td', { class: 'actions' }, buttons),
      ),
    );
  }
  section.append(
    message,
    h(
      'table',
      { class: 'list syncs' },
      h('caption', { class: 'visually-hidden' }, `Syncs of connection ${connectionId}`),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Sync', 'Status', 'Last run', 'Next run', 'Last result', 'Records', 'Controls'].map((c) =>
            h('th', { scope: 'col' }, c),
          ),
        ),
      ),
      tbody,
    ),
    charts,
  );

  /** @param {string} name */
  function update(name) {
    const row = rows.get(name);
    const sync = current.syncs.find((s) => s.name === name);
    if (!row || !sync) return;
    const state = stateOf(sync);
    const label = state === 'not_started' ? 'not started' : state;
    row.cells.status.textContent = label;
    row.cells.status.className = `status status-${state}`;
    const tr = row.cells.status.closest('tr');
    if (tr) tr.dataset['status'] = state;
    row.cells.error.textContent =
      state === 'failed' && sync.latestError ? `${sync.latestError.code}: ${sync.latestError.message}` : '';
    replace(row.cells.finished, time(sync.finishedAt));
    replace(row.cells.next, state === 'paused' ? 'paused' : time(sync.nextScheduledSyncAt));
    row.cells.result.textContent = summary(sync.latestResult);
    row.cells.records.textContent =
      Object.entries(sync.recordCount ?? {})
        .map(([model, n]) => `${model}: ${n}`)
        .join(', ') || '0';
    const paused = state === 'paused';
    for (const button of row.buttons) {
      if (button.dataset['action'] === 'pause') button.disabled = paused;
      if (button.dataset['action'] === 'resume') button.disabled = !paused && state !== 'not_started';
    }
    if (row.last !== undefined && row.last !== state) announce(`Sync ${name} is ${label}.`);
    row.last = state;
    if (row.lastFinished !== sync.finishedAt) {
      row.lastFinished = sync.finishedAt;
      void drawChart(row.chartSlot, name);
    }
  }

  /**
   * @param {HTMLElement} slot
   * @param {string} name
   */
  async function drawChart(slot, name) {
    try {
      const { runs } = /** @type {{ runs: Run[] }} */ (
        await api('/sync/runs', {
          query: { provider_config_key: integration, connection_id: connectionId, syncs: name, limit: 30 },
        })
      );
      if (!runs || runs.length === 0) replace(slot, h('p', { class: 'empty' }, 'No runs recorded yet.'));
      else replace(slot, runsChart({ runs, syncName: name, config }));
    } catch (error) {
      if (error instanceof ApiError && error.status === 404)
        replace(slot, h('p', { class: 'empty' }, 'No run history is available from this service yet.'));
      else replace(slot, errorBox(error));
    }
  }

  async function refresh() {
    current = await status();
    for (const name of rows.keys()) update(name);
  }

  for (const name of rows.keys()) update(name);
  let stopped = false;
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let timer;
  const tick = async () => {
    if (stopped) return;
    try {
      await refresh();
    } catch (error) {
      message.className = 'notice error';
      message.textContent = `Status could not be refreshed: ${messageOf(error)}`;
    }
    if (!stopped) timer = setTimeout(tick, POLL_MS);
  };
  timer = setTimeout(tick, POLL_MS);
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
