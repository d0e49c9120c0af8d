/**
 * Integrations: the list, and per integration its syncs, actions and models as deployed, and the
 * Script tab with the deployed source of every script, its deploy version and time.
 */
import { api, ApiError, deployment as deploymentOf, deployments as listDeployments } from '../api.js';
import { errorBox, field, h, pageTitle, select, time } from '../dom.js';
import { tabs } from '../tabs.js';
/** @import { Deployment, DeploymentSummary, Integration } from '../api.js' */
/** @import { App } from '../app.js' */
/** @import { IntegrationConfig, ModelConfig, TypeExpr } from '../../../../config/types.js' */

/**
 * What the pages know of the deploy history: the chosen deployment and every version, or the error
 * that says the routes are missing.
 * @typedef {{ deployment: Deployment, versions: DeploymentSummary[], error?: undefined }
 *   | { error: ApiError, versions: DeploymentSummary[], deployment?: undefined }} DeployHistory
 */

/**
 * @param {HTMLElement} view
 * @param {string[]} params
 * @param {URLSearchParams} query
 * @param {App} app
 */
export async function renderIntegrations(view, params, query, app) {
  if (params[0]) return renderIntegration(view, params[0], params[1] ?? 'overview', query, app);
  view.append(pageTitle('Integrations'));
  const [answer, deployment] = await Promise.all([api('/integrations'), deploymentOrNull()]);
  const { data: integrations } = /** @type {{ data: Integration[] }} */ (answer);
  const deployed = new Map((deployment?.deployment?.config.integrations ?? []).map((i) => [i.id, i]));
  const ids = [...new Set([...integrations.map((i) => i.unique_key), ...deployed.keys()])].sort();
  view.append(deploymentSummary(deployment));
  if (ids.length === 0) {
    view.append(
      h('p', { class: 'empty' }, 'No integrations yet. Create one through the API, then run `service deploy`.'),
    );
    return;
  }
  const byId = new Map(integrations.map((i) => [i.unique_key, i]));
  view.append(
    h(
      'table',
      { class: 'list' },
      h('caption', { class: 'visually-hidden' }, 'Integrations of this environment'),
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', { scope: 'col' }, 'Integration'),
          h('th', { scope: 'col' }, 'Provider'),
          h('th', { scope: 'col' }, 'Syncs'),
          h('th', { scope: 'col' }, 'Actions'),
          h('th', { scope: 'col' }, 'Created'),
        ),
      ),
      h(
        'tbody',
        {},
        ids.map((id) => {
          const integration = byId.get(id);
          const config = deployed.get(id);
          return h(
            'tr',
            {},
            h('th', { scope: 'row' }, h('a', { href: `#/integrations/${encodeURIComponent(id)}` }, id)),
            h('td', {}, integration?.provider ?? h('em', {}, 'not created (deployed only)')),
            h('td', {}, config ? config.syncs.map((s) => s.name).join(', ') || '—' : 'not deployed'),
            h('td', {}, config ? config.actions.map((a) => a.name).join(', ') || '—' : 'not deployed'),
            h('td', {}, time(integration?.created_at)),
          );
        }),
      ),
    ),
  );
}

/**
 * The active deployment (`{ deployment, versions }`), null when none, or `{ error }` when the routes are missing.
 * @param {string} [version]
 * @returns {Promise<DeployHistory | null>}
 */
async function deploymentOrNull(version) {
  try {
    const deployments = await listDeployments();
    const chosen = version
      ? deployments.find((d) => String(d.version) === String(version))
      : deployments.find((d) => d.status === 'active');
    if (!chosen) return null;
    return { deployment: await deploymentOf(chosen.version), versions: deployments };
  } catch (error) {
    if (error instanceof ApiError && error.status === 404) return { error, versions: [] };
    throw error;
  }
}

/** @param {DeployHistory | null} found */
function deploymentSummary(found) {
  if (!found) return h('p', { class: 'empty' }, 'Nothing is deployed to this environment yet.');
  if (found.error) return errorBox(`The deploy history cannot be read: ${found.error.message}`);
  const d = found.deployment;
  return h(
    'p',
    { class: 'meta' },
    `Deployed version ${d.version}, `,
    d.activatedAt ? ['active since ', time(d.activatedAt)] : d.status,
    '.',
  );
}

/**
 * @param {HTMLElement} view
 * @param {string} id
 * @param {string} tab
 * @param {URLSearchParams} query
 * @param {App} app
 */
