/* global window, CSS */
/**
 * Environment settings: environment variables (create, edit, delete; values masked until revealed),
 * the environment's keys, and where outbound webhooks go.
 */
import { api, ApiError, dashboardConfig, dashboardPath, secretKey, setSecretKey } from '../api.js';
import { announce, errorBox, field, h, messageOf, pageTitle, replace, time } from '../dom.js';
/** @import { Environment, EnvironmentVariable } from '../api.js' */
/**
 * GET /webhook-deliveries (src/webhooks/deliveries.ts).
 * @typedef {Api.WebhookDelivery} WebhookDelivery
 */

const MASK = '••••••••';

/** @param {HTMLElement} view */
export async function renderSettings(view) {
  view.append(pageTitle('Environment settings'));
  const variables = h(
    'section',
    { 'aria-labelledby': 'variables-title', class: 'card' },
    h('h2', { id: 'variables-title' }, 'Environment variables'),
  );
  const keys = h('section', { 'aria-labelledby': 'keys-title', class: 'card' }, h('h2', { id: 'keys-title' }, 'Keys'));
  const webhooks = h(
    'section',
    { 'aria-labelledby': 'webhooks-title', class: 'card' },
    h('h2', { id: 'webhooks-title' }, 'Webhooks'),
  );
  view.append(variables, h('div', { class: 'columns' }, keys, webhooks));
  await Promise.all([renderVariables(variables), renderKeys(keys), renderWebhooks(webhooks)]);
}

