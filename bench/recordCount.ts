/**
 * What a run's `countRecords` step costs as a connection's records grow, and what keeping the count
 * costs the writes (issue 31): `npx tsx bench/recordCount.ts [--max N] [--calls N] [--batches N]
 * [--pairs N] [--purge N]`.
 *
 * 1. One scope (a connection and model) is filled through the store, in batches of 1000, to 1,000, then
 *    10,000, then … `--max` records (every tenth deleted again, as a sync's deletes leave them). At
 *    each size, `--calls` times each, alternating: the store's count (kept by its writers, migration
 *    20261128140000), the statement a run used before (`count(*)` of the scope's live records), and the
 *    physical limit of any count kept in a row: one primary-key read of the scope's row. Both counts
 *    must agree at every size.
 * 2. The write path, before and after: `--batches` batches of 1000 new records, then the same again
 *    unchanged (a later run), saved by the previous `records_save_page` with no count triggers
 *    (migration 20261127160000) and by this one with them, in `--pairs` pairs of phases (ABBA ABBA …);
 *    then the triggers alone, for a writer that announces itself: plain statements inserting 1000 rows
 *    and updating them, with and without the triggers (8 pairs of phases of 10, ABBA).
 * 3. The purge of an erased connection of `--purge` records of ~1 KB that the table's statistics do not
 *    know (written after an ANALYZE, as most erased ones are): the previous statement, then the store's.
 */
import { randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { loadMigrations } from '../src/db/migrate.js';
import { createPostgresRecordStore, SCOPE_ID_SQL, scopeParams } from '../src/records/postgresRecordStore.js';
import { useBenchDatabase } from './lib/database.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { formatCount, line, nowMs, summarize } from './lib/stats.js';
import { syntheticRecord } from './lib/syncRecords.js';

const { max, calls, batches, pairs, purge } = positiveIntegerFlags({
  max: 1_000_000,
  calls: 50,
  batches: 20,
  pairs: 4,
  purge: 40_000,
});

const migration = (name: string): string => {
  const found = loadMigrations().find((m) => m.name === name);
  if (!found) throw new Error(`migration ${name} not found`);
  return found.sql;
};
const previousSave = migration('20261127160000_records_save_page').replace(
  'CREATE FUNCTION',
  'CREATE OR REPLACE FUNCTION',
);
const counts = migration('20261128140000_record_scope_counts');
const currentSave = /CREATE OR REPLACE FUNCTION records_save_page[\s\S]*\$\$;/.exec(counts)?.[0];
const triggers = counts.match(/CREATE TRIGGER[\s\S]*?record_scope_count_unknown\(\);/g);
if (!currentSave || triggers?.length !== 4)
  throw new Error('the count migration no longer has the shape this bench expects');

const database = await useBenchDatabase({ poolSize: 2 });
try {
  const { pool } = database;
  const store = createPostgresRecordStore({ db: pool });
  const scope = {
    environmentId: 'bench',
    integrationId: 'bench-api',
    connectionId: randomUUID(),
    syncName: 'records',
    model: 'Record',
  };
  const params = scopeParams(scope);
  const counted = () =>
    pool
      .query<{ n: string }>(
        `SELECT count(*) AS n FROM records WHERE scope_id = (${SCOPE_ID_SQL}) AND deleted_at IS NULL`,
        params,
      )
      .then((result) => Number(result.rows[0]!.n));
  const oneRow = () => pool.query(SCOPE_ID_SQL, params);
  const load = () => loadavg()[0]!.toFixed(1);
  console.log(`countRecords as a scope grows (${database.version}; load average ${load()})`);
  console.log(
    '  live records   kept count p50   count(*) p50   one-row read p50   count(*) ÷ kept   kept ÷ one-row read',
  );
  let stored = 0;
  for (let size = 1000; size <= max; size *= 10) {
    while (stored < size) {
      const records = Array.from({ length: 1000 }, (_, i) => syntheticRecord(stored + i));
      await store.saveRecords({ ...scope, runId: 'run-1', records });
      const deleted = records.filter((_, i) => i % 10 === 0).map((record) => ({ id: record['id'] }));
      await store.deleteRecords({ ...scope, runId: 'run-1', records: deleted });
      stored += 1000;
    }
    await pool.query('VACUUM ANALYZE records');
    const times = { kept: [] as number[], counted: [] as number[], oneRow: [] as number[] };
    for (let call = 0; call < calls; call++) {
      let started = nowMs();
      const keptCount = await store.countRecords(scope);
      times.kept.push(nowMs() - started);
      started = nowMs();
      const truth = await counted();
      times.counted.push(nowMs() - started);
      started = nowMs();
      await oneRow();
      times.oneRow.push(nowMs() - started);
      if (keptCount !== truth) throw new Error(`at ${size} records the kept count is ${keptCount}, count(*) ${truth}`);
    }
    const [k, c, r] = [summarize(times.kept).p50, summarize(times.counted).p50, summarize(times.oneRow).p50];
    console.log(
      `  ${formatCount(size * 0.9).padStart(12)}   ${k.toFixed(3).padStart(11)} ms   ${c.toFixed(3).padStart(9)} ms   ${r.toFixed(3).padStart(13)} ms   ${(c / k).toFixed(1).padStart(14)}×   ${(k / r).toFixed(2).padStart(18)}×`,
    );
  }

  // 2. The write path, before and after, in alternating phases.
  const become = async (version: 'before' | 'after'): Promise<void> => {
    await pool.query(
      'DROP TRIGGER IF EXISTS record_scope_count_insert ON records; DROP TRIGGER IF EXISTS record_scope_count_update ON records; DROP TRIGGER IF EXISTS record_scope_count_delete ON records; DROP TRIGGER IF EXISTS record_scope_count_truncate ON records',
    );
    await pool.query(version === 'before' ? previousSave : currentSave);
    if (version === 'after') for (const trigger of triggers) await pool.query(trigger);
  };
  const saves: Record<'before' | 'after', { fresh: number[]; again: number[] }> = {
    before: { fresh: [], again: [] },
    after: { fresh: [], again: [] },
  };
  const phases: string[] = [];
  // ABBA ABBA …: a drift of the machine or of the table's size through the phases weighs on both alike.
  const order = Array.from({ length: pairs }, (_, pair) =>
    pair % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const),
  ).flat();
  for (const [phase, version] of order.entries()) {
    await become(version);
    const where = { ...scope, connectionId: `${scope.connectionId}-writes-${phase}` };
    for (const [kind, runId] of [
      ['fresh', 'run-1'],
      ['again', 'run-2'],
    ] as const) {
      const times: number[] = [];
      for (let batch = 0; batch < batches; batch++) {
        const records = Array.from({ length: 1000 }, (_, i) => syntheticRecord(batch * 1000 + i));
        const started = nowMs();
        await store.saveRecords({ ...where, runId, records });
        times.push(nowMs() - started);
      }
      saves[version][kind].push(...times);
      phases.push(`${version} ${kind} ${summarize(times).p50.toFixed(2)}`);
    }
  }
  await become('after');
  console.log(
    `\nsaving batches of 1000, ${batches} a phase, ${pairs * 2} phases (${order.join(' ')}; load average ${load()}):`,
  );
  console.log(`  p50 ms of each phase in order: ${phases.join(', ')}`);
  for (const [kind, label] of [
    ['fresh', 'new records'],
    ['again', 'the same again, unchanged (a later run)'],
  ] as const) {
    const after = summarize(saves.after[kind]).p50;
    const before = summarize(saves.before[kind]).p50;
    console.log(
      line(
        `  ${label}, p50 after ÷ before`,
        `${after.toFixed(2)} ms ÷ ${before.toFixed(2)} ms = ${(after / before).toFixed(3)}`,
      ),
    );
  }

  // 2b. The triggers alone, for a writer that announces itself: plain statements of 1000 rows (an
  // insert, then an update of another column) with and without them, in ABBA order, 10 of each a phase.
  const plain = {
    on: { insert: [] as number[], update: [] as number[] },
    off: { insert: [] as number[], update: [] as number[] },
  };
  const plainScope = { ...scope, connectionId: `${scope.connectionId}-plain` };
  await store.saveRecords({ ...plainScope, runId: 'run-1', records: [syntheticRecord(0)] });
  const plainId = (await pool.query<{ scope_id: string }>(SCOPE_ID_SQL, scopeParams(plainScope))).rows[0]!.scope_id;
  const client = await pool.connect();
  try {
    await client.query("SELECT set_config('service.counts_kept', 'on', false)");
    let statement = 0;
    for (let pair = 0; pair < 8; pair++) {
      for (const on of pair % 2 === 0 ? [true, false] : [false, true]) {
        await client.query(
          'DROP TRIGGER IF EXISTS record_scope_count_insert ON records; DROP TRIGGER IF EXISTS record_scope_count_update ON records; DROP TRIGGER IF EXISTS record_scope_count_delete ON records; DROP TRIGGER IF EXISTS record_scope_count_truncate ON records',
        );
        if (on) for (const trigger of triggers) await client.query(trigger);
        for (let i = 0; i < 10; i++) {
          statement++;
          let started = nowMs();
          await client.query(
            `INSERT INTO records (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id)
             SELECT $1, $2 || n, '{"n":1}', md5('x')::uuid, 'records', now(), now(), 'ADDED', 'run-1' FROM generate_series(1, 1000) AS n`,
            [plainId, `s${statement}-`],
          );
          plain[on ? 'on' : 'off'].insert.push(nowMs() - started);
          started = nowMs();
          await client.query("UPDATE records SET last_run_id = 'run-2' WHERE scope_id = $1 AND id = ANY($2::text[])", [
            plainId,
            Array.from({ length: 1000 }, (_, n) => `s${statement}-${n + 1}`),
          ]);
          plain[on ? 'on' : 'off'].update.push(nowMs() - started);
        }
      }
    }
    await client.query("SELECT set_config('service.counts_kept', '', false)");
  } finally {
    client.release();
  }
  await become('after');
  for (const kind of ['insert', 'update'] as const) {
    const [on, off] = [summarize(plain.on[kind]).p50, summarize(plain.off[kind]).p50];
    console.log(
      line(
        `  the triggers alone: ${kind} of 1000 rows, p50 with ÷ without`,
        `${on.toFixed(2)} ms ÷ ${off.toFixed(2)} ms = ${(on / off).toFixed(3)}`,
      ),
    );
  }

  // 3. The purge of an erased connection the statistics do not know.
  const erased = async (name: string): Promise<string> => {
    const deferred = createPostgresRecordStore({ db: pool, purge: 'deferred' });
    const where = { ...scope, connectionId: `${scope.connectionId}-${name}` };
    for (let batch = 0; batch < purge / 1000; batch++) {
      const records = Array.from({ length: 1000 }, (_, i) => syntheticRecord(batch * 1000 + i, 1000));
      await deferred.saveRecords({ ...where, runId: 'run-1', records });
    }
    const scopeId = (await pool.query<{ scope_id: string }>(SCOPE_ID_SQL, scopeParams(where))).rows[0]!.scope_id;
    await deferred.eraseConnection(where);
    return scopeId;
  };
  await pool.query('ANALYZE records');
  const previousScope = await erased('purge-before');
  const currentScope = await erased('purge-after');
  let started = nowMs();
  // The previous purge's statement, a chunk of 20,000 at a time, as it ran.
  for (;;) {
    const deleted = await pool.query(
      'DELETE FROM records WHERE scope_id = $1 AND ctid = ANY(ARRAY(SELECT ctid FROM records WHERE scope_id = $1 LIMIT $2))',
      [previousScope, 20_000],
    );
    if ((deleted.rowCount ?? 0) < 20_000) break;
  }
  await pool.query('DELETE FROM record_scopes_detached WHERE scope_id = $1', [previousScope]);
  const previousMs = nowMs() - started;
  started = nowMs();
  const purged = await store.purgeErasedRecords();
  const currentMs = nowMs() - started;
  if (purged !== purge) throw new Error(`purged ${purged} records of scope ${currentScope}, not ${purge}`);
  console.log(
    line(
      `\npurging an erased connection of ${formatCount(purge)} records of ~1 KB, after ÷ before`,
      `${currentMs.toFixed(0)} ms ÷ ${previousMs.toFixed(0)} ms = ${(currentMs / previousMs).toFixed(4)}`,
    ),
  );
} finally {
  await database.close();
}
