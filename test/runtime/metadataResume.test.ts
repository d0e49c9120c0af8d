/**
 * A sync that keeps its progress in the connection's metadata (getMetadata at its start, setMetadata
 * after each page: the pattern docs/scripts.md shows with updateMetadata) resumes after a kill on the
 * path its first attempt took. Found by a hostile review (29 November): getMetadata was read anew on
 * the retry, saw what the killed attempt had written (`done: 5`) and asked for page 5 at the index of
 * page 0, which the step ledger answered with page 0. 250 of 1,000 records were never fetched, and with
 * `track_deletes` 250 records still in the source were marked deleted, in a run reported successful.
 * Now getMetadata is a ledgered step (its answer recorded before the metadata moves), and so are
 * getConnection (its record holds the metadata too: the same loss, found by a second review) and
 * getEnvironmentVariables.
 */
import { describe, expect, it } from 'vitest';
import { RUN_WORKFLOW_TASK_TIMEOUT_MS, type RunSyncInput, type SyncRunResult } from '../../src/runtime/definitions.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { runResult, fakeApiWorkers, useOwnStack } from '../kit/ownStack.js';
import { recordsSync } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { ENVIRONMENT } from '../kit/testConnections.js';
import { json, startFakeUpstream } from '../kit/upstream.js';

const CONNECTION = 'meta';
const TASK_QUEUE = 'metadata-resume';
const PAGE = 50;
const PAGES = 20;
/** The worker is killed once this many distinct pages were asked for (inside the run's first workflow task). */
const KILL_AT = 6;

/** The script, reading its progress with `read` (an expression of `svc`). */
const scriptReading = (read: string) =>
  bundle(`async function (svc) {
  const meta = ${read};
  for (let p = meta.done ?? 0; p < ${PAGES}; p++) {
    const res = await svc.get({ endpoint: '/records', params: { cursor: String(p * ${PAGE}), limit: ${PAGE} } });
    await svc.batchSave(res.data.items, 'Record');
    await svc.setMetadata({ done: p + 1 });
  }
  await svc.setMetadata({});
}`);

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// The connection's record holds its metadata too (the second hostile review). One stack each: both
// cases use the same environment, connection and sync.
describe.each([
  ['svc.getMetadata()', 'await svc.getMetadata()'],
  ['svc.getConnection().metadata', '(await svc.getConnection()).metadata ?? {}'],
])('a sync whose progress is in the metadata (read with %s), its worker killed mid-run', (_name, read) => {
  const ownStack = useOwnStack();

  it('stores every record once, counts them exactly and marks none deleted', async () => {
    const script = scriptReading(read);
    const own = ownStack();
    const hits = new Map<number, number>();
    const api = await startFakeUpstream(async (request, response) => {
      const start = Number(new URL(request.url ?? '/', 'http://x').searchParams.get('cursor') ?? '0');
      hits.set(start, (hits.get(start) ?? 0) + 1);
      await sleep(100);
      const items = Array.from({ length: PAGE }, (_, i) => ({ id: `r${start + i}`, n: start + i }));
      json(response, 200, { items });
    });
    const workers = await fakeApiWorkers(own, api.url, {
      taskQueue: TASK_QUEUE,
      environmentName: 'meta',
      connectionId: CONNECTION,
      apiKey: 'meta-key',
    });
    try {
      const scriptHash = await createPostgresScriptStore({ db: own.pool }).put(script, ENVIRONMENT);
      const input: RunSyncInput = {
        definition: recordsSync({ scriptHash, trackDeletes: true }),
        connectionId: CONNECTION,
        mode: 'incremental',
      };
      const start = (suffix: string) => {
        const workflowId = syncRunId({ ...input.definition, connectionId: CONNECTION }, suffix);
        return own.client.workflow
          .start<(i: RunSyncInput) => Promise<SyncRunResult>>('runSync', {
            taskQueue: TASK_QUEUE,
            workflowId,
            args: [input],
            workflowTaskTimeout: RUN_WORKFLOW_TASK_TIMEOUT_MS,
          })
          .then(() => workflowId);
      };
      // A clean first run fills the cache and leaves the metadata at {}.
      const seed = await runResult<SyncRunResult>(own.client, await start('metadata-seed'));
      expect(seed.models['Record']).toMatchObject({ added: PAGE * PAGES, deleted: 0 });
      hits.clear();

      const workflowId = await start('metadata-killed');
      while (hits.size < KILL_AT) await sleep(5);
      await workers.kill();
      await workers.ready();
      const result = await runResult<SyncRunResult>(own.client, workflowId);

      const stored = await own.pool.query<{ n: string }>(
        "SELECT count(*) AS n FROM records WHERE sync_name = 'records' AND deleted_at IS NULL",
      );
      const requests = [...hits.values()].reduce((sum, n) => sum + n, 0);
      console.log(
        `[metadataResume] ${JSON.stringify(result.models['Record'])}; stored ${stored.rows[0]!.n}; ` +
          `${requests} requests for ${hits.size} pages`,
      );
      expect(Number(stored.rows[0]!.n)).toBe(PAGE * PAGES);
      // Every page once in the counts: the same records as the seed's, none changed, none deleted.
      expect(result.models['Record']).toEqual({ added: 0, updated: 0, unchanged: PAGE * PAGES, deleted: 0 });
      // Every page was asked for; at most the one in flight at the kill twice.
      expect(hits.size).toBe(PAGES);
      expect(requests).toBeLessThanOrEqual(PAGES + 1);
    } finally {
      await workers.stop();
    }
  }, 300_000);
});