/** @param {HTMLElement} section */
async function renderVariables(section) {
  section.append(
    h(
      'p',
      { class: 'hint' },
      'Scripts read these with svc.getEnvironmentVariables(). Values are hidden until you reveal them.',
    ),
  );
  const message = h('p', { class: 'notice', role: 'status' });
  const body = h('div', {});
  section.append(message, body);

  const say = (/** @type {string} */ text, isError = false) => {
    message.className = isError ? 'notice error' : 'notice';
    message.textContent = text;
  };

  /** @param {string} [focusName] */
  async function reload(focusName) {
    // GET answers the bare array, as the de-facto API does.
    const variables = /** @type {EnvironmentVariable[]} */ (await api('/environment-variables'));
    draw(variables, focusName);
  }

  /**
   * @param {EnvironmentVariable[]} list
   * @param {string} [focusName]
   */
  function draw(list, focusName) {
    const rows = list.map((variable) => {
      const value = h('code', { class: 'masked', dataset: { masked: 'true' } }, MASK);
      const reveal = h(
        'button',
        { type: 'button', class: 'small', 'aria-pressed': 'false', 'aria-label': `Reveal value of ${variable.name}` },
        'Reveal',
      );
      reveal.addEventListener('click', () => {
        const hidden = value.dataset['masked'] === 'true';
        value.textContent = hidden ? variable.value : MASK;
        value.dataset['masked'] = String(!hidden);
        reveal.textContent = hidden ? 'Hide' : 'Reveal';
        reveal.setAttribute('aria-pressed', String(hidden));
        reveal.setAttribute('aria-label', `${hidden ? 'Hide' : 'Reveal'} value of ${variable.name}`);
      });
      const edit = h('button', { type: 'button', class: 'small', 'aria-label': `Edit ${variable.name}` }, 'Edit');
      const remove = h(
        'button',
        { type: 'button', class: 'small danger', 'aria-label': `Delete ${variable.name}` },
        'Delete',
      );
      const valueCell = h('td', {}, value);
      const controlsCell = h('td', { class: 'actions' }, reveal, edit, remove);
      const row = h(
        'tr',
        { dataset: { name: variable.name } },
        h('th', { scope: 'row' }, h('code', {}, variable.name)),
        valueCell,
        controlsCell,
      );
      edit.addEventListener('click', () => {
        const input = h('input', {
          type: 'password',
          value: variable.value,
          id: `edit-${variable.name}`,
          autocomplete: 'off',
          'aria-label': `New value of ${variable.name}`,
        });
        const save = h('button', { type: 'submit', class: 'small primary' }, 'Save');
        const cancel = h('button', { type: 'button', class: 'small' }, 'Cancel');
        const show = h(
          'label',
          { class: 'check' },
          h('input', {
            type: 'checkbox',
            onchange: (e) => (input.type = e.currentTarget.checked ? 'text' : 'password'),
          }),
          ' show',
        );
        const form = h('form', { class: 'inline-edit' }, input, show, save, cancel);
        cancel.addEventListener('click', () => draw(list, variable.name));
        form.addEventListener('submit', (event) => {
          event.preventDefault();
          api('/environment-variables', {
            method: 'POST',
            body: { variables: [{ name: variable.name, value: input.value }] },
          })
            .then(() => {
              say(`Saved ${variable.name}.`);
              return reload(variable.name);
            })
            .catch((/** @type {unknown} */ error) => say(`Could not save ${variable.name}: ${messageOf(error)}`, true));
        });
        replace(valueCell, form);
        replace(controlsCell);
        input.focus();
      });
      remove.addEventListener('click', () => {
        if (!window.confirm(`Delete the environment variable ${variable.name}? Scripts will no longer read it.`))
          return;
        api(`/environment-variables/${encodeURIComponent(variable.name)}`, { method: 'DELETE' })
          .then(() => {
            say(`Deleted ${variable.name}.`);
            return reload();
          })
          .catch((/** @type {unknown} */ error) => say(`Could not delete ${variable.name}: ${messageOf(error)}`, true));
      });
      return row;
    });
    const name = h('input', {
      id: 'new-variable-name',
      name: 'name',
      required: true,
      autocomplete: 'off',
      spellcheck: 'false',
      pattern: '\\S+',
    });
    const value = h('input', { id: 'new-variable-value', name: 'value', type: 'password', autocomplete: 'off' });
    const add = h(
      'form',
      { class: 'toolbar', 'aria-label': 'Add a variable' },
      field('Name', name),
      field('Value', value),
      h('button', { type: 'submit', class: 'primary' }, 'Add variable'),
    );
    add.addEventListener('submit', (event) => {
      event.preventDefault();
      const variableName = name.value.trim();
      if (!variableName) {
        say('Give the variable a name.', true);
        name.focus();
        return;
      }
      if (list.some((v) => v.name === variableName) && !window.confirm(`${variableName} exists. Replace its value?`))
        return;
      api('/environment-variables', {
        method: 'POST',
        body: { variables: [{ name: variableName, value: value.value }] },
      })
        .then(() => {
          say(`Saved ${variableName}.`);
          announce(`Saved ${variableName}.`);
          return reload();
        })
        .catch((/** @type {unknown} */ error) => say(`Could not save ${variableName}: ${messageOf(error)}`, true));
    });
    replace(
      body,
      list.length === 0
        ? h('p', { class: 'empty' }, 'No environment variables yet.')
        : h(
            'table',
            { class: 'list variables' },
            h('caption', { class: 'visually-hidden' }, 'Environment variables'),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                h('th', { scope: 'col' }, 'Name'),
                h('th', { scope: 'col' }, 'Value'),
                h('th', { scope: 'col' }, h('span', { class: 'visually-hidden' }, 'Controls')),
              ),
            ),
            h('tbody', {}, rows),
          ),
      h('h3', {}, 'Add or replace a variable'),
      add,
    );
    const toFocus = focusName ? body.querySelector(`tr[data-name="${CSS.escape(focusName)}"] button`) : null;
    if (toFocus instanceof HTMLButtonElement) toFocus.focus();
  }

  await reload();
}

