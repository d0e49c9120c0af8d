/** Logs: the `svc.log` lines of scripts, searchable by text, level, integration, connection, sync and run. */
import { api, dashboardConfig, temporalRunUrl } from '../api.js';
import { errorBox, field, h, pageTitle, replace, select, time } from '../dom.js';
/** @import { Integration } from '../api.js' */
/** @import { App } from '../app.js' */
/** @import { Attrs } from '../dom.js' */

/**
 * GET /logs (src/api/routes/logs/getLogs.ts).
 * @typedef {Api.LogLine} LogLine
 * @typedef {{ logs: LogLine[], next_before: string | null }} LogPage
 * @typedef {Record<'text' | 'level' | 'integration' | 'connection' | 'sync' | 'run', string>} Filters
 */

/** @type {[string, string][]} */
const LEVELS = [
  ['', 'Any level'],
  ['debug', 'debug'],
  ['info', 'info'],
  ['warn', 'warn'],
  ['error', 'error'],
];
const PAGE = 100;

/**
 * @param {HTMLElement} view
 * @param {string[]} _params
 * @param {URLSearchParams} query
 * @param {App} app
 */
export async function renderLogs(view, _params, query, app) {
  view.append(pageTitle('Logs'));
  const [answer, config] = await Promise.all([api('/integrations'), dashboardConfig()]);
  const { data: integrations } = /** @type {{ data: Integration[] }} */ (answer);
  /**
   * @param {keyof Filters} name
   * @param {string} label
   * @param {Attrs} [attrs]
   */
  const input = (name, label, attrs = {}) =>
    field(label, h('input', { name, id: `logs-${name}`, value: query.get(name) ?? '', autocomplete: 'off', ...attrs }));
  const form = h(
    'form',
    { class: 'filters', role: 'search', 'aria-label': 'Search logs' },
    h(
      'div',
      { class: 'toolbar' },
      input('text', 'Text', { type: 'search', placeholder: 'words in the message' }),
      field('Level', select({ name: 'level', id: 'logs-level' }, LEVELS, query.get('level') ?? '')),
      field(
        'Integration',
        select(
          { name: 'integration', id: 'logs-integration' },
          [
            ['', 'Any integration'],
            ...integrations.map((i) => /** @type {[string, string]} */ ([i.unique_key, i.unique_key])),
          ],
          query.get('integration') ?? '',
        ),
      ),
      input('connection', 'Connection'),
      input('sync', 'Sync or action'),
      input('run', 'Run id'),
      h('button', { type: 'submit', class: 'primary' }, 'Search'),
    ),
  );
  const results = h('section', { 'aria-label': 'Log lines', class: 'results', 'aria-live': 'polite' });
  view.append(form, results);

  /** @param {string} name */
  const valueOf = (name) => {
    const control = form.elements.namedItem(name);
    return control instanceof HTMLInputElement || control instanceof HTMLSelectElement ? control.value.trim() : '';
  };
  /** @returns {Filters} */
  const read = () => ({
    text: valueOf('text'),
    level: valueOf('level'),
    integration: valueOf('integration'),
    connection: valueOf('connection'),
    sync: valueOf('sync'),
    run: valueOf('run'),
  });
  /** @type {LogLine[]} */
  let lines = [];

  /**
   * @param {Filters} filters
   * @param {string} [before]
   */
  async function load(filters, before) {
    try {
      const page = /** @type {LogPage} */ (
        await api('/logs', {
          query: {
            text: filters.text,
            level: filters.level,
            provider_config_key: filters.integration,
            connection_id: filters.connection,
            sync: filters.sync,
            run_id: filters.run,
            before,
            limit: PAGE,
          },
        })
      );
      lines = before ? [...lines, ...page.logs] : page.logs;
      show(filters, page.next_before);
    } catch (error) {
      replace(results, errorBox(error));
    }
  }

  /**
   * @param {Filters} filters
   * @param {string | null} nextBefore
   */
  function show(filters, nextBefore) {
    const more = h('button', { type: 'button', disabled: !nextBefore }, 'Older lines');
    more.addEventListener('click', () => void load(filters, nextBefore ?? undefined));
    replace(
      results,
      h(
        'h2',
        {},
        lines.length === 0
          ? 'No log lines match'
          : `${lines.length} log line${lines.length === 1 ? '' : 's'}${nextBefore ? ' (more older)' : ''}`,
      ),
      lines.length === 0
        ? null
        : h(
            'div',
            { class: 'scroll', tabindex: '0', role: 'region', 'aria-label': 'Log lines table' },
            h(
              'table',
              { class: 'list logs' },
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ['Time', 'Level', 'Message', 'Integration', 'Connection', 'Script', 'Run'].map((c) =>
                    h('th', { scope: 'col' }, c),
                  ),
                ),
              ),
              h(
                'tbody',
                {},
                lines.map((line) => {
                  const temporalUrl = temporalRunUrl(config, line.run_id);
                  return h(
                    'tr',
                    { class: `line line-${line.level}` },
                    h('td', { class: 'nowrap' }, time(line.logged_at)),
                    h('td', {}, h('span', { class: `level level-${line.level}` }, line.level)),
                    h('td', { class: 'message' }, line.message),
                    h('td', {}, line.integration_id),
                    h(
                      'td',
                      {},
                      h(
                        'a',
                        {
                          href: `#/connections/${encodeURIComponent(line.integration_id)}/${encodeURIComponent(line.connection_id)}`,
                        },
                        line.connection_id,
                      ),
                    ),
                    h('td', {}, `${line.script_kind} ${line.script_name}`),
                    h(
                      'td',
                      {},
                      h(
                        'a',
                        {
                          href: `#/logs?run=${encodeURIComponent(line.run_id)}`,
                          title: `Every line of run ${line.run_id}`,
                        },
                        h('code', {}, shortRun(line.run_id)),
                      ),
                      temporalUrl
                        ? [
                            ' ',
                            h(
                              'a',
                              {
                                href: temporalUrl,
                                target: '_blank',
                                rel: 'noopener noreferrer',
                                class: 'temporal-link',
                              },
                              'Temporal',
                              h('span', { class: 'visually-hidden' }, ` Web UI: run ${line.run_id}`),
                            ),
                          ]
                        : null,
                    ),
                  );
                }),
              ),
            ),
          ),
      lines.length > 0 ? h('div', { class: 'pager' }, more) : null,
    );
  }

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const filters = read();
    app.replaceQuery('logs', [], filters);
    void load(filters);
  });
  await load(read());
}

/** @param {string} runId */
function shortRun(runId) {
  return runId.length > 24 ? `…${runId.slice(-20)}` : runId;
}
