/* global document */
/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument --
   Browser code in plain JavaScript, served as written (no build step): API values carry no static types here. */
/**
 * Tabs as the ARIA Authoring Practices describe them: a tablist of buttons with roving tabindex,
 * arrow keys, Home and End to move between tabs, and panels labelled by their tab.
 */
import { h } from './dom.js';

let counter = 0;

/** `panels`: [{ id, label, render(panel) }]; renders the selected panel now and the others on first show. */
export function tabs({ label, panels, selected, onSelect }) {
  const prefix = `tabs${++counter}`;
  const buttons = [];
  const sections = [];
  const rendered = new Set();

  const activate = (index, focus) => {
    panels.forEach((panel, i) => {
      const on = i === index;
      buttons[i].setAttribute('aria-selected', String(on));
      buttons[i].tabIndex = on ? 0 : -1;
      sections[i].hidden = !on;
      if (on && !rendered.has(i)) {
        rendered.add(i);
        Promise.resolve(panel.render(sections[i])).catch((error) => {
          sections[i].append(h('p', { class: 'error', role: 'alert' }, error.message));
        });
      }
    });
    if (focus) buttons[index].focus();
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
    const current = buttons.indexOf(document.activeElement);
    if (current < 0) return;
    const last = buttons.length - 1;
    const next = {
      ArrowRight: current === last ? 0 : current + 1,
      ArrowLeft: current === 0 ? last : current - 1,
      Home: 0,
      End: last,
    }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    activate(next, true);
    onSelect?.(panels[next].id);
  });

  const index = Math.max(
    0,
    panels.findIndex((panel) => panel.id === selected),
  );
  const wrapper = h('div', { class: 'tabs' }, list, sections);
  activate(index, false);
  return wrapper;
}