/** @param {HTMLElement} section */
async function renderKeys(section) {
  const config = await dashboardConfig();
  const current = secretKey() ?? '';
  const value = h('code', { class: 'masked', id: 'secret-key-value' }, maskKey(current));
  const reveal = h(
    'button',
    { type: 'button', class: 'small', 'aria-pressed': 'false', 'aria-controls': 'secret-key-value' },
    'Reveal',
  );
  let shown = false;
  reveal.addEventListener('click', () => {
    shown = !shown;
    value.textContent = shown ? (secretKey() ?? '') : maskKey(secretKey() ?? '');
    reveal.textContent = shown ? 'Hide' : 'Reveal';
    reveal.setAttribute('aria-pressed', String(shown));
  });
  const facts = h('dl', { class: 'facts' }, h('dt', {}, 'Secret key (this session)'), h('dd', {}, value, ' ', reveal));
  section.append(
    h(
      'p',
      { class: 'hint' },
      'The secret key authenticates your application and this dashboard. Keep it on your servers.',
    ),
    facts,
  );
  if (!config.features?.keys) return;
  try {
    const environment = /** @type {Environment} */ (await api(dashboardPath('environment')));
    facts.append(
      h('dt', {}, 'Environment'),
      h('dd', {}, environment.name),
      h('dt', {}, 'Public key'),
      h('dd', {}, h('code', {}, environment.public_key)),
    );
  } catch (error) {
    section.append(errorBox(error));
    return;
  }
  const message = h('p', { class: 'notice', role: 'status' });
  const rotate = h('button', { type: 'button', class: 'danger' }, 'Rotate secret key');
  rotate.addEventListener('click', () => {
    if (!window.confirm('Rotate the secret key? The current key stops working at once, for your application too.'))
      return;
    api(dashboardPath('environment/rotate-secret-key'), { method: 'POST' })
      .then((answer) => {
        const { secret_key: newKey } = /** @type {{ secret_key: string }} */ (answer);
        setSecretKey(newKey);
        shown = true;
        value.textContent = newKey;
        reveal.textContent = 'Hide';
        reveal.setAttribute('aria-pressed', 'true');
        message.className = 'notice';
        message.textContent =
          'New secret key shown above; copy it now and update your application. This dashboard uses it already.';
      })
      .catch((/** @type {unknown} */ error) => {
        message.className = 'notice error';
        message.textContent = `Could not rotate the key: ${messageOf(error)}`;
      });
  });
  section.append(h('div', { class: 'toolbar' }, rotate), message);
}

/** @param {string} key */
function maskKey(key) {
  return key.length > 8 ? `${key.slice(0, 3)}${MASK}${key.slice(-4)}` : MASK;
}

/** @param {HTMLElement} section */
async function renderWebhooks(section) {
  const settings = /** @type {{ url: string | null, has_secret: boolean }} */ (await api('/webhook-settings'));
  const url = h('input', {
    id: 'webhook-url',
    type: 'url',
    value: settings.url ?? '',
    placeholder: 'https://app.example.com/webhooks/service',
    autocomplete: 'off',
  });
  const message = h('p', { class: 'notice', role: 'status' });
  const secretState = h('dd', {}, settings.has_secret ? 'set (never shown again)' : 'not set');
  const form = h(
    'form',
    { 'aria-label': 'Outbound webhook settings' },
    h(
      'p',
      { class: 'hint' },
      'Where the service posts "sync finished" events, signed with HMAC-SHA256 in X-Service-Hmac-Sha256. Leave empty to send none.',
    ),
    field('Webhook URL', url),
    h('dl', { class: 'facts' }, h('dt', {}, 'Signing secret'), secretState),
    h('button', { type: 'submit', class: 'primary' }, 'Save webhook settings'),
    message,
  );
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const value = url.value.trim();
    api('/webhook-settings', { method: 'PUT', body: { url: value === '' ? null : value } })
      .then((answer) => {
        const saved = /** @type {{ generated_secret?: string | null }} */ (answer);
        message.className = 'notice';
        if (saved.generated_secret) {
          secretState.textContent = 'set';
          replace(message, 'Saved. The signing secret, shown this once: ', h('code', {}, saved.generated_secret));
        } else {
          message.textContent = 'Saved.';
        }
      })
      .catch((/** @type {unknown} */ error) => {
        message.className = 'notice error';
        message.textContent = `Could not save: ${messageOf(error)}`;
      });
  });
  section.append(form);
  try {
    const { deliveries } = /** @type {{ deliveries: WebhookDelivery[] }} */ (
      await api('/webhook-deliveries', { query: { limit: 10 } })
    );
    section.append(
      h('h3', {}, 'Recent deliveries'),
      deliveries.length === 0
        ? h('p', { class: 'empty' }, 'None yet.')
        : h(
            'table',
            { class: 'list compact' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ['When', 'Connection', 'Status', 'Attempts'].map((c) => h('th', { scope: 'col' }, c)),
              ),
            ),
            h(
              'tbody',
              {},
              deliveries.map((d) =>
                h(
                  'tr',
                  {},
                  h('td', {}, time(d.created_at)),
                  h('td', {}, d.connection_id ?? '—'),
                  h('td', {}, h('span', { class: `status status-${d.status}` }, d.status)),
                  h('td', {}, String(d.attempts ?? '—')),
                ),
              ),
            ),
          ),
    );
  } catch (error) {
    if (!(error instanceof ApiError && error.status === 404)) section.append(errorBox(error));
  }
}
