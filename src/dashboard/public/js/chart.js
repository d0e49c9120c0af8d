/* global document, window, getComputedStyle, ResizeObserver */
/**
 * The chart of a sync's recent runs, drawn by uPlot (served from node_modules at vendor/uplot.esm.js):
 * per run, oldest to newest, its duration (failed runs red and marked ✕, so colour is not the only
 * signal) and under it the records it added, updated and deleted, stacked. The two plots share one
 * cursor: hovering a run shows its numbers in both legends and its summary under the plots, and clicking
 * it opens its workflow in the Temporal Web UI. A table with the same numbers, and a link per run,
 * follows for keyboard and screen reader users and for anyone who wants the figures.
 */
import uPlot from '../vendor/uplot.esm.js';
import { temporalRunUrl } from './api.js';
import { formatDuration, formatTime, h } from './dom.js';
/** @import { DashboardConfig, ErrorBody, WriteSummary } from './api.js' */

/**
 * One run as GET /sync/runs answers it (src/api/routes/syncs/getSyncRuns.ts).
 * @typedef {Api.SyncRun} Run
 */

const WIDTH = 640;
const DURATION_HEIGHT = 150;
const COUNTS_HEIGHT = 130;
const BAR = uPlot.paths.bars?.({ size: [0.7, 28] });
let charts = 0;

/**
 * Sums a run's per-model counts.
 * @param {Run} run
 */
export function totals(run) {
  const sum = { added: 0, updated: 0, deleted: 0 };
  for (const counts of Object.values(run.models ?? {})) {
    sum.added += Number(counts.added ?? 0);
    sum.updated += Number(counts.updated ?? 0);
    sum.deleted += Number(counts.deleted ?? 0);
  }
  return sum;
}

/**
 * The smallest of 1, 2, 2.5, 5 × 10ⁿ at or above `value`: the top of an axis.
 * @param {number} value
 */
function niceMax(value) {
  if (value <= 0) return 1;
  const magnitude = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * magnitude >= value) return step * magnitude;
  return 10 * magnitude;
}

/** @param {Run} run */
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
 * A colour of styles.css (`--duration`, `--danger`, …): the canvas needs it as a value.
 * @param {string} name
 * @param {string} fallback
 */
function colour(name, fallback) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
}

/**
 * Integer steps for the x axis (runs) and the counts axis (records).
 * @type {number[]}
 */
const WHOLE_STEPS = [1, 2, 5].flatMap((step) => [1, 10, 100, 1000, 10_000, 100_000].map((power) => step * power));

/**
 * `runs` as the API answers them (newest first or not: drawn oldest to newest, left to right).
 * Returns a figure element; the plots follow its width once it is in the page.
 * @param {{ runs: Run[], syncName: string, config: DashboardConfig | null }} options
 */
