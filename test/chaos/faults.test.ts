/**
 * Faults: a full sync with track_deletes from a paginated fake API while its worker process is killed
 * with SIGKILL at random moments, the Temporal dev server is restarted once (state kept in its SQLite
 * file) and Postgres once (in place). Afterwards the cache equals the source exactly. Short in CI
 * (10,000 records, 3 kills); CHAOS_FULL=1 runs 200,000 records and 10 kills. It owns its stack.
 */
import { describe, expect, it } from 'vitest';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { RUN_WORKFLOW_TASK_TIMEOUT_MS, type RunSyncInput, type SyncRunResult } from '../../src/runtime/definitions.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { recordsSync } from '../kit/runtime.js';
import { recordFigures, size } from './lib/figures.js';
import { runResult, superviseWorkers, useOwnStack, type OwnStack } from '../kit/ownStack.js';
import { cursorSync } from '../kit/scripts.js';
import { ENVIRONMENT } from '../kit/testConnections.js';
import { json, startFakeUpstream } from '../kit/upstream.js';
import { bounded, formatEventLine, historyDigest, workflowHistories, writeDiagnostics } from './lib/diagnostics.js';

const TOTAL = size(10_000, 200_000);
const KILLS = size(3, 10);
const EXTRAS = TOTAL / 20; // in the cache from the first run, gone from the source: must be marked deleted
const PAGE = size(100, 200);
const PAGES = TOTAL / PAGE;
// The source answers a page of the run under fire after this long, as a real API would, so that the
// faults land in the middle of the run and not after it (the sync itself moves ~5,000 records/s).
const PAGE_DELAY_MS = size(150, 100);

const pagedSync = cursorSync(PAGE, 'Record', ['id', 'title', 'n']);

interface SourceRecord {
  id: string;
  title: string;
  n: number;
}

