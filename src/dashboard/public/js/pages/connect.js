/**
 * "New connection" on the Connections page: the fields the integration's auth mode asks for (from GET
 * /integrations/:id/connect-fields). API key, Basic, client credentials, service account and app
 * integrations are connected at once with POST /connections; OAuth integrations get a connect session
 * (POST /connect/sessions) whose single-use link opens the provider's consent page. Any integration
 * can also get a link for an end user, who completes it on the hosted connect page.
 */
import { api } from '../api.js';
import { announce, errorBox, field, h, time } from '../dom.js';

/**
 * GET /integrations/:id/connect-fields (src/api/routes/integrations/getIntegrationConnectFields.ts).
 * @typedef {{
 *   name: string, label: string, kind: 'text' | 'secret' | 'multiline', required: boolean,
 *   description?: string, pattern?: string,
 * }} ConnectField
 * @typedef {{ display_name: string, auth_mode: string, redirect: boolean, fields: ConnectField[] }} ConnectFields
 * @typedef {HTMLInputElement | HTMLTextAreaElement} Control
 */

/**
 * The form's value of every field, by its name (`credentials.apiKey`, `connection_config.subdomain`).
 * @param {Map<string, Control>} controls
 */
function valuesOf(controls) {
  /** @type {Record<string, string>} */
  const credentials = {};
  /** @type {Record<string, string>} */
  const settings = {};
  for (const [name, control] of controls) {
    const value = control.value.trim();
    if (value === '') continue;
    const [target, ...rest] = name.split('.');
    (target === 'credentials' ? credentials : settings)[rest.join('.')] = value;
  }
  return { credentials, settings };
}

/**
 * @param {ConnectField} spec
 * @returns {Control}
 */
function controlFor(spec) {
  const attrs = {
    name: spec.name,
    required: spec.required,
    autocomplete: 'off',
    spellcheck: 'false',
    ...(spec.pattern ? { pattern: spec.pattern.replace(/^\^/, '').replace(/\$$/, '') } : {}),
  };
  if (spec.kind === 'multiline') return h('textarea', { ...attrs, rows: '5' });
  return h('input', { ...attrs, type: spec.kind === 'secret' ? 'password' : 'text' });
}

/**
 * The "New connection" section for `integration`; `onConnected(connectionId)` after a direct connect.
 * @param {string} integration
 * @param {(connectionId: string) => void} onConnected
 */
export async function connectSection(integration, onConnected) {
  const section = h(
    'section',
    { 'aria-labelledby': 'new-connection-title', class: 'new-connection' },
    h('h2', { id: 'new-connection-title' }, 'New connection'),
  );
  const spec = /** @type {ConnectFields} */ (
    await api(`/integrations/${encodeURIComponent(integration)}/connect-fields`)
  );
  const connectionId = h('input', { name: 'connection_id', required: true, autocomplete: 'off', spellcheck: 'false' });
  /** @type {Map<string, Control>} */
  const controls = new Map();
  const outcome = h('div', { class: 'connect-outcome', 'aria-live': 'polite' });

  const connectNow = h('button', { type: 'submit', class: 'primary' }, 'Connect');
  const makeLink = h(
    'button',
    { type: 'button', class: spec.redirect ? 'primary' : undefined },
    spec.redirect ? `Start ${spec.auth_mode === 'OAUTH1' ? 'OAuth 1' : 'OAuth'} connect` : 'Make a connect link',
  );

  const form = h(
    'form',
    { novalidate: true },
    h(
      'p',
      { class: 'hint' },
      `${spec.display_name} uses ${spec.auth_mode}. `,
      spec.redirect
        ? 'Connecting opens its consent page through a single-use link.'
        : 'Enter the credentials to connect now, or make a single-use link for an end user to enter them.',
    ),
    field('Connection id', connectionId, 'Your id for this connection: letters, digits and . _ @ + = -'),
    spec.fields.map((f) => {
      const control = controlFor(f);
      controls.set(f.name, control);
      return field(f.required ? f.label : `${f.label} (optional)`, control, f.description);
    }),
    h('div', { class: 'actions' }, spec.redirect ? null : connectNow, makeLink),
    outcome,
  );

  const body = () => {
    const { credentials, settings } = valuesOf(controls);
    return {
      provider_config_key: integration,
      connection_id: connectionId.value.trim(),
      ...(Object.keys(settings).length > 0 ? { connection_config: settings } : {}),
      credentials,
    };
  };

  const fail = (/** @type {unknown} */ error) => {
    const box = errorBox(error);
    outcome.replaceChildren(box);
    announce(box.textContent ?? '');
  };

  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const { credentials, ...rest } = body();
    outcome.replaceChildren();
    api('/connections', { method: 'POST', body: { ...rest, credentials: { type: spec.auth_mode, ...credentials } } })
      .then(() => {
        announce(`Connected ${rest.connection_id}.`);
        for (const control of controls.values()) control.value = '';
        onConnected(rest.connection_id);
      })
      .catch(fail);
  });

  makeLink.addEventListener('click', () => {
    const { credentials: _typedIn, ...rest } = body();
    outcome.replaceChildren();
    api('/connect/sessions', { method: 'POST', body: rest })
      .then((answer) => {
        const session = /** @type {{ connect_url: string, expires_at: string }} */ (answer);
        outcome.replaceChildren(
          h(
            'p',
            { class: 'notice' },
            h(
              'a',
              { href: session.connect_url, target: '_blank', rel: 'noopener noreferrer' },
              'Open the connect page',
            ),
            ' — works once, until ',
            time(session.expires_at),
            '. ',
            spec.redirect ? '' : 'Send it to the end user, who enters the credentials there.',
          ),
        );
        announce('Connect link ready.');
      })
      .catch(fail);
  });

  section.append(form);
  return section;
}