export function runsChart({ runs, syncName, config }) {
  const ordered = [...runs].sort((a, b) => String(a.started_at).localeCompare(String(b.started_at)));
  const failures = ordered.filter((run) => run.status === 'failed').length;
  const caption = `${syncName}: ${ordered.length} recent run${ordered.length === 1 ? '' : 's'}, ${failures} failed`;
  const counts = ordered.map(totals);
  const urls = ordered.map((run) => temporalRunUrl(config, run.run_id));
  const x = ordered.map((_run, index) => index);

  const muted = colour('--muted', '#57606a');
  const grid = colour('--border', '#d0d7de');
  const failedColour = colour('--danger', '#b42318');
  /** @type {uPlot.Axis} */
  const xAxis = {
    stroke: muted,
    grid: { show: false },
    ticks: { stroke: grid },
    incrs: WHOLE_STEPS,
    // When each run started; every run's date and time is in the summary and the table.
    values: (_u, splits) =>
      splits.map((split) => {
        const run = Number.isInteger(split) ? ordered[split] : undefined;
        return run
          ? new Date(run.started_at).toLocaleTimeString(undefined, { hour: '2-digit', minute: '2-digit' })
          : '';
      }),
  };
  /** @type {uPlot.Axis} */
  const yAxis = { stroke: muted, grid: { stroke: grid, width: 1 }, ticks: { show: false }, size: 64 };
  /** @type {uPlot.Scale} */
  const xScale = { time: false, range: () => [-0.5, Math.max(ordered.length, 1) - 0.5] };
  const cursor = {
    sync: { key: `runs-${++charts}` },
    drag: { x: false, y: false, setScale: false },
    points: { show: false },
  };
  /** @type {uPlot.Series} The x series (each run's index): the legend shows when the run started. */
  const runSeries = {
    label: 'Run',
    value: (_u, index) => {
      const run = ordered[index ?? -1];
      return run ? formatTime(run.started_at) : '—';
    },
  };
  const linked = urls.some(Boolean);
  const detail = h(
    'p',
    { class: 'chart-run meta' },
    `Point at a run for its details${linked ? '; click it to open it in the Temporal Web UI' : ''}.`,
  );

  /** @param {uPlot} u */
  const showRun = (u) => {
    const index = u.cursor.idx ?? -1;
    const run = ordered[index];
    if (run)
      detail.textContent = `${describeRun(run)}.${urls[index] ? ' Click to open it in the Temporal Web UI.' : ''}`;
  };
  /** @type {uPlot.Hooks.Arrays} */
  const hooks = { setCursor: [showRun] };

  const durations = new uPlot(
    {
      width: WIDTH,
      height: DURATION_HEIGHT,
      title: 'Duration',
      cursor,
      hooks: {
        ...hooks,
        // ✕ above each failed run's bar.
        draw: [
          (u) => {
            const { ctx } = u;
            ctx.save();
            ctx.fillStyle = failedColour;
            ctx.font = `bold ${Math.round(12 * uPlot.pxRatio)}px sans-serif`;
            ctx.textAlign = 'center';
            ctx.textBaseline = 'bottom';
            ordered.forEach((run, index) => {
              if (run.status !== 'failed') return;
              ctx.fillText(
                '✕',
                u.valToPos(index, 'x', true),
                u.valToPos(run.duration_ms, 'y', true) - 2 * uPlot.pxRatio,
              );
            });
            ctx.restore();
          },
        ],
      },
      scales: { x: xScale, y: { range: (_u, _min, max) => [0, niceMax(max * 1.15)] } },
      axes: [xAxis, { ...yAxis, values: (_u, splits) => splits.map((ms) => formatDuration(ms)) }],
      series: [
        runSeries,
        {
          label: 'Duration',
          fill: colour('--duration', '#6e56cf'),
          stroke: colour('--duration', '#6e56cf'),
          paths: BAR,
          points: { show: false },
          value: (_u, ms) => formatDuration(ms),
        },
        {
          label: 'Failed run (✕)',
          fill: failedColour,
          stroke: failedColour,
          paths: BAR,
          points: { show: false },
          value: (_u, ms) => formatDuration(ms),
        },
      ],
    },
    [
      x,
      ordered.map((run) => (run.status === 'failed' ? null : run.duration_ms)),
      ordered.map((run) => (run.status === 'failed' ? run.duration_ms : null)),
    ],
  );

  // Stacked: each bar is drawn from zero to its running total, the largest first, so each kind shows
  // as its own band; the legend says the kind's own number.
  const stacks = {
    added: counts.map((t) => t.added),
    updated: counts.map((t) => t.added + t.updated),
    deleted: counts.map((t) => t.added + t.updated + t.deleted),
  };
  /**
   * @param {string} label
   * @param {'added' | 'updated' | 'deleted'} kind
   * @returns {uPlot.Series}
   */
  const countSeries = (label, kind) => ({
    label,
    fill: colour(`--${kind}`, '#57606a'),
    stroke: colour(`--${kind}`, '#57606a'),
    paths: BAR,
    points: { show: false },
    value: (_u, _v, _series, index) => (index === null ? '—' : String(counts[index]?.[kind] ?? '—')),
  });
  const records = new uPlot(
    {
      width: WIDTH,
      height: COUNTS_HEIGHT,
      title: 'Records added, updated, deleted',
      cursor,
      hooks,
      scales: { x: xScale, y: { range: (_u, _min, max) => [0, niceMax(max)] } },
      axes: [xAxis, { ...yAxis, incrs: WHOLE_STEPS }],
      series: [
        runSeries,
        countSeries('Deleted', 'deleted'),
        countSeries('Updated', 'updated'),
        countSeries('Added', 'added'),
      ],
    },
    [x, stacks.deleted, stacks.updated, stacks.added],
  );

  const plots = h(
    'div',
    { class: 'runs-chart', role: 'group', 'aria-label': `Chart of ${caption}` },
    durations.root,
    records.root,
  );
  if (linked) plots.classList.add('linked');
  for (const u of [durations, records]) {
    u.over.addEventListener('click', () => {
      const url = urls[u.cursor.idx ?? -1];
      if (url) window.open(url, '_blank', 'noopener,noreferrer');
    });
  }

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
      ordered
        .map((run, index) => {
          const t = counts[index] ?? totals(run);
          const url = urls[index];
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
        })
        .reverse(),
    ),
  );

  const figure = h(
    'figure',
    { class: 'chart', dataset: { sync: syncName } },
    h('figcaption', {}, caption),
    plots,
    detail,
    h('details', {}, h('summary', {}, 'Runs as a table'), table),
  );
  // The plots take the figure's width once it is laid out, and follow it; a chart taken out of the page
  // (redrawn after a run) lets go of its plots.
  const resized = new ResizeObserver(() => {
    if (!plots.isConnected) {
      resized.disconnect();
      durations.destroy();
      records.destroy();
      return;
    }
    const width = Math.floor(plots.clientWidth);
    if (width <= 0) return;
    if (width !== durations.width) durations.setSize({ width, height: DURATION_HEIGHT });
    if (width !== records.width) records.setSize({ width, height: COUNTS_HEIGHT });
  });
  resized.observe(plots);
  return figure;
}