async function renderIntegration(view, id, tab, query, app) {
  view.append(
    h(
      'nav',
      { 'aria-label': 'Breadcrumb', class: 'breadcrumb' },
      h(
        'ol',
        {},
        h('li', {}, h('a', { href: '#/integrations' }, 'Integrations')),
        h('li', { 'aria-current': 'page' }, id),
      ),
    ),
    pageTitle(`Integration ${id}`),
  );
  const version = query.get('version') ?? undefined;
  const [integration, found] = await Promise.all([
    api(`/integrations/${encodeURIComponent(id)}`).then(
      (answer) => /** @type {{ data: Integration }} */ (answer).data,
      (/** @type {unknown} */ error) => {
        // Deployed but not created as an integration: the page still shows what is deployed.
        if (error instanceof ApiError && error.status === 404) return null;
        throw error;
      },
    ),
    deploymentOrNull(version),
  ]);
  if (found?.error) view.append(errorBox(`The deploy history cannot be read: ${found.error.message}`));
  const deployment = found?.deployment ?? null;
  const config = deployment?.config.integrations.find((i) => i.id === id) ?? null;

  view.append(
    h(
      'dl',
      { class: 'facts' },
      h('dt', {}, 'Provider'),
      h('dd', {}, integration?.provider ?? 'not created'),
      h('dt', {}, 'Deployed'),
      h(
        'dd',
        {},
        deployment
          ? [`version ${deployment.version}, `, time(deployment.activatedAt ?? deployment.createdAt)]
          : 'not deployed',
      ),
      h('dt', {}, 'Connections'),
      h('dd', {}, h('a', { href: `#/connections/${encodeURIComponent(id)}` }, 'Show connections')),
    ),
  );

  /** @type {import('../tabs.js').Panel[]} */
  const panels = [
    { id: 'overview', label: 'Syncs and actions', render: (panel) => overview(panel, config) },
    { id: 'models', label: 'Models', render: (panel) => models(panel, config, deployment) },
    { id: 'script', label: 'Script', render: (panel) => scripts(panel, id, deployment, found?.versions ?? [], app) },
  ];
  view.append(
    tabs({
      label: `Integration ${id}`,
      panels,
      selected: panels.some((p) => p.id === tab) ? tab : 'overview',
      onSelect: (selected) => app.replaceQuery('integrations', [id, selected], Object.fromEntries(query)),
    }),
  );
}

/** @param {{ method: string, path: string }} endpoint */
function endpointText(endpoint) {
  return `${endpoint.method} ${endpoint.path}`;
}

/**
 * @param {HTMLElement} panel
 * @param {IntegrationConfig | null} config
 */
function overview(panel, config) {
  if (!config) {
    panel.append(h('p', { class: 'empty' }, 'This integration has no deployed syncs or actions.'));
    return;
  }
  panel.append(
    h('h2', {}, 'Syncs'),
    config.syncs.length === 0
      ? h('p', { class: 'empty' }, 'No syncs.')
      : h(
          'table',
          { class: 'list' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['Sync', 'Type', 'Runs', 'Models', 'Endpoints', 'Auto start', 'Description'].map((c) =>
                h('th', { scope: 'col' }, c),
              ),
            ),
          ),
          h(
            'tbody',
            {},
            config.syncs.map((s) =>
              h(
                'tr',
                {},
                h('th', { scope: 'row' }, s.name),
                h('td', {}, s.syncType, s.syncType === 'full' && s.trackDeletes ? ' (tracks deletes)' : ''),
                h('td', {}, s.runs),
                h('td', {}, s.outputs.map((o) => o.model).join(', ')),
                h('td', {}, h('code', {}, s.outputs.map((o) => endpointText(o.endpoint)).join(', '))),
                h('td', {}, s.autoStart ? 'yes' : 'no'),
                h('td', {}, s.description),
              ),
            ),
          ),
        ),
    h('h2', {}, 'Actions'),
    config.actions.length === 0
      ? h('p', { class: 'empty' }, 'No actions.')
      : h(
          'table',
          { class: 'list' },
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['Action', 'Input', 'Output', 'Endpoint', 'Description'].map((c) => h('th', { scope: 'col' }, c)),
            ),
          ),
          h(
            'tbody',
            {},
            config.actions.map((a) =>
              h(
                'tr',
                {},
                h('th', { scope: 'row' }, a.name),
                h('td', {}, a.input ?? '—'),
                h('td', {}, a.output),
                h('td', {}, h('code', {}, endpointText(a.endpoint))),
                h('td', {}, a.description),
              ),
            ),
          ),
        ),
  );
}

/**
 * A type expression of src/config/types.ts as TypeScript-like text.
 * @param {TypeExpr | null | undefined} expr
 * @returns {string}
 */
export function typeText(expr) {
  switch (expr?.kind) {
    case 'primitive':
      return expr.name;
    case 'literal':
      return JSON.stringify(expr.value);
    case 'model':
      return expr.name;
    case 'array': {
      const inner = typeText(expr.element);
      return expr.element.kind === 'union' ? `(${inner})[]` : `${inner}[]`;
    }
    case 'union':
      return expr.members.map(typeText).join(' | ');
    case 'object':
      return `{ ${expr.fields.map((f) => `${f.name}${f.optional ? '?' : ''}: ${typeText(f.type)}`).join('; ')} }`;
    default:
      return 'unknown';
  }
}