/** Version 1 of the source: TOTAL records and EXTRAS more; version 2: the TOTAL, every 7th changed. */
function sourceRecord(version: 1 | 2, index: number): SourceRecord {
  if (index >= TOTAL) return { id: `x${index - TOTAL}`, title: `extra ${index - TOTAL}`, n: index };
  const changed = version === 2 && index % 7 === 0;
  return { id: `r${index}`, title: changed ? `record ${index} v2` : `record ${index}`, n: index };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** What the run under fire must count: every 7th record of version 2 changed, the extras deleted. */
const CHANGED = Math.ceil(TOTAL / 7);
const EXPECTED_SUMMARY = { added: 0, updated: CHANGED, deleted: EXTRAS, unchanged: TOTAL - CHANGED };

/** Records of version 2 a page changes (every 7th index). */
const changedIn = (page: number): number =>
  Array.from({ length: PAGE }, (_, i) => page * PAGE + i).filter((index) => index % 7 === 0).length;

/**
 * Writes what the run under fire did to a file (test/chaos/lib/diagnostics.ts) and a bounded summary to
 * stderr; returns the file's path. Nothing decrypted: histories as Temporal holds them in clear, the
 * records' per-page state (counts and times, not contents), the step ledger's row counts, the pages
 * served and when, the faults, and the workers' output.
 */
async function writeRunDiagnostics(run: {
  error: unknown;
  result: SyncRunResult | undefined;
  own: OwnStack;
  workers: ReturnType<typeof superviseWorkers>;
  workflowId: string;
  runStarted: number;
  pageTimes: Map<number, number[]>;
  done: { kind: string; page: number; ms: number; at: number }[];
}): Promise<string> {
  const { own, workers, runStarted } = run;
  const histories = await bounded('the histories', 60_000, () => workflowHistories(own.client, run.workflowId));
  // A record changed in version 2 is UPDATED at a time after the run started; one the run only saw again
  // keeps its earlier time. Per page, against what it should be.
  const records = await bounded('the records per page', 30_000, async () => {
    const { rows } = await own.pool.query<{
      page: number;
      records: string;
      updated: string;
      first: Date | null;
      last: Date | null;
    }>(
      `SELECT substring(id FROM 2)::int / $1 AS page, count(*) AS records,
              count(*) FILTER (WHERE last_action = 'UPDATED' AND last_modified_at >= $2) AS updated,
              min(last_modified_at) FILTER (WHERE last_modified_at >= $2) AS first,
              max(last_modified_at) FILTER (WHERE last_modified_at >= $2) AS last
         FROM records WHERE sync_name = 'records' AND id LIKE 'r%' GROUP BY 1 ORDER BY 1`,
      [PAGE, new Date(runStarted)],
    );
    return rows.map((row) => ({
      page: row.page,
      records: Number(row.records),
      updated: Number(row.updated),
      changed: changedIn(row.page),
      modifiedMs: row.first && row.last ? [row.first.getTime() - runStarted, row.last.getTime() - runStarted] : null,
    }));
  });
  const ledger = await bounded('the step ledger', 30_000, async () => {
    const { rows } = await own.pool.query<Record<string, unknown>>(
      `SELECT run_id, count(*)::int AS rows, min(step) AS first_step, max(step) AS last_step,
              count(outcome)::int AS outcomes, count(result)::int AS results, max(created_at) AS newest
         FROM script_steps GROUP BY run_id`,
    );
    return rows;
  });

  const pages = [...run.pageTimes].sort(([a], [b]) => a - b);
  const fetchedAgain = pages.filter(([, times]) => times.length > 1);
  const wrongPages = typeof records === 'string' ? [] : records.filter((page) => page.updated !== page.changed);
  const summary = [
    `error: ${String(run.error).slice(0, 500)}`,
    `run result: ${run.result ? JSON.stringify(run.result.models['Record']) : '(none)'}, expected ${JSON.stringify(EXPECTED_SUMMARY)}`,
    `faults (ms since the run started): ${run.done.map((f) => `${f.kind}@page ${f.page} +${f.at} ms (${f.ms} ms)`).join(', ')}`,
    `worker deaths: ${workers.deaths.map((d) => `${d.signal ?? d.code} after ${d.ms} ms`).join(', ') || 'none'}`,
    `pages served: ${pages.length} of ${PAGES}, ${pages.reduce((n, [, times]) => n + times.length, 0)} requests; ` +
      `served more than once: ${fetchedAgain.map(([start, times]) => `cursor ${start} at +${times.join('/+')} ms`).join(', ') || 'none'}`,
    typeof records === 'string'
      ? records
      : `pages whose records updated in this run differ from the changed ones: ${
          wrongPages
            .map((p) => `page ${p.page} (cursor ${p.page * PAGE}): ${p.updated} updated of ${p.changed}`)
            .join(', ') || 'none'
        }`,
    ...(typeof histories === 'string' ? [histories] : histories.flatMap(historyDigest)),
  ].map((line) => (line.length > 2000 ? `${line.slice(0, 2000)}…` : line));

  const path = writeDiagnostics('chaos-faults', {
    summary: summary.join('\n'),
    'pages served (cursor: ms since the run started of each request)': pages
      .map(([start, times]) => `${start}: +${times.join(' +')}`)
      .join('\n'),
    'records per page (updated in this run / changed in version 2; ms of the first and last change)':
      typeof records === 'string'
        ? records
        : records
            .map(
              (p) =>
                `page ${p.page}: ${p.records} records, ${p.updated}/${p.changed} updated, at ${JSON.stringify(p.modifiedMs)}`,
            )
            .join('\n'),
    'step ledger rows per run (counts only)': typeof ledger === 'string' ? ledger : JSON.stringify(ledger, null, 1),
    ...(typeof histories === 'string'
      ? { histories }
      : Object.fromEntries(
          histories.map((h) => [
            `history of ${run.workflowId} run ${h.runId} (${h.status})`,
            h.error ?? h.events.map(formatEventLine).join('\n'),
          ]),
        )),
    "workers' output (the last 8 MiB)": workers.output(),
  });
  process.stderr.write(`[chaos:faults] the run failed; diagnostics in ${path}\n${summary.join('\n')}\n`);
  return path;
}

describe('faults: a full sync survives worker kills and server restarts', () => {
  const ownStack = useOwnStack();

  it(`${TOTAL} records, ${KILLS} SIGKILLs, a Temporal and a Postgres restart: the cache equals the source`, async () => {
    const own = ownStack();
    let version: 1 | 2 = 1;
    const pageHits = new Map<number, number>();
    // When each page of the run under fire was asked for (ms since the run started): for the diagnostics.
    const pageTimes = new Map<number, number[]>();
    let runStarted = 0;
    const api = await startFakeUpstream(async (request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const start = Number(url.searchParams.get('cursor') ?? '0');
      const limit = Number(url.searchParams.get('limit'));
      const total = version === 1 ? TOTAL + EXTRAS : TOTAL;
      if (version === 2) {
        pageHits.set(start, (pageHits.get(start) ?? 0) + 1);
        const times = pageTimes.get(start) ?? [];
        times.push(Date.now() - runStarted);
        pageTimes.set(start, times);
        await sleep(PAGE_DELAY_MS);
      }
      const items = Array.from({ length: Math.max(0, Math.min(limit, total - start)) }, (_, i) =>
        sourceRecord(version, start + i),
      );
      json(response, 200, { items, next: start + limit < total ? String(start + limit) : null });
    });
    const taskQueue = 'chaos-faults';
    const workers = superviseWorkers(own, { taskQueue, apiBaseUrl: api.url });
    try {
      await workers.ready();
      const scriptHash = await createPostgresScriptStore({ db: own.pool }).put(pagedSync, ENVIRONMENT);
      const input: RunSyncInput = {
        definition: recordsSync({
          trackDeletes: true,
          scriptHash,
        }),
        connectionId: 'chaos',
        mode: 'incremental',
      };
      const start = (workflowId: string) =>
        own.client.workflow.start<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
          taskQueue,
          workflowId,
          args: [input],
          workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
        });
      // A result survives a Temporal restart: the long poll is asked again until the run is closed.
      const resultOf = (workflowId: string) => runResult<SyncRunResult>(own.client, workflowId);

      // Run 1, no faults: the cache holds version 1 (with the extras).
      const seedStarted = Date.now();
      // A run id the service would have given (src/temporal/runAuthority.ts), or the run is refused.
      const seedId = syncRunId({ ...input.definition, connectionId: input.connectionId }, 'chaos-seed');
      await start(seedId);
      const seeded = await resultOf(seedId);
      expect(seeded.models['Record']).toMatchObject({ added: TOTAL + EXTRAS, deleted: 0 });
      const seedMs = Date.now() - seedStarted;

      // Run 2 under fire: kills at random points of the pages, one Temporal and one Postgres restart.
      version = 2;
      const faults = [
        ...Array.from({ length: KILLS }, () => 'kill' as const),
        'restart-temporal' as const,
        'restart-postgres' as const,
      ]
        // Server restarts in the middle third, so that the run is surely in flight.
        .map((kind) => ({
          kind,
          at: Math.floor(PAGES * (kind === 'kill' ? 0.05 + Math.random() * 0.85 : 0.3 + Math.random() * 0.4)),
        }))
        .sort((a, b) => a.at - b.at);
      runStarted = Date.now();
      const workflowId = syncRunId({ ...input.definition, connectionId: input.connectionId }, 'chaos-faults');
      await start(workflowId);
      const done: { kind: string; page: number; ms: number; at: number }[] = [];
      let result: SyncRunResult | undefined;
      try {
        for (const fault of faults) {
          const deadline = Date.now() + 120_000;
          while (pageHits.size < fault.at && Date.now() < deadline) await sleep(20);
          const page = pageHits.size;
          const started = Date.now();
          if (fault.kind === 'kill') {
            await workers.kill();
            await workers.ready();
          } else if (fault.kind === 'restart-temporal') {
            await own.restartTemporal();
          } else {
            await own.restartPostgres();
          }
          done.push({ kind: fault.kind, page, ms: Date.now() - started, at: started - runStarted });
          process.stderr.write(`[chaos:faults] ${fault.kind} at page ${page}/${PAGES}: ${Date.now() - started} ms\n`);
        }
        result = await resultOf(workflowId);
        const runMs = Date.now() - runStarted;

        // The cache equals version 2 exactly: every record once with its content, the extras deleted.
        const stored = await own.pool.query<{ id: string; data: SourceRecord; deleted: boolean }>(
          "SELECT id, data, deleted_at IS NOT NULL AS deleted FROM records WHERE sync_name = 'records'",
        );
        const live = stored.rows.filter((row) => !row.deleted);
        const deleted = stored.rows.filter((row) => row.deleted).map((row) => row.id);
        const expected = new Map(Array.from({ length: TOTAL }, (_, i) => [`r${i}`, sourceRecord(2, i)]));
        const liveIds = new Set(live.map((row) => row.id));
        const lost = [...expected.keys()].filter((id) => !liveIds.has(id)).length;
        const wrong = live.filter((row) => {
          const want = expected.get(row.id);
          return !want || want.title !== row.data.title || want.n !== row.data.n;
        });
        const falselyDeleted = deleted.filter((id) => expected.has(id));
        const requests = [...pageHits.values()].reduce((sum, n) => sum + n, 0);

        recordFigures('faults', {
          records: TOTAL,
          deletedInSource: EXTRAS,
          workerKills: done.filter((f) => f.kind === 'kill').length,
          workerDeaths: workers.deaths.length,
          temporalRestartMs: done.find((f) => f.kind === 'restart-temporal')?.ms ?? -1,
          postgresRestartMs: done.find((f) => f.kind === 'restart-postgres')?.ms ?? -1,
          faultsAtPages: done.map((f) => `${f.kind}@${f.page}/${PAGES}`).join(' '),
          seedRunS: Math.round(seedMs / 100) / 10,
          runUnderFireS: Math.round(runMs / 100) / 10,
          pageRequests: requests,
          pagesFetchedTwice: [...pageHits.values()].filter((n) => n > 1).length,
          lost,
          wrongContent: wrong.length,
          duplicated: stored.rows.length - new Set(stored.rows.map((row) => row.id)).size,
          falselyDeleted: falselyDeleted.length,
          runResult: JSON.stringify(result.models['Record']),
        });

        expect(pageHits.size).toBe(PAGES);
        expect(lost).toBe(0);
        expect(wrong).toEqual([]);
        expect(falselyDeleted).toEqual([]);
        expect(live.length).toBe(TOTAL);
        expect(deleted.sort()).toEqual(Array.from({ length: EXTRAS }, (_, i) => `x${i}`).sort());
        expect(stored.rows.length).toBe(TOTAL + EXTRAS); // primary key (scope, id): no duplicate can exist; counted anyway
        expect(result.models['Record']).toEqual(EXPECTED_SUMMARY);
        expect(result.recordCounts).toEqual({ Record: TOTAL });
      } catch (error) {
        // A miscount (once in CI: one page's changed records counted unchanged) is not reproduced at
        // will: what the run did is written down before the test fails.
        const path = await writeRunDiagnostics({
          error,
          result,
          own,
          workers,
          workflowId,
          runStarted,
          pageTimes,
          done,
        }).catch((failed: unknown) => `none: writing them failed (${String(failed)})`);
        if (error instanceof Error) error.message += `\n(diagnostics of the run: ${path})`;
        throw error;
      }
    } finally {
      await workers.stop();
    }
  }, 1_800_000);
});
