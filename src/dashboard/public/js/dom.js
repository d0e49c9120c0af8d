/* global document, setTimeout, Node */
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument --
   Browser code in plain JavaScript, served as written (no build step): API values carry no static types here. */
/**
 * Building DOM without innerHTML: every value from the API becomes text, never markup, so a record or
 * a log line cannot inject script into a page that holds the secret key.
 */

/**
 * Creates an element. `attrs`: attributes, with `on<event>` for listeners, `class`, `hidden` and
 * boolean attributes; `children`: nodes, strings, numbers, arrays, or null/undefined/false (skipped).
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith('on') && typeof value === 'function') {
      element.addEventListener(name.slice(2).toLowerCase(), value);
    } else if (name === 'dataset') {
      Object.assign(element.dataset, value);
    } else if (value === true) {
      element.setAttribute(name, '');
    } else {
      element.setAttribute(name, String(value));
    }
  }
  append(element, children);
  return element;
}

function append(parent, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(parent, child);
    else if (child instanceof Node) parent.append(child);
    else parent.append(document.createTextNode(String(child)));
  }
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Creates an SVG element (same rules as `h`, without listeners). */
export function svg(tag, attrs = {}, ...children) {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs ?? {})) {
    if (value === undefined || value === null || value === false) continue;
    element.setAttribute(name, String(value));
  }
  append(element, children);
  return element;
}

/** Replaces the content of `parent`. */
export function replace(parent, ...children) {
  parent.replaceChildren();
  append(parent, children);
}

/** Says something to screen readers (an aria-live region). */
export function announce(message) {
  const region = document.getElementById('announcer');
  if (!region) return;
  region.textContent = '';
  // A change the live region notices even when the same message repeats.
  setTimeout(() => {
    region.textContent = message;
  }, 30);
}

/** A local, readable date and time, or a dash. */
export function formatTime(iso) {
  if (!iso) return '—';
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  return date.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A `<time>` element with the ISO instant as its machine-readable value. */
export function time(iso) {
  return iso ? h('time', { datetime: iso, title: iso }, formatTime(iso)) : '—';
}

/** Milliseconds as `850 ms`, `12.3 s`, `4 min 5 s`. */
export function formatDuration(ms) {
  if (ms === null || ms === undefined || Number.isNaN(ms)) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

/** An error message box; `role=alert` so it is read out when it appears. */
export function errorBox(error) {
  const message = error instanceof Error ? error.message : String(error);
  return h('p', { class: 'error', role: 'alert' }, message);
}

/** A labelled form control: `<div><label>…</label><control></div>`. */
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

/** A `<select>` of options `[value, label]`, with `value` selected. */
export function select(attrs, options, value) {
  return h(
    'select',
    attrs,
    options.map(([optionValue, label]) => h('option', { value: optionValue, selected: optionValue === value }, label)),
  );
}

/** A page heading that receives focus after navigation, so keyboard and screen reader users land on it. */
export function pageTitle(text) {
  return h('h1', { tabindex: '-1', class: 'page-title' }, text);
}
