/**
 * The records cache at scale (issue 21, item 6). `npx tsx bench/recordsScale.ts [--records N]
 * [--connections C] [--partitions P] [--samples S]` (default 10,000,000 records over 10,000
 * connections, 16 partitions, 200 samples of each operation).
 *
 * A scratch database of its own (bench/lib/database.ts: created, migrated to the current schema, and
 * dropped at the end, also on failure) is filled with INSERT … SELECT generate_series: one scope per
 * connection (one model), N / C records each, interleaved across connections (record k of every
 * connection, then record k + 1…), as many syncs writing at once lay them down: a page of one
 * connection touches as many heap pages as it has rows, the unfavourable case. Then, through the
 * service's own store (src/records/postgresRecordStore.ts), at random connections:
 *
 * - a page of `GET /records` (listRecords: the scope by its key, then the position-ordered page) from
 *   a cursor in the middle of the connection's records;
 * - a batch save of 100 records into one connection (beginRun + saveRecords: 50 new, 50 changed);
 * - the erase of one connection (eraseConnection, which detaches its scope) and the purge that deletes
 *   its records (purgeErasedRecords, the maintenance job's delete, in chunks).
 *
 * The same again with `records` hash-partitioned by scope_id into P partitions (built in the scratch
 * database from the same rows and swapped in under the same name, so the store's SQL and records_save
 * run unchanged). Prints p50/p99 of each and the ratio partitioned / unpartitioned.
 */
import { randomInt } from 'node:crypto';
import { useBenchDatabase } from './lib/database.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { percentile } from './lib/stats.js';
import { createPool, type PoolClient } from '../src/db/pool.js';
import { createPostgresRecordStore } from '../src/records/postgresRecordStore.js';

const {
  records: N,
  connections: C,
  partitions: P,
  samples: S,
} = positiveIntegerFlags({ records: 10_000_000, connections: 10_000, partitions: 16, samples: 200 });
const PER = Math.floor(N / C);
const ENV = 'env-scale';
const INTEGRATION = 'scale';
const MODEL = 'Item';
const SYNC = 'items';

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
const log = (message: string) => console.log(`[records-scale ${new Date().toISOString().slice(11, 19)}] ${message}`);
const connectionId = (i: number) => `c${String(i).padStart(6, '0')}`;

interface Figures {
  pageP50: number;
  pageP99: number;
  saveP50: number;
  saveP99: number;
  eraseP50: number;
  eraseP99: number;
  purgeP50: number;
  purgeP99: number;
  tableMb: number;
}

// The last 40 connections are erased (20 by each measurement); pages and saves use the others.
const ERASED_TAIL = 40;
const deadline = Date.now() + 15 * 60_000;
const checkDeadline = (what: string) => {
  if (Date.now() > deadline) throw new Error(`15 minutes passed before ${what}`);
};

