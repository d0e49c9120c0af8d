/* global document */
/**
 * Tabs as the ARIA Authoring Practices describe them: a tablist of buttons with roving tabindex,
 * arrow keys, Home and End to move between tabs, and panels labelled by their tab.
 */
import { errorBox, h } from './dom.js';

let counter = 0;

/**
 * @typedef {{ id: string, label: string, render: (panel: HTMLElement) => unknown }} Panel
 */

/**
 * Renders the selected panel now and the others on first show.
 * @param {{ label: string, panels: Panel[], selected: string, onSelect?: (id: string) => void }} options
 */
export function tabs({ label, panels, selected, onSelect }) {
  const prefix = `tabs${++counter}`;
  /** @type {HTMLButtonElement[]} */
  const buttons = [];
  /** @type {HTMLDivElement[]} */
  const sections = [];
  /** @type {Set<number>} */
  const rendered = new Set();

  /**
   * @param {number} index
   * @param {boolean} focus
   */
  const activate = (index, focus) => {
    panels.forEach((panel, i) => {
      const on = i === index;
      const button = buttons[i];
      const section = sections[i];
      if (!button || !section) return;
      button.setAttribute('aria-selected', String(on));
      button.tabIndex = on ? 0 : -1;
      section.hidden = !on;
      if (on && !rendered.has(i)) {
        rendered.add(i);
        Promise.resolve(panel.render(section)).catch((/** @type {unknown} */ error) => {
          section.append(errorBox(error));
        });
      }
    });
    if (focus) buttons[index]?.focus();
  };

  panels.forEach((panel, i) => {
    buttons.push(
      h(
        'button',
        {
          type: 'button',
          role: 'tab',
          id: `${prefix}-tab-${panel.id}`,
          'aria-controls': `${prefix}-panel-${panel.id}`,
          onclick: () => {
            activate(i, false);
            onSelect?.(panel.id);
          },
        },
        panel.label,
      ),
    );
    sections.push(
      h('div', {
        role: 'tabpanel',
        id: `${prefix}-panel-${panel.id}`,
        'aria-labelledby': `${prefix}-tab-${panel.id}`,
        tabindex: '0',
        class: 'tabpanel',
        dataset: { tab: panel.id },
      }),
    );
  });

  const list = h('div', { role: 'tablist', 'aria-label': label, class: 'tablist' }, buttons);
  list.addEventListener('keydown', (event) => {
    const current = buttons.findIndex((button) => button === document.activeElement);
    if (current < 0) return;
    const last = buttons.length - 1;
    /** @type {Record<string, number>} */
    const moves = {
      ArrowRight: current === last ? 0 : current + 1,
      ArrowLeft: current === 0 ? last : current - 1,
      Home: 0,
      End: last,
    };
    const next = moves[event.key];
    const panel = next === undefined ? undefined : panels[next];
    if (next === undefined || !panel) return;
    event.preventDefault();
    activate(next, true);
    onSelect?.(panel.id);
  });

  const index = Math.max(
    0,
    panels.findIndex((panel) => panel.id === selected),
  );
  const wrapper = h('div', { class: 'tabs' }, list, sections);
  activate(index, false);
  return wrapper;
}
