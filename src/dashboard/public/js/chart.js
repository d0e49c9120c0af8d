/* eslint-disable @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-call, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-argument --
   Browser code in plain JavaScript, served as written (no build step): API values carry no static types here. */
/**
 * The chart of a sync's recent runs, drawn as inline SVG: per run, its duration (failures marked)
 * and the records it added, updated and deleted. Each run links to its workflow in the Temporal Web
 * UI. A table with the same numbers follows for screen readers and for anyone who wants the figures.
 */
import { formatDuration, formatTime, h, svg } from './dom.js';

const WIDTH = 640;
const PLOT_LEFT = 56;
const PLOT_RIGHT = 8;
const DURATION_TOP = 24;
const DURATION_HEIGHT = 70;
const COUNTS_TOP = 128;
const COUNTS_HEIGHT = 60;
const HEIGHT = COUNTS_TOP + COUNTS_HEIGHT + 22;

/** The Temporal Web UI page of a run, or null when the dashboard has no UI URL configured. */
export function temporalRunUrl(config, runId) {
  if (!config?.temporal_ui_url || !runId) return null;
  return `${config.temporal_ui_url}/namespaces/${encodeURIComponent(config.temporal_namespace ?? 'default')}/workflows/${encodeURIComponent(runId)}`;
}

/** Sums a run's per-model counts. */
export function totals(run) {
  const sum = { added: 0, updated: 0, deleted: 0 };
  for (const counts of Object.values(run.models ?? {})) {
    sum.added += Number(counts.added ?? 0);
    sum.updated += Number(counts.updated ?? 0);
    sum.deleted += Number(counts.deleted ?? 0);
  }
  return sum;
}

