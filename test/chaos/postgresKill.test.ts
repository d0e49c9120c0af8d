/**
 * Postgres killed: SIGKILL of the postmaster in the middle of a full sync (issue 16, finding 7: the
 * worker died on an unhandled pg client 'error' event). The worker process (supervised, as in
 * faults.test.ts) and the API in this process must both live through it: while Postgres is gone the
 * API answers 503 `database_unreachable`, and once it is back (crash recovery in place, same port)
 * the run finishes and the cache holds every record of the source exactly once. Short in CI (3,000
 * records); CHAOS_FULL=1 runs 30,000. It owns its stack.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import pg from 'pg';
import { Encryptor } from '../../src/connections/encryption.js';
import { RUN_WORKFLOW_TASK_TIMEOUT_MS, type RunSyncInput, type SyncRunResult } from '../../src/runtime/definitions.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { createService } from '../../src/service.js';
import { loadSettings } from '../../src/settings.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { recordsSync } from '../kit/runtime.js';
import { recordFigures, size } from './lib/figures.js';
import { runResult, superviseWorkers, useOwnStack } from '../kit/ownStack.js';
import { cursorSync } from '../kit/scripts.js';
import { ENVIRONMENT, fakeApiCatalog, INTEGRATION } from '../kit/testConnections.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const TOTAL = size(3_000, 30_000);
const PAGE = 100;
const PAGES = TOTAL / PAGE;
// Each page answers after this long, so that the kill lands in the middle of the run.
const PAGE_DELAY_MS = 100;
const KILL_AT_PAGE = Math.floor(PAGES / 3);
const CONNECTION = 'pgkill';

const pagedSync = cursorSync(PAGE, 'Record', ['id', 'title']);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('Postgres killed with SIGKILL in the middle of a sync', () => {
  const ownStack = useOwnStack();

  it(`the worker and the API live through it, and all ${TOTAL} records arrive exactly once`, async () => {
    const own = ownStack();
    const pageHits = new Map<number, number>();
    const api = await startFakeUpstream(async (request, response) => {
      const url = new URL(request.url ?? '/', 'http://x');
      const start = Number(url.searchParams.get('cursor') ?? '0');
      pageHits.set(start, (pageHits.get(start) ?? 0) + 1);
      await sleep(PAGE_DELAY_MS);
      const items = Array.from({ length: Math.max(0, Math.min(PAGE, TOTAL - start)) }, (_, i) => ({
        id: `r${start + i}`,
        title: `record ${start + i}`,
      }));
      json(response, 200, { items, next: start + PAGE < TOTAL ? String(start + PAGE) : null });
    });

    // The API of the service in this process, over the same database.
    const service = await createService(
      loadSettings({
        DATABASE_URL: own.databaseUrl,
        TEMPORAL_ADDRESS: own.temporalAddress,
        TEMPORAL_NAMESPACE: own.namespace,
        TEMPORAL_TASK_QUEUE: 'chaos-pgkill',
        SERVICE_ROLE: 'api',
        PORT: '0',
      }),
      {
        db: own.pool,
        encryptor: new Encryptor([randomBytes(32)]),
        catalog: fakeApiCatalog(api.url),
        log: () => undefined,
        apiDeps: { logger: { info: () => undefined, error: () => undefined } },
      },
    );
    await service.start();
    const apiUrl = service.apiUrl ?? '';
    const { connections } = service.parts;
    // The environment the runtime tests' definitions name, so that the API reads the run's records.
    const { secretKey } = await connections.environments.create({ name: 'chaos', id: ENVIRONMENT });
    await connections.integrations.upsert(ENVIRONMENT, { id: INTEGRATION, provider: INTEGRATION });
    await connections.service.importConnection({
      environmentId: ENVIRONMENT,
      integrationId: INTEGRATION,
      connectionId: CONNECTION,
      credentials: { type: 'API_KEY', apiKey: 'chaos-key' },
    });
    const get = async (path: string) => {
      const response = await fetch(`${apiUrl}${path}`, {
        headers: {
          authorization: `Bearer ${secretKey}`,
          'connection-id': CONNECTION,
          'provider-config-key': INTEGRATION,
        },
        signal: AbortSignal.timeout(30_000),
      });
      return { status: response.status, body: (await response.json()) as Record<string, unknown> };
    };

    const workers = superviseWorkers(own, { taskQueue: 'chaos-pgkill', apiBaseUrl: api.url });
    try {
      await workers.ready();
      const scriptHash = await createPostgresScriptStore({ db: own.pool }).put(pagedSync, ENVIRONMENT);
      const input: RunSyncInput = {
        definition: recordsSync({ scriptHash }),
        connectionId: CONNECTION,
        mode: 'incremental',
      };
      const workflowId = syncRunId({ ...input.definition, connectionId: input.connectionId }, 'chaos-pgkill');
      const runStarted = Date.now();
      await own.client.workflow.start<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
        taskQueue: 'chaos-pgkill',
        workflowId,
        args: [input],
        workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
      });

      const deadline = Date.now() + 120_000;
      while (pageHits.size < KILL_AT_PAGE && Date.now() < deadline) await sleep(20);
      // The kill lands while a worker connection is inside a transaction (a batch being written): a
      // client checked out of the pool is the one whose 'error' event nobody listened to.
      const watcher = new pg.Client({ connectionString: own.databaseUrl });
      watcher.on('error', () => undefined);
      await watcher.connect();
      let killedInTransaction = false;
      while (!killedInTransaction && Date.now() < deadline) {
        const { rows } = await watcher.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'runtime-test-worker'
             AND xact_start IS NOT NULL AND (state = 'idle in transaction' OR xact_start < query_start)`,
        );
        killedInTransaction = (rows[0]?.n ?? 0) > 0;
      }
      const killedAtPage = pageHits.size;
      const killMs = await own.killPostgres();
      await watcher.end().catch(() => undefined);

      // While Postgres is gone: the API answers, with a 503 that says so, instead of dying or hanging.
      const downHealth = await get('/health');
      const downRecords = await get('/records?model=Record');
      const recoverMs = await own.recoverPostgres();
      process.stderr.write(
        `[chaos:postgres-kill] killed at page ${killedAtPage}/${PAGES} (${killMs} ms), recovered in ${recoverMs} ms\n`,
      );

      const result = await runResult<SyncRunResult>(own.client, workflowId);
      const runMs = Date.now() - runStarted;

      const stored = await own.pool.query<{ id: string; data: { title: string } }>(
        "SELECT id, data FROM records WHERE sync_name = 'records'",
      );
      const ids = new Set(stored.rows.map((row) => row.id));
      const lost = Array.from({ length: TOTAL }, (_, i) => `r${i}`).filter((id) => !ids.has(id));
      const wrong = stored.rows.filter((row) => row.data.title !== `record ${row.id.slice(1)}`);
      // Through the API too, once it is back: every record, once.
      const served: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await get(`/records?model=Record&limit=1000${cursor ? `&cursor=${cursor}` : ''}`);
        expect(page.status, JSON.stringify(page.body)).toBe(200);
        served.push(...(page.body['records'] as { id: string }[]).map((record) => record.id));
        cursor = page.body['next_cursor'] as string | null;
      } while (cursor);
      const summary = result.models['Record'];

      recordFigures('postgres-kill', {
        records: TOTAL,
        killedAtPage: `${killedAtPage}/${PAGES}`,
        killedInTransaction,
        postmasterGoneMs: killMs,
        recoveryMs: recoverMs,
        runS: Math.round(runMs / 100) / 10,
        workerDeaths: workers.deaths.length,
        apiWhileDown: `${downHealth.status} ${JSON.stringify(downHealth.body)}`,
        pagesFetchedTwice: [...pageHits.values()].filter((n) => n > 1).length,
        lost: lost.length,
        duplicated: stored.rows.length - ids.size,
        servedByApi: served.length,
        runResult: JSON.stringify(summary),
      });

      expect(killedInTransaction).toBe(true);
      expect(workers.deaths).toEqual([]);
      expect(downHealth).toMatchObject({ status: 503, body: { error: { code: 'database_unreachable' } } });
      expect(downRecords).toMatchObject({ status: 503, body: { error: { code: 'database_unreachable' } } });
      expect(lost).toEqual([]);
      expect(wrong).toEqual([]);
      expect(stored.rows.length).toBe(TOTAL);
      expect(new Set(served).size).toBe(TOTAL);
      expect(served.length).toBe(TOTAL);
      // Each record added once; a batch whose write committed just before the kill may be written
      // again by its retry, and then counts as unchanged, never as a second addition.
      expect(summary).toMatchObject({ updated: 0, deleted: 0 });
      expect((summary?.added ?? 0) + (summary?.unchanged ?? 0)).toBe(TOTAL);
      expect(result.recordCounts).toEqual({ Record: TOTAL });
    } finally {
      await workers.stop();
      await service.stop();
    }
  }, 900_000);
});
