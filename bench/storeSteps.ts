/**
 * What the records store costs inside one batchSave step (issue 17), without Temporal:
 * `npx tsx bench/storeSteps.ts [--records N] [--page N] [--bytes N] [--rounds N]`.
 *
 * The same fresh records in the same pages, per variant, interleaved over rounds (ms per page, mean):
 * - raw: bench/sync.ts's comparator, one INSERT … ON CONFLICT per page into a plain table;
 * - prepare: the store's JavaScript work only (canonical JSON, md5, key checks), no database;
 * - store: RecordStore.saveRecords without a step (one statement, records_save: run fence, scope
 *   lock, scope-sync link, change detection, writes);
 * - store+ledger: as the saveRecords activity calls it, with its step (the ledger row taken in the
 *   same statement);
 * - one statement: the same rows into the same `records` table by one INSERT … ON CONFLICT that
 *   detects changes by hash in SQL (an indication of what fewer round trips give; not the store's
 *   full semantics: unchanged records are not stamped with the run).
 */
import { randomUUID } from 'node:crypto';
import { canonicalRecordJson, contentHash, recordKey } from '../src/records/encoding.js';
import { createPostgresRecordStore } from '../src/records/postgresRecordStore.js';
import { useBenchDatabase } from './lib/database.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { formatCount, line, nowMs } from './lib/stats.js';
import { RAW_TABLE_SQL, rawUpsert, syntheticRecord } from './lib/syncRecords.js';

const { records, page, bytes, rounds } = positiveIntegerFlags({ records: 20_000, page: 100, bytes: 100, rounds: 3 });
if (records > 50_000) throw new Error('--records is capped at 50,000');

const makeRecord = (n: number) => syntheticRecord(n, bytes);
const pages: Record<string, unknown>[][] = [];
for (let start = 0; start < records; start += page) {
  pages.push(Array.from({ length: Math.min(page, records - start) }, (_, i) => makeRecord(start + i)));
}

const database = await useBenchDatabase({ poolSize: 4 });
const { pool } = database;
const store = createPostgresRecordStore({ db: pool });
await pool.query(RAW_TABLE_SQL);

type Variant = (
  batch: Record<string, unknown>[],
  run: { connectionId: string; runId: string; step: number },
) => Promise<unknown>;
const scope = (connectionId: string) => ({
  environmentId: 'bench',
  integrationId: 'bench-api',
  connectionId,
  syncName: 'records',
});

const variants: Record<string, Variant> = {
  raw: (batch, { connectionId }) => rawUpsert(pool, connectionId, batch),
  prepare: async (batch) =>
    batch.map((record, index) => {
      const where = { index, model: 'Record' };
      const json = canonicalRecordJson(record, where);
      return { key: recordKey(record['id'], where), json, hash: contentHash(json) };
    }),
  store: (batch, { connectionId, runId }) =>
    store.saveRecords({ ...scope(connectionId), model: 'Record', runId, records: batch }),
  // As the saveRecords activity calls it: once per step, the ledger row in the same statement.
  'store+ledger': (batch, { connectionId, runId, step }) =>
    store.saveRecords({ ...scope(connectionId), model: 'Record', runId, records: batch, step: { runId, step } }),
  'one statement': async (batch, { connectionId, runId }) => {
    const rows = batch.map((record, index) => {
      const json = canonicalRecordJson(record, { index, model: 'Record' });
      return `{"i":${JSON.stringify(recordKey(record['id'], { index, model: 'Record' }))},"h":"${contentHash(json)}","d":${json}}`;
    });
    return pool.query(
      `WITH s AS (
         INSERT INTO record_scopes (environment_id, integration_id, connection_id, model) VALUES ('bench', 'one', $1, 'Record')
         ON CONFLICT (environment_id, integration_id, connection_id, model) DO UPDATE SET model = excluded.model
         RETURNING scope_id),
       w AS (
         INSERT INTO records (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id)
         SELECT s.scope_id, u.i, u.d, u.h, 'records', now(), now(), 'ADDED', $3 FROM s, json_to_recordset($2::json) AS u(i text, h uuid, d json)
         ON CONFLICT (scope_id, id) DO UPDATE SET data = excluded.data, data_hash = excluded.data_hash,
           last_modified_at = excluded.last_modified_at, last_action = 'UPDATED', last_run_id = excluded.last_run_id,
           deleted_at = NULL, position = nextval('record_positions')
         WHERE records.data_hash <> excluded.data_hash OR records.deleted_at IS NOT NULL
         RETURNING (xmax = 0) AS added)
       SELECT count(*) FILTER (WHERE added) AS added, count(*) FILTER (WHERE NOT added) AS updated FROM w`,
      [connectionId, `[${rows.join(',')}]`, runId],
    );
  },
};

try {
  console.log(
    `records store per batchSave step: ${formatCount(records)} records of ~${bytes} bytes, pages of ${page}\n  (${database.version})`,
  );
  const totals = new Map<string, number[]>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, variant] of Object.entries(variants)) {
      const connectionId = `bench-${randomUUID()}`;
      const runId = `run-${randomUUID()}`;
      await store.beginRun({ ...scope(connectionId), runId });
      const started = nowMs();
      for (let step = 0; step < pages.length; step++) await variant(pages[step]!, { connectionId, runId, step });
      const ms = (nowMs() - started) / pages.length;
      totals.set(name, [...(totals.get(name) ?? []), ms]);
    }
  }
  const raw = mean(totals.get('raw')!);
  for (const [name, samples] of totals) {
    const ms = mean(samples);
    console.log(
      line(
        name,
        `${ms.toFixed(2)} ms per page (${samples.map((s) => s.toFixed(2)).join(' / ')}), ${formatCount((page / ms) * 1000)} records/s, ${(ms / raw).toFixed(2)}× raw`,
      ),
    );
  }
} finally {
  await database.close();
}

function mean(samples: number[]): number {
  return samples.reduce((sum, s) => sum + s, 0) / samples.length;
}
