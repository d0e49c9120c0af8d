/**
 * Records: a connection's cached records per model, filtered by last action (added, updated,
 * deleted), page by page with the API's `next_cursor`.
 */
import { activeDeployment, api, ApiError, connectionHeaders } from '../api.js';
import { errorBox, field, h, pageTitle, replace, select, time } from '../dom.js';
/** @import { ConnectionSummary, Deployment, Integration } from '../api.js' */
/** @import { App } from '../app.js' */

/**
 * GET /records (src/api/routes/records/getRecords.ts): each record with its `_service_metadata`.
 * @typedef {{ last_action?: string, deleted_at?: string | null, last_modified_at?: string }} RecordMetadata
 * @typedef {{ id: unknown, _service_metadata?: RecordMetadata, [field: string]: unknown }} StoredRecord
 * @typedef {{ records: StoredRecord[], next_cursor: string | null }} RecordPage
 * @typedef {{ integration: string, connection: string, model: string, filter: string, limit: string }} Choice
 */

const PAGE_SIZES = ['10', '50', '100'];
const FILTERS = ['added', 'updated', 'deleted'];

/**
 * @param {HTMLElement} view
 * @param {string[]} _params
 * @param {URLSearchParams} query
 * @param {App} app
 */
export async function renderRecords(view, _params, query, app) {
  view.append(pageTitle('Records'));
  const { data: integrations } = /** @type {{ data: Integration[] }} */ (await api('/integrations'));
  const firstIntegration = integrations[0];
  if (!firstIntegration) {
    view.append(h('p', { class: 'empty' }, 'No integrations yet.'));
    return;
  }
  /** @type {Deployment | null} */
  let deployment = null;
  try {
    deployment = await activeDeployment();
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) throw error;
  }

  const integration = query.get('integration') ?? firstIntegration.unique_key;
  const integrationPicker = select(
    { id: 'records-integration', name: 'integration' },
    integrations.map((i) => [i.unique_key, i.unique_key]),
    integration,
  );
  integrationPicker.addEventListener('change', () =>
    app.navigate('records', [], { integration: integrationPicker.value }),
  );

  const { connections } = /** @type {{ connections: ConnectionSummary[] }} */ (
    await api('/connections', { query: { provider_config_key: integration } })
  );
  const models = [
    ...new Set(
      (deployment?.config.integrations.find((i) => i.id === integration)?.syncs ?? []).flatMap((s) =>
        s.outputs.map((o) => o.model),
      ),
    ),
  ];
  const form = h('form', { class: 'filters', 'aria-label': 'Which records' });
  const toolbar = h('div', { class: 'toolbar' }, field('Integration', integrationPicker));
  form.append(toolbar);
  const firstConnection = connections[0];
  if (!firstConnection) {
    view.append(form, h('p', { class: 'empty' }, `No connections of ${integration} yet.`));
    return;
  }
  const connection = query.get('connection') ?? firstConnection.connection_id;
  const connectionPicker = select(
    { name: 'connection', id: 'records-connection' },
    connections.map((c) => [c.connection_id, c.connection_id]),
    connection,
  );
  const model = query.get('model') ?? models[0] ?? '';
  const modelControl = models.length
    ? select(
        { name: 'model', id: 'records-model' },
        models.map((m) => [m, m]),
        model,
      )
    : h('input', { name: 'model', id: 'records-model', value: model, required: true, autocomplete: 'off' });
  const chosenFilters = (query.get('filter') ?? '').split(',').filter(Boolean);
  const filterInputs = FILTERS.map((name) =>
    h('input', { type: 'checkbox', name: 'filter', value: name, checked: chosenFilters.includes(name) }),
  );
  const filterBoxes = filterInputs.map((input) => h('label', { class: 'check' }, input, ` ${input.value}`));
  const limit = query.get('limit');
  const pageSize = select(
    { name: 'limit', id: 'records-limit' },
    PAGE_SIZES.map((n) => [n, n]),
    limit !== null && PAGE_SIZES.includes(limit) ? limit : '50',
  );
  toolbar.append(
    field('Connection', connectionPicker),
    field('Model', modelControl),
    h('fieldset', { class: 'inline' }, h('legend', {}, 'Last action'), filterBoxes),
    field('Page size', pageSize),
    h('button', { type: 'submit', class: 'primary' }, 'Show records'),
  );
  const results = h('section', {
    'aria-label': 'Records',
    class: 'results',
    'aria-live': 'polite',
    'aria-busy': 'false',
  });
  view.append(form, results);

  /** @type {(string | null)[]} */
  const cursors = [];
  /** @type {Choice} */
  let state;
  /** @returns {Choice} */
  const read = () => ({
    integration,
    connection: connectionPicker.value,
    model: modelControl.value,
    filter: filterInputs
      .filter((i) => i.checked)
      .map((i) => i.value)
      .join(','),
    limit: pageSize.value,
  });

  /** @param {string | null | undefined} cursor */
  async function load(cursor) {
    results.setAttribute('aria-busy', 'true');
    try {
      const page = /** @type {RecordPage} */ (
        await api('/records', {
          query: { model: state.model, filter: state.filter, limit: state.limit, cursor },
          headers: connectionHeaders(state.integration, state.connection),
        })
      );
      show(page);
    } catch (error) {
      replace(results, errorBox(error));
    } finally {
      results.setAttribute('aria-busy', 'false');
    }
  }

  /** @param {RecordPage} page */
  function show(page) {
    const first = cursors.length * Number(state.limit) + 1;
    const heading = h(
      'h2',
      {},
      page.records.length === 0 ? 'No records' : `Records ${first}–${first + page.records.length - 1}`,
      h('span', { class: 'meta' }, ` of ${state.model} for ${state.connection}`),
    );
    const fields = [
      ...new Set(page.records.flatMap((r) => Object.keys(r)).filter((k) => k !== '_service_metadata' && k !== 'id')),
    ];
    const table = page.records.length
      ? h(
          'div',
          { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Records table, scrolls sideways' },
          h(
            'table',
            { class: 'list records' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', { scope: 'col' }, 'id'),
                fields.map((f) => h('th', { scope: 'col' }, f)),
                h('th', { scope: 'col' }, 'Last action'),
                h('th', { scope: 'col' }, 'Modified'),
              ),
            ),
            h(
              'tbody',
              {},
              page.records.map((record) => {
                const meta = record._service_metadata ?? {};
                const action = String(meta.last_action ?? '').toLowerCase();
                return h(
                  'tr',
                  { class: meta.deleted_at ? 'deleted' : '' },
                  h('th', { scope: 'row' }, h('code', {}, String(record.id))),
                  fields.map((f) => h('td', {}, cell(record[f]))),
                  h('td', {}, h('span', { class: `status status-${action}` }, action || '—')),
                  h('td', {}, time(meta.last_modified_at)),
                );
              }),
            ),
          ),
        )
      : h('p', { class: 'empty' }, 'No records match.');
    const previous = h('button', { type: 'button', disabled: cursors.length === 0 }, 'Previous page');
    previous.addEventListener('click', () => {
      cursors.pop();
      void load(cursors.at(-1));
    });
    const next = h('button', { type: 'button', disabled: !page.next_cursor }, 'Next page');
    next.addEventListener('click', () => {
      cursors.push(page.next_cursor);
      void load(page.next_cursor);
    });
    replace(
      results,
      heading,
      table,
      h('div', { class: 'pager', role: 'group', 'aria-label': 'Pages' }, previous, next),
    );
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    state = read();
    cursors.length = 0;
    app.replaceQuery('records', [], state);
    void load(undefined);
  });
  if (model) {
    state = read();
    await load(undefined);
  }
}

/** @param {unknown} value */
function cell(value) {
  if (value === null || value === undefined) return h('span', { class: 'meta' }, String(value));
  if (typeof value === 'object') return h('code', {}, JSON.stringify(value));
  // A string, number or boolean (records are JSON).
  return typeof value === 'string' ? value : JSON.stringify(value);
}
