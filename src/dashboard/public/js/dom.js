/* global document, setTimeout, Node */
/**
 * Building DOM without innerHTML: every value from the API becomes text, never markup, so a record or
 * a log line cannot inject script into a page that holds the secret key.
 */

/**
 * What `h` appends: nodes, strings, numbers, arrays of these, or null/undefined/false (skipped).
 * @typedef {Node | string | number | boolean | null | undefined | Children} Child
 * @typedef {Array<Child>} Children
 */

/**
 * Attributes of `h`: `on<event>` for listeners, `dataset` for `data-*`, `true` for boolean attributes;
 * null, undefined and false leave the attribute out.
 * @typedef {{
 *   [name: string]: unknown,
 *   dataset?: Record<string, string>,
 *   onclick?: (event: MouseEvent & { currentTarget: HTMLElement }) => unknown,
 *   onchange?: (event: Event & { currentTarget: HTMLInputElement }) => unknown,
 * }} Attrs
 */

/**
 * Creates an element. `attrs`: attributes, with `on<event>` for listeners, `class`, `hidden` and
 * boolean attributes; `children`: nodes, strings, numbers, arrays, or null/undefined/false (skipped).
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Attrs | null} [attrs]
 * @param {...Child} children
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2).toLowerCase(), /** @type {EventListener} */ (value));
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (value === true) {
      element.setAttribute(name, '');
    } else if (typeof value === 'string' || typeof value === 'number') {
      element.setAttribute(name, String(value));
    } else {
      throw new TypeError(`The attribute ${name} of <${tag}> is a ${typeof value}, not text.`);
    }
  }
  append(element, children);
  return element;
}

/**
 * @param {Element} parent
 * @param {Child[]} children
 */
function append(parent, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.append(child);
    else parent.append(document.createTextNode(String(child)));
  }
}

/**
 * The page's element with this id, of this class; throws when index.html has none (a broken page, not
 * a state to handle).
 * @template {HTMLElement} T
 * @param {string} id
 * @param {new () => T} type
 * @returns {T}
 */
export function byId(id, type) {
  const element = document.getElementById(id);
  if (!(element instanceof type)) throw new Error(`The page has no ${type.name} #${id}.`);
  return element;
}

/**
 * Replaces the content of `parent`.
 * @param {Element} parent
 * @param {...Child} children
 */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

/**
 * Says something to screen readers (an aria-live region).
 * @param {string} message
 */
export function announce(message) {
  const region = document.getElementById('announcer');
  if (!region) return;
  region.textContent = '';
  // A change the live region notices even when the same message repeats.
  setTimeout(() => {
    region.textContent = message;
  }, 30);
}

/**
 * A local, readable date and time, or a dash.
 * @param {string | null | undefined} iso
 */
export function formatTime(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/**
 * A `<time>` element with the ISO instant as its machine-readable value.
 * @param {string | null | undefined} iso
 */
export function time(iso) {
  return iso ? h('time', { datetime: iso, title: iso }, formatTime(iso)) : '—';
}

/**
 * Milliseconds as `850 ms`, `12.3 s`, `4 min 5 s`.
 * @param {number | null | undefined} ms
 */
export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/**
 * The message of something thrown (an Error's message, else its text).
 * @param {unknown} error
 */
export function messageOf(error) {
  return error instanceof Error ? error.message : String(error);
}

/**
 * An error message box; `role=alert` so it is read out when it appears.
 * @param {unknown} error
 */
export function errorBox(error) {
  return h('p', { class: 'error', role: 'alert' }, messageOf(error));
}

/**
 * A labelled form control: `<div><label>…</label><control></div>`.
 * @param {string} label
 * @param {HTMLElement} control
 * @param {string} [hint]
 */
export function field(label, control, hint) {
  const id = control.id || `f-${Math.random().toString(36).slice(2, 9)}`;
  control.id = id;
  const hintId = hint ? `${id}-hint` : undefined;
  if (hintId) control.setAttribute('aria-describedby', hintId);
  return h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    control,
    hint ? h('p', { class: 'hint', id: hintId }, hint) : null,
  );
}

/**
 * A `<select>` of options `[value, label]`, with `value` selected.
 * @param {Attrs} attrs
 * @param {[string, string][]} options
 * @param {string} value
 */
export function select(attrs, options, value) {
  return h(
    'select',
    attrs,
    options.map(([optionValue, label]) => h('option', { value: optionValue, selected: optionValue === value }, label)),
  );
}

/**
 * A page heading that receives focus after navigation, so keyboard and screen reader users land on it.
 * @param {string} text
 */
export function pageTitle(text) {
  return h('h1', { tabindex: '-1', class: 'page-title' }, text);
}