/**
 * The models the integration's syncs and actions use, and the models they reference, in order.
 * @param {IntegrationConfig} config
 * @param {Map<string, ModelConfig>} all
 */
function modelsUsed(config, all) {
  /** @type {Set<string>} */
  const names = new Set();
  /** @param {string | null} name */
  const visit = (name) => {
    if (!name || names.has(name)) return;
    const model = all.get(name);
    if (!model) return;
    names.add(name);
    for (const parent of model.extends) visit(parent);
    /** @param {TypeExpr | null} expr */
    const walk = (expr) => {
      if (!expr) return;
      if (expr.kind === 'model') visit(expr.name);
      else if (expr.kind === 'array') walk(expr.element);
      else if (expr.kind === 'union') expr.members.forEach(walk);
      else if (expr.kind === 'object') expr.fields.forEach((f) => walk(f.type));
    };
    model.fields.forEach((f) => walk(f.type));
  };
  for (const s of config.syncs) {
    s.outputs.forEach((o) => visit(o.model));
    visit(s.input);
  }
  for (const a of config.actions) {
    visit(a.input);
    visit(a.output);
  }
  return [...names];
}

/**
 * @param {HTMLElement} panel
 * @param {IntegrationConfig | null} config
 * @param {Deployment | null} deployment
 */
function models(panel, config, deployment) {
  if (!config || !deployment) {
    panel.append(h('p', { class: 'empty' }, 'No deployed models.'));
    return;
  }
  const all = new Map(deployment.config.models.map((m) => [m.name, m]));
  const names = modelsUsed(config, all);
  if (names.length === 0) panel.append(h('p', { class: 'empty' }, 'No models.'));
  for (const name of names) {
    const model = all.get(name);
    if (!model) continue;
    panel.append(
      h(
        'section',
        { class: 'model', 'aria-labelledby': `model-${name}` },
        h(
          'h2',
          { id: `model-${name}` },
          name,
          model.extends.length ? h('span', { class: 'meta' }, ` extends ${model.extends.join(', ')}`) : null,
        ),
        h(
          'table',
          { class: 'list compact' },
          h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Type'))),
          h(
            'tbody',
            {},
            model.fields.map((f) =>
              h(
                'tr',
                {},
                h('th', { scope: 'row' }, h('code', {}, `${f.name}${f.optional ? '?' : ''}`)),
                h('td', {}, h('code', {}, typeText(f.type))),
              ),
            ),
            model.stringIndex
              ? h(
                  'tr',
                  {},
                  h('th', { scope: 'row' }, h('code', {}, '[key: string]')),
                  h('td', {}, h('code', {}, typeText(model.stringIndex))),
                )
              : null,
          ),
        ),
      ),
    );
  }
}

/**
 * @param {HTMLElement} panel
 * @param {string} id
 * @param {Deployment | null} deployment
 * @param {DeploymentSummary[]} versions
 * @param {App} app
 */
function scripts(panel, id, deployment, versions, app) {
  if (versions.length > 0 && deployment) {
    const picker = select(
      { id: 'script-version' },
      versions.map((v) => [String(v.version), `Version ${v.version} (${v.status})`]),
      String(deployment.version),
    );
    picker.addEventListener('change', () => app.navigate('integrations', [id, 'script'], { version: picker.value }));
    panel.append(h('div', { class: 'toolbar' }, field('Deploy version', picker)));
  }
  const list = (deployment?.scripts ?? []).filter((s) => s.integration === id);
  if (!deployment || list.length === 0) {
    panel.append(h('p', { class: 'empty' }, 'No deployed scripts for this integration.'));
    return;
  }
  for (const script of list) {
    const headingId = `script-${script.kind}-${script.name}`;
    panel.append(
      h(
        'section',
        { class: 'script', 'aria-labelledby': headingId },
        h('h2', { id: headingId }, `${script.kind === 'sync' ? 'Sync' : 'Action'} ${script.name}`),
        h(
          'p',
          { class: 'meta' },
          script.sourcePath ? [h('code', {}, script.sourcePath), ' · '] : null,
          `deploy version ${deployment.version}`,
          ' · deployed ',
          time(deployment.activatedAt ?? deployment.createdAt),
          ' · ',
          h('abbr', { title: `content hash ${script.hash}` }, `hash ${String(script.hash).slice(0, 12)}`),
        ),
        script.source
          ? h(
              'pre',
              { class: 'source', tabindex: '0', 'aria-label': `Source of ${script.kind} ${script.name}` },
              h('code', {}, script.source),
            )
          : h('p', { class: 'empty' }, 'The deploy did not include the TypeScript source of this script.'),
      ),
    );
  }
}
