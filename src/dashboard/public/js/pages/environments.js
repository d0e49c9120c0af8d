/* global window */
/**
 * Environments (signed in with the service admin key): create, rename, delete, rotate a secret key.
 * A new secret key is shown once, in the page, and never stored by it (docs/dashboard.md).
 */
import { api } from '../api.js';
import { announce, field, h, messageOf, pageTitle, replace, time } from '../dom.js';
/** @import { Environment } from '../api.js' */

/** @param {HTMLElement} view */
export async function renderEnvironments(view) {
  view.append(
    pageTitle('Environments'),
    h(
      'p',
      { class: 'hint' },
      'Each environment has its own connections, records, integrations and keys; none sees another’s. Signed in with the service admin key, this page manages the environments themselves and shows none of their data.',
    ),
  );
  // Where a new key is shown once: above the list, so it survives the list being redrawn.
  const keyNotice = h('div', { id: 'new-key', role: 'status' });
  const message = h('p', { class: 'notice', role: 'status' });
  const listSection = h('section', { 'aria-labelledby': 'environments-list-title' });
  view.append(createForm(), keyNotice, message, listSection);

  /** @param {string} what */
  function fail(what) {
    return (/** @type {unknown} */ error) => {
      message.className = 'notice error';
      message.textContent = `Could not ${what}: ${messageOf(error)}`;
    };
  }

  /**
   * @param {string} name
   * @param {string} key
   * @param {string} what
   */
  function showKey(name, key, what) {
    message.className = 'notice';
    message.textContent = '';
    replace(
      keyNotice,
      h(
        'p',
        { class: 'notice' },
        `${what} The secret key of ${name}, shown this once: `,
        h('code', { class: 'secret-key' }, key),
      ),
    );
    announce(`${what} Copy the secret key of ${name} now.`);
  }

  function createForm() {
    const name = h('input', {
      id: 'new-environment-name',
      name: 'name',
      autocomplete: 'off',
      spellcheck: 'false',
      pattern: '[a-z0-9][a-z0-9_-]{0,62}',
      required: true,
    });
    const form = h(
      'form',
      { 'aria-label': 'Create an environment', class: 'inline-form' },
      field('New environment name', name, 'Lower-case letters, digits, _ and -.'),
      h('button', { type: 'submit', class: 'primary' }, 'Create environment'),
    );
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      api('/environments', { method: 'POST', body: { name: name.value.trim() } })
        .then((answer) => {
          const { environment, secret_key: key } = /** @type {{ environment: Environment, secret_key: string }} */ (
            answer
          );
          name.value = '';
          showKey(environment.name, key, `Created ${environment.name}.`);
          return load();
        })
        .catch(fail('create the environment'));
    });
    return form;
  }

  async function load() {
    const { environments } = /** @type {{ environments: Environment[] }} */ (await api('/environments'));
    replace(
      listSection,
      h('h2', { id: 'environments-list-title' }, `${environments.length} environment(s)`),
      h(
        'table',
        { class: 'list' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['Name', 'Id', 'Public key', 'Created', 'Actions'].map((c) => h('th', { scope: 'col' }, c)),
          ),
        ),
        h('tbody', {}, environments.map(row)),
      ),
    );
  }

  /** @param {Environment} environment */
  function row(environment) {
    const rename = h('button', { type: 'button' }, 'Rename');
    const rotate = h('button', { type: 'button', class: 'danger' }, 'Rotate key');
    const remove = h('button', { type: 'button', class: 'danger' }, 'Delete');
    const actions = h('td', {}, h('div', { class: 'toolbar' }, rename, rotate, remove));
    rename.addEventListener('click', () => {
      const input = h('input', {
        'aria-label': `New name of ${environment.name}`,
        value: environment.name,
        autocomplete: 'off',
      });
      const form = h(
        'form',
        { class: 'inline-form', 'aria-label': `Rename ${environment.name}` },
        input,
        h('button', { type: 'submit', class: 'primary' }, 'Save name'),
      );
      form.addEventListener('submit', (event) => {
        event.preventDefault();
        api(`/environments/${encodeURIComponent(environment.id)}`, {
          method: 'PATCH',
          body: { name: input.value.trim() },
        })
          .then((answer) => {
            const { environment: renamed, warnings } = /** @type {{ environment: Environment, warnings: string[] }} */ (
              answer
            );
            message.className = 'notice';
            message.textContent = [`Renamed ${environment.name} to ${renamed.name}.`, ...warnings].join(' ');
            return load();
          })
          .catch(fail('rename'));
      });
      replace(actions, form);
      input.focus();
    });
    rotate.addEventListener('click', () => {
      if (
        !window.confirm(
          `Rotate the secret key of ${environment.name}? Its current key stops working at once, for its application too.`,
        )
      )
        return;
      api(`/environments/${encodeURIComponent(environment.id)}/rotate-key`, { method: 'POST' })
        .then((answer) => {
          const { secret_key: key } = /** @type {{ secret_key: string }} */ (answer);
          showKey(environment.name, key, `Rotated the key of ${environment.name}.`);
        })
        .catch(fail('rotate the key'));
    });
    remove.addEventListener('click', () => {
      if (
        !window.confirm(
          `Delete ${environment.name} with its integrations, variables, webhook settings, deployments and logs? This cannot be undone. An environment with connections is refused.`,
        )
      )
        return;
      api(`/environments/${encodeURIComponent(environment.id)}`, { method: 'DELETE' })
        .then(() => {
          message.className = 'notice';
          message.textContent = `Deleted ${environment.name}.`;
          return load();
        })
        .catch(fail(`delete ${environment.name}`));
    });
    return h(
      'tr',
      { dataset: { environment: environment.name } },
      h('th', { scope: 'row' }, environment.name),
      h('td', {}, h('code', {}, environment.id)),
      h('td', {}, h('code', {}, environment.public_key)),
      h('td', {}, time(environment.created_at)),
      actions,
    );
  }

  await load();
}
