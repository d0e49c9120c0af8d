/**
 * Where the `records_save` statement spends its time (issue 31): `npx tsx bench/explainRecordsSave.ts
 * [--page N] [--pages N]`. Saves `--pages` batches of new records (then the same again: unchanged)
 * through the store, with auto_explain logging every nested statement of the function with
 * EXPLAIN (ANALYZE, BUFFERS), and prints the plans of the last batch of each kind, then the raw
 * upsert's plan for the same batch.
 */
import { randomUUID } from 'node:crypto';
import { createPostgresRecordStore } from '../src/records/postgresRecordStore.js';
import { useBenchDatabase } from './lib/database.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { RAW_TABLE_SQL, syntheticRecord } from './lib/syncRecords.js';

const { page, pages } = positiveIntegerFlags({ page: 1000, pages: 5 });
const database = await useBenchDatabase({ poolSize: 1 });
try {
  const { pool } = database;
  const store = createPostgresRecordStore({ db: pool });
  await pool.query(RAW_TABLE_SQL);
  const client = await pool.connect();
  const plans: string[] = [];
  client.on('notice', (notice) => plans.push(notice.message ?? ''));
  // The store's pool has one connection: this client is the one its statements run on once released.
  await client.query(
    "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on; SET auto_explain.log_buffers = on; SET auto_explain.log_nested_statements = on; SET auto_explain.log_timing = on; SET client_min_messages = log",
  );
  client.release();
  const connectionId = randomUUID();
  const scope = { environmentId: 'bench', integrationId: 'bench-api', connectionId, syncName: 'records' };
  for (const kind of ['new', 'unchanged'] as const) {
    for (let p = 0; p < pages; p++) {
      plans.length = 0;
      const records = Array.from({ length: page }, (_, i) => syntheticRecord(p * page + i));
      const started = performance.now();
      await store.saveRecords({
        ...scope,
        model: 'Record',
        runId: 'run-1',
        records,
        step: { runId: 'run-1', step: p + (kind === 'new' ? 0 : pages) },
      });
      const ms = performance.now() - started;
      if (p === pages - 1) {
        console.log(`=== records_save, ${page} ${kind} records, ${ms.toFixed(2)} ms from the client`);
        console.log(plans.join('\n'));
      }
    }
  }
  plans.length = 0;
  const records = Array.from({ length: page }, (_, i) => syntheticRecord(i));
  const raw = await pool.connect();
  raw.on('notice', (notice) => plans.push(notice.message ?? ''));
  await raw
    .query(
      `EXPLAIN (ANALYZE, BUFFERS) INSERT INTO raw_records (connection_id, id, data)
     SELECT $2, r->>'id', r FROM jsonb_array_elements($1::jsonb) AS r
     ON CONFLICT (connection_id, id) DO UPDATE SET data = excluded.data, updated_at = now()`,
      [JSON.stringify(records), randomUUID()],
    )
    .then((result) =>
      console.log('=== raw upsert\n' + result.rows.map((row: Record<string, string>) => row['QUERY PLAN']).join('\n')),
    );
  raw.release();
} finally {
  await database.close();
}