function niceMax(value) {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

function describeRun(run) {
  const t = totals(run);
  const parts = [
    `Run ${formatTime(run.started_at)}`,
    run.status === 'failed' ? `failed${run.error ? `: ${run.error.code}: ${run.error.message}` : ''}` : 'succeeded',
    `duration ${formatDuration(run.duration_ms)}`,
    `${t.added} added, ${t.updated} updated, ${t.deleted} deleted`,
  ];
  return parts.join(', ');
}

/**
 * `runs` as the API answers them (newest first or not: drawn oldest to newest, left to right).
 * Returns a figure element.
 */
export function runsChart({ runs, syncName, config }) {
  const ordered = [...runs].sort((a, b) => String(a.started_at).localeCompare(String(b.started_at)));
  const failures = ordered.filter((run) => run.status === 'failed').length;
  const caption = `${syncName}: ${ordered.length} recent run${ordered.length === 1 ? '' : 's'}, ${failures} failed`;
  const figure = h('figure', { class: 'chart', dataset: { sync: syncName } });

  const plotWidth = WIDTH - PLOT_LEFT - PLOT_RIGHT;
  const slot = plotWidth / Math.max(ordered.length, 1);
  const barWidth = Math.max(2, Math.min(28, slot * 0.7));
  const maxDuration = niceMax(Math.max(0, ...ordered.map((run) => Number(run.duration_ms ?? 0))));
  const maxCount = niceMax(
    Math.max(
      0,
      ...ordered.map((run) => {
        const t = totals(run);
        return t.added + t.updated + t.deleted;
      }),
    ),
  );

  const chart = svg('svg', {
    viewBox: `0 0 ${WIDTH} ${HEIGHT}`,
    width: '100%',
    role: 'group',
    'aria-label': `Chart of ${caption}`,
    class: 'runs-chart',
  });
  chart.append(
    svg('text', { x: 0, y: 14, class: 'axis-title' }, 'Duration'),
    svg(
      'text',
      { x: PLOT_LEFT - 6, y: DURATION_TOP + 4, class: 'axis', 'text-anchor': 'end' },
      formatDuration(maxDuration),
    ),
    svg('text', { x: PLOT_LEFT - 6, y: DURATION_TOP + DURATION_HEIGHT, class: 'axis', 'text-anchor': 'end' }, '0'),
    svg('line', {
      x1: PLOT_LEFT,
      x2: WIDTH - PLOT_RIGHT,
      y1: DURATION_TOP + DURATION_HEIGHT,
      y2: DURATION_TOP + DURATION_HEIGHT,
      class: 'baseline',
    }),
    svg('text', { x: 0, y: COUNTS_TOP - 10, class: 'axis-title' }, 'Records added, updated, deleted'),
    svg('text', { x: PLOT_LEFT - 6, y: COUNTS_TOP + 4, class: 'axis', 'text-anchor': 'end' }, String(maxCount)),
    svg('text', { x: PLOT_LEFT - 6, y: COUNTS_TOP + COUNTS_HEIGHT, class: 'axis', 'text-anchor': 'end' }, '0'),
    svg('line', {
      x1: PLOT_LEFT,
      x2: WIDTH - PLOT_RIGHT,
      y1: COUNTS_TOP + COUNTS_HEIGHT,
      y2: COUNTS_TOP + COUNTS_HEIGHT,
      class: 'baseline',
    }),
  );

  ordered.forEach((run, index) => {
    const x = PLOT_LEFT + slot * index + (slot - barWidth) / 2;
    const failed = run.status === 'failed';
    const durationHeight = Math.max(1, (Number(run.duration_ms ?? 0) / maxDuration) * DURATION_HEIGHT);
    const group = svg('g', { class: `run ${failed ? 'failed' : 'success'}` });
    group.setAttribute('data-run-id', run.run_id);
    group.append(
      svg('title', {}, describeRun(run)),
      svg('rect', {
        x,
        y: DURATION_TOP + DURATION_HEIGHT - durationHeight,
        width: barWidth,
        height: durationHeight,
        class: failed ? 'bar-failed' : 'bar-duration',
      }),
    );
    if (failed) {
      // A mark that does not rely on colour alone.
      group.append(
        svg(
          'text',
          {
            x: x + barWidth / 2,
            y: DURATION_TOP + DURATION_HEIGHT - durationHeight - 3,
            class: 'fail-mark',
            'text-anchor': 'middle',
          },
          '✕',
        ),
      );
    }
    const t = totals(run);
    let y = COUNTS_TOP + COUNTS_HEIGHT;
    for (const kind of ['added', 'updated', 'deleted']) {
      const height = (t[kind] / maxCount) * COUNTS_HEIGHT;
      if (height <= 0) continue;
      y -= height;
      group.append(svg('rect', { x, y, width: barWidth, height, class: `bar-${kind}` }));
    }
    const url = temporalRunUrl(config, run.run_id);
    if (url) {
      const link = svg(
        'a',
        {
          href: url,
          target: '_blank',
          rel: 'noopener noreferrer',
          'aria-label': `${describeRun(run)}. Open in the Temporal Web UI.`,
        },
        group,
      );
      chart.append(link);
    } else {
      chart.append(group);
    }
  });

  // When the first and the last run started, under the bars (every run's time is in its tooltip and the table).
  const stamp = (run) => new Date(run.started_at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' });
  const first = ordered[0];
  const last = ordered.at(-1);
  if (first) {
    chart.append(svg('text', { x: PLOT_LEFT, y: HEIGHT - 6, class: 'axis' }, stamp(first)));
  }
  if (last && last !== first) {
    chart.append(
      svg('text', { x: WIDTH - PLOT_RIGHT, y: HEIGHT - 6, class: 'axis', 'text-anchor': 'end' }, stamp(last)),
    );
  }

  const legend = h(
    'ul',
    { class: 'legend', 'aria-label': 'Legend' },
    [
      ['duration', 'Duration'],
      ['failed', 'Failed run (✕)'],
      ['added', 'Added'],
      ['updated', 'Updated'],
      ['deleted', 'Deleted'],
    ].map(([kind, label]) => h('li', {}, h('span', { class: `swatch swatch-${kind}`, 'aria-hidden': 'true' }), label)),
  );

  const table = h(
    'table',
    { class: 'list compact' },
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ['Started', 'Status', 'Duration', 'Added', 'Updated', 'Deleted', 'Error', 'Temporal'].map((c) =>
          h('th', { scope: 'col' }, c),
        ),
      ),
    ),
    h(
      'tbody',
      {},
      [...ordered].reverse().map((run) => {
        const t = totals(run);
        const url = temporalRunUrl(config, run.run_id);
        return h(
          'tr',
          {},
          h('td', {}, formatTime(run.started_at)),
          h('td', {}, h('span', { class: `status status-${run.status}` }, run.status)),
          h('td', {}, formatDuration(run.duration_ms)),
          h('td', {}, t.added),
          h('td', {}, t.updated),
          h('td', {}, t.deleted),
          h('td', {}, run.error ? `${run.error.code}: ${run.error.message}` : '—'),
          h(
            'td',
            {},
            url
              ? h(
                  'a',
                  { href: url, target: '_blank', rel: 'noopener noreferrer' },
                  'Open run',
                  h('span', { class: 'visually-hidden' }, ` ${run.run_id} in the Temporal Web UI`),
                )
              : h('code', {}, run.run_id),
          ),
        );
      }),
    ),
  );

  figure.append(
    h('figcaption', {}, caption),
    chart,
    legend,
    h('details', {}, h('summary', {}, 'Runs as a table'), table),
  );
  return figure;
}