const database = await useBenchDatabase({ poolSize: 4 });
let fillSession: PoolClient | undefined;
try {
  if (C <= ERASED_TAIL) throw new Error(`--connections must be more than ${ERASED_TAIL}`);
  // One session for the fill: big sorts and index builds in memory.
  const db = (fillSession = await database.pool.connect());
  await db.query("SET work_mem = '256MB'");
  await db.query("SET maintenance_work_mem = '1GB'");
  log(`Postgres ${database.version}; ${N} records over ${C} connections (${PER} each)`);
  let t = Date.now();
  await db.query(
    `INSERT INTO record_scopes (environment_id, integration_id, connection_id, model)
     SELECT $1, $2, 'c' || lpad(g::text, 6, '0'), $3 FROM generate_series(0, $4::int - 1) g`,
    [ENV, INTEGRATION, MODEL, C],
  );
  await db.query(`INSERT INTO record_scope_syncs (scope_id, sync_name) SELECT scope_id, $1 FROM record_scopes`, [SYNC]);
  // Without its indexes while filling (built once afterwards, sorted: minutes instead of an hour).
  await db.query('ALTER TABLE records DROP CONSTRAINT records_pkey');
  await db.query('DROP INDEX records_scope_position');
  const row = (scope: string, k: string) =>
    `${scope}, 'r' || ${k}, $1, json_build_object('id', 'r' || ${k}, 'n', ${k}, 'name', md5(${k}::text), 'updated', '2026-11-01T00:00:00Z'),
     md5(${k}::text)::uuid, now(), now(), 'ADDED', 'run-0'`;
  for (let from = 0; from < PER; from += 50) {
    const to = Math.min(PER, from + 50) - 1;
    await db.query(
      `INSERT INTO records (scope_id, id, sync_name, data, data_hash, first_seen_at, last_modified_at, last_action, last_run_id)
       SELECT ${row('s.scope_id', 'k')} FROM generate_series($2::int, $3::int) k CROSS JOIN record_scopes s ORDER BY k, s.scope_id`,
      [SYNC, from, to],
    );
    checkDeadline('the fill ended');
    if ((to + 1) % 250 === 0) log(`${(to + 1) * C} records written (${round((Date.now() - t) / 1000, 0)} s)`);
  }
  await db.query('ALTER TABLE records ADD PRIMARY KEY (scope_id, id)');
  await db.query('CREATE UNIQUE INDEX records_scope_position ON records (scope_id, position)');
  await db.query('VACUUM ANALYZE records');
  log(`filled and indexed in ${round((Date.now() - t) / 1000, 0)} s`);

  const measure = async (label: string, eraseFrom: number): Promise<Figures> => {
    checkDeadline(`measuring ${label}`);
    // A fresh pool: no session keeps a plan of records_save made against the other table.
    const pool = createPool({ url: database.url, max: 4, applicationName: 'bench-records-scale' });
    try {
      // Deferred: the detach and the purge timed apart (inline, as the API runs it, is the two in a row).
      const store = createPostgresRecordStore({ db: pool, purge: 'deferred' });
      const pages: number[] = [];
      const saves: number[] = [];
      for (let i = 0; i < S; i++) {
        const scope = {
          environmentId: ENV,
          integrationId: INTEGRATION,
          connectionId: connectionId(randomInt(C - ERASED_TAIL)),
        };
        // A cursor in the middle: the page after the first half of the connection's records.
        const half = await store.listRecords({ ...scope, model: MODEL, limit: Math.max(1, Math.floor(PER / 2)) });
        let started = performance.now();
        const page = await store.listRecords({
          ...scope,
          model: MODEL,
          limit: 100,
          cursor: half.next_cursor ?? undefined,
        });
        pages.push(performance.now() - started);
        if (page.records.length === 0) throw new Error(`no page for ${scope.connectionId}`);

        const runId = `run-${label}-${i}`;
        const batch = Array.from({ length: 100 }, (_, j) =>
          j < 50
            ? {
                id: `r${j * Math.max(1, Math.floor(PER / 50))}`,
                n: -i,
                name: 'changed',
                updated: new Date().toISOString(),
              }
            : { id: `new-${label}-${i}-${j}`, n: j, name: 'new', updated: new Date().toISOString() },
        );
        started = performance.now();
        await store.beginRun({ ...scope, syncName: SYNC, runId });
        const summary = await store.saveRecords({ ...scope, syncName: SYNC, model: MODEL, runId, records: batch });
        saves.push(performance.now() - started);
        if (summary.added !== 50 || summary.updated !== 50) {
          throw new Error(`save into ${scope.connectionId}: ${JSON.stringify(summary)}, not 50 added and 50 updated`);
        }
      }
      const erases: number[] = [];
      const purges: number[] = [];
      for (let c = eraseFrom; c < eraseFrom + ERASED_TAIL / 2; c++) {
        const scope = { environmentId: ENV, integrationId: INTEGRATION, connectionId: connectionId(c) };
        let started = performance.now();
        await store.eraseConnection(scope);
        erases.push(performance.now() - started);
        started = performance.now();
        const purged = await store.purgeErasedRecords();
        purges.push(performance.now() - started);
        if (purged !== PER)
          throw new Error(`the purge of ${scope.connectionId} deleted ${purged} records, not its ${PER}`);
        if ((await store.countRecords({ ...scope, model: MODEL })) !== 0) throw new Error('records left after purge');
      }
      const size = await pool.query<{ mb: string }>(
        `SELECT round(sum(pg_total_relation_size(c.oid)) / 1048576.0) AS mb FROM pg_class c
          WHERE c.relname = 'records' OR c.relname LIKE 'records\\_p%'`,
      );
      for (const list of [pages, saves, erases, purges]) list.sort((a, b) => a - b);
      const figures: Figures = {
        pageP50: percentile(pages, 50),
        pageP99: percentile(pages, 99),
        saveP50: percentile(saves, 50),
        saveP99: percentile(saves, 99),
        eraseP50: percentile(erases, 50),
        eraseP99: percentile(erases, 99),
        purgeP50: percentile(purges, 50),
        purgeP99: percentile(purges, 99),
        tableMb: Number(size.rows[0]?.mb ?? 0),
      };
      log(
        `${label}: ${JSON.stringify(Object.fromEntries(Object.entries(figures).map(([k, v]: [string, number]) => [k, round(v)])))}`,
      );
      return figures;
    } finally {
      await pool.end();
    }
  };

  const flat = await measure('unpartitioned', C - ERASED_TAIL);

  t = Date.now();
  await db.query(
    `CREATE TABLE records_partitioned (LIKE records INCLUDING DEFAULTS INCLUDING CONSTRAINTS) PARTITION BY HASH (scope_id)`,
  );
  for (let p = 0; p < P; p++) {
    await db.query(
      `CREATE TABLE records_p${p} PARTITION OF records_partitioned FOR VALUES WITH (MODULUS ${P}, REMAINDER ${p})`,
    );
  }
  checkDeadline('the partitioned copy');
  await db.query('INSERT INTO records_partitioned SELECT * FROM records');
  await db.query('ALTER TABLE records_partitioned ADD PRIMARY KEY (scope_id, id)');
  await db.query('CREATE UNIQUE INDEX records_partitioned_scope_position ON records_partitioned (scope_id, position)');
  await db.query('DROP TABLE records');
  await db.query('ALTER TABLE records_partitioned RENAME TO records');
  await db.query('VACUUM ANALYZE records');
  log(`partitioned copy (${P} hash partitions by scope_id) built in ${round((Date.now() - t) / 1000, 0)} s`);
  const parted = await measure(`${P} partitions`, C - ERASED_TAIL / 2);

  const lines: [string, number, number][] = [
    ['GET /records page of 100, p50 (ms)', flat.pageP50, parted.pageP50],
    ['GET /records page of 100, p99 (ms)', flat.pageP99, parted.pageP99],
    ['save 100 records (50 new, 50 changed), p50 (ms)', flat.saveP50, parted.saveP50],
    ['save 100 records (50 new, 50 changed), p99 (ms)', flat.saveP99, parted.saveP99],
    ['erase one connection (detach), p50 (ms)', flat.eraseP50, parted.eraseP50],
    [`purge one connection's ${PER} records, p50 (ms)`, flat.purgeP50, parted.purgeP50],
    [`purge one connection's ${PER} records, p99 (ms)`, flat.purgeP99, parted.purgeP99],
    ['table with indexes (MB)', flat.tableMb, parted.tableMb],
  ];
  console.log(
    `\n  ${'operation'.padEnd(50)} ${'flat'.padStart(10)} ${`${P} parts`.padStart(10)} ${'ratio'.padStart(7)}`,
  );
  for (const [name, a, b] of lines)
    console.log(
      `  ${name.padEnd(50)} ${String(round(a)).padStart(10)} ${String(round(b)).padStart(10)} ${String(round(b / a)).padStart(7)}`,
    );
} finally {
  fillSession?.release();
  await database.close();
}
