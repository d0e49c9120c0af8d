/**
 * Records cache benchmark (issue 4). `npx tsx bench/records.ts [--records N] [--connections N]
 * [--batch N] [--reads N]`. Uses DATABASE_URL's server, or an ephemeral Postgres of the dev stack.
 *
 * 1. Writes: N records of about 1 KB across the connections, saved through the store's batch upsert
 *    and, batch by batch in the same run, COPYed raw into an identical table (same columns, indexes
 *    and defaults). Ratio = store throughput / raw throughput (goal ≥ 0.5).
 * 2. Reads, with every record in place: 100-record pages at random positions through the store and
 *    through the very same SQL on the raw pg pool, interleaved. Ratio = raw mean / store mean
 *    (goal ≥ 0.7), and the store's p99 (goal < 20 ms).
 * 3. Erases: one connection, one sync of one connection, then the whole sync (all connections): the
 *    time until its records are unreachable, then the time to purge them.
 */
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { from as copyFrom } from 'pg-copy-streams';
import { contentHash, copyText, encodeCursor } from '../src/records/encoding.js';
import {
  SCOPE_ID_SQL,
  createPostgresRecordStore,
  listQueryBuilder,
  scopeParams,
} from '../src/records/postgresRecordStore.js';
import type { ListRecordsOptions } from '../src/records/types.js';
import { useBenchDatabase } from './lib/database.js';
import { positiveIntegerFlags } from './lib/flags.js';
import {
  Stopwatch,
  formatCount,
  formatGoal,
  formatMs,
  formatSummary,
  goalMet,
  line,
  prng,
  summarize,
  timed,
  type GoalCheck,
} from './lib/stats.js';

const {
  records: TOTAL,
  connections: CONNECTIONS,
  batch: BATCH,
  reads: READS,
} = positiveIntegerFlags({ records: 1_000_000, connections: 100, batch: 1000, reads: 2000 });
const PER_CONNECTION = Math.ceil(TOTAL / CONNECTIONS);

const ENV = 'bench';
const INTEGRATION = 'github';
const SYNC = 'issues';
const MODEL = 'Issue';
const connectionId = (c: number) => `conn-${String(c).padStart(4, '0')}`;

const WORDS =
  'the a service record sync cache connection model page cursor batch upsert delete track state open closed issue label comment review merge branch commit deploy environment integration webhook token refresh action script runtime worker temporal postgres query index hash'.split(
    ' ',
  );

/** A GitHub-issue-like record of about 1 KB, the same for the same (connection, index) on every run. */
function makeRecord(c: number, i: number, version = 0): Record<string, unknown> {
  const random = prng(c * 10_000_019 + i * 7 + version);
  const words = (n: number) => Array.from({ length: n }, () => WORDS[Math.floor(random() * WORDS.length)]).join(' ');
  return {
    id: `${c}-${i}`,
    number: i,
    title: words(8),
    state: random() < 0.7 ? 'open' : 'closed',
    body: words(95),
    labels: [words(1), words(1), words(2)],
    author: { login: `user${Math.floor(random() * 5000)}`, id: Math.floor(random() * 1e8), site_admin: false },
    comments: Math.floor(random() * 40),
    reactions: { plus_one: Math.floor(random() * 9), heart: Math.floor(random() * 3), rocket: 0 },
    created_at: new Date(1_700_000_000_000 + i * 60_000).toISOString(),
    updated_at: new Date(1_700_000_000_000 + i * 60_000 + version * 1000).toISOString(),
    version,
  };
}

function batchOf(c: number, start: number, version = 0): Record<string, unknown>[] {
  const end = Math.min(start + BATCH, PER_CONNECTION);
  return Array.from({ length: end - start }, (_, k) => makeRecord(c, start + k, version));
}

const db = await useBenchDatabase({ poolSize: 4 });
const out = (text: string) => process.stdout.write(`${text}\n`);
try {
  const { pool } = db;
  const store = createPostgresRecordStore({ db: pool });
  out(
    `records benchmark: ${formatCount(PER_CONNECTION * CONNECTIONS)} records, ${CONNECTIONS} connections, batches of ${BATCH}`,
  );
  out(`  ${db.version}`);
  const sample = JSON.stringify(makeRecord(1, 1));
  out(line('record size (JSON)', `${sample.length} bytes`));

  // The raw table: identical columns, constraints, indexes and defaults.
  await pool.query('CREATE TABLE records_raw (LIKE records INCLUDING ALL)');
  // Scopes exist before timing starts, so both sides write into the same scope ids.
  const scopeIds: string[] = [];
  for (let c = 0; c < CONNECTIONS; c++) {
    const row = await pool.query<{ scope_id: string }>(
      `INSERT INTO record_scopes (environment_id, integration_id, connection_id, model) VALUES ($1, $2, $3, $4) RETURNING scope_id`,
      [ENV, INTEGRATION, connectionId(c), MODEL],
    );
    scopeIds.push(row.rows[0]?.scope_id ?? '');
  }

  // 1. Writes.
  const save = (c: number, records: Record<string, unknown>[], runId: string) =>
    store.saveRecords({
      environmentId: ENV,
      integrationId: INTEGRATION,
      connectionId: connectionId(c),
      syncName: SYNC,
      model: MODEL,
      runId,
      records,
    });
  const storeWrites = new Stopwatch();
  const rawWrites = new Stopwatch();
  let written = 0;
  let bytes = 0;
  const rawCopy = async (c: number, records: Record<string, unknown>[]) => {
    const stamp = new Date().toISOString();
    const lines = records.map((record) => {
      const json = JSON.stringify(record);
      return `${scopeIds[c]}\t${copyText(String(record['id']))}\t${copyText(json)}\t${contentHash(json)}\t${SYNC}\t${stamp}\t${stamp}\tADDED\tbench-1\n`;
    });
    const client = await pool.connect();
    try {
      const stream = client.query(
        copyFrom(
          'COPY records_raw (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id) FROM STDIN',
        ),
      );
      await pipeline(Readable.from([lines.join('')]), stream);
    } finally {
      client.release();
    }
  };
  const writeStarted = Date.now();
  for (let c = 0; c < CONNECTIONS; c++) {
    for (let start = 0; start < PER_CONNECTION; start += BATCH) {
      const records = batchOf(c, start);
      const viaStore = () => storeWrites.measure(() => save(c, records, 'bench-1'));
      const viaCopy = () => rawWrites.measure(() => rawCopy(c, records));
      // Alternate which goes first, so neither always meets the warmer cache.
      if ((c + start / BATCH) % 2 === 0) {
        await viaStore();
        await viaCopy();
      } else {
        await viaCopy();
        await viaStore();
      }
      written += records.length;
      bytes += records.length * sample.length;
    }
    if ((c + 1) % Math.max(1, Math.floor(CONNECTIONS / 10)) === 0) {
      process.stderr.write(
        `  … ${formatCount(written)} written (${((Date.now() - writeStarted) / 1000).toFixed(0)} s)\n`,
      );
    }
  }
  const storeRate = written / (storeWrites.totalMs / 1000);
  const rawRate = written / (rawWrites.totalMs / 1000);
  const mb = bytes / 1e6;
  out('\nwrites (new records)');
  out(
    line(
      'store saveRecords',
      `${formatCount(storeRate)} records/s, ${(mb / (storeWrites.totalMs / 1000)).toFixed(1)} MB/s (${formatMs(storeWrites.totalMs)})`,
    ),
  );
  out(
    line(
      'raw COPY, identical table',
      `${formatCount(rawRate)} records/s, ${(mb / (rawWrites.totalMs / 1000)).toFixed(1)} MB/s (${formatMs(rawWrites.totalMs)})`,
    ),
  );
  const checks: GoalCheck[] = [{ label: 'write ratio store/raw', value: storeRate / rawRate, goal: 0.5, kind: 'min' }];
  out(formatGoal(checks[0]!));

  // Saving again: a tenth of the connections unchanged, another tenth all changed (store only).
  const resaveConnections = Math.max(1, Math.floor(CONNECTIONS / 10));
  for (const [label, version] of [
    ['store re-save, unchanged', 0],
    ['store re-save, every record changed', 1],
  ] as const) {
    const watch = new Stopwatch();
    let n = 0;
    for (let c = 0; c < resaveConnections; c++) {
      for (let start = 0; start < PER_CONNECTION; start += BATCH) {
        const records = batchOf(c, start, version);
        await watch.measure(() => save(c, records, `bench-${2 + version}`));
        n += records.length;
      }
    }
    out(line(label, `${formatCount(n / (watch.totalMs / 1000))} records/s (${formatCount(n)} records)`));
  }

  // 2. Reads with everything in place.
  await pool.query('VACUUM ANALYZE records');
  await pool.query('VACUUM ANALYZE records_raw');
  const bounds = await pool.query<{ scope_id: string; lo: string; hi: string }>(
    'SELECT scope_id, min(position) AS lo, max(position) AS hi FROM records GROUP BY scope_id',
  );
  const range = new Map(bounds.rows.map((row) => [row.scope_id, [Number(row.lo), Number(row.hi)] as const]));
  const pick = prng(42);
  const readOptions = (): ListRecordsOptions => {
    const c = Math.floor(pick() * CONNECTIONS);
    const [lo, hi] = range.get(scopeIds[c] ?? '') ?? [0, 0];
    // One read in ten is a first page; the others start at a random position of the connection.
    const cursor =
      pick() < 0.1 ? undefined : encodeCursor(String(Math.floor(lo + pick() * Math.max(1, hi - lo - 100))));
    return {
      environmentId: ENV,
      integrationId: INTEGRATION,
      connectionId: connectionId(c),
      model: MODEL,
      cursor,
      limit: 100,
    };
  };
  const storeRead = async (options: ListRecordsOptions) => (await timed(() => store.listRecords(options))).ms;
  // The statements the store runs, straight on the pg pool: the page alone for a scope read before
  // (its id kept, as the store keeps it), the scope then the page for one not read before or an empty page.
  const rawScopeIds = new Map<string, string>();
  const rawRead = async (options: ListRecordsOptions) => {
    const build = listQueryBuilder(options);
    const params = scopeParams(options);
    const key = JSON.stringify(params);
    return (
      await timed(async () => {
        const known = rawScopeIds.get(key);
        if (known !== undefined) {
          const page = await pool.query(build(known));
          if (page.rows.length > 0) return;
        }
        const scope = await pool.query<{ scope_id: string }>(SCOPE_ID_SQL, params);
        const scopeId = scope.rows[0]?.scope_id;
        if (scopeId === undefined || scopeId === known) return;
        rawScopeIds.set(key, scopeId);
        await pool.query(build(scopeId));
      })
    ).ms;
  };
  for (let i = 0; i < Math.min(200, READS); i++) {
    const options = readOptions();
    await storeRead(options);
    await rawRead(options);
  }
  const storeTimes: number[] = [];
  const rawTimes: number[] = [];
  for (let i = 0; i < READS; i++) {
    const options = readOptions();
    if (i % 2 === 0) {
      storeTimes.push(await storeRead(options));
      rawTimes.push(await rawRead(options));
    } else {
      rawTimes.push(await rawRead(options));
      storeTimes.push(await storeRead(options));
    }
  }
  const storeSummary = summarize(storeTimes);
  const rawSummary = summarize(rawTimes);
  out(`\nreads (100-record pages, ${formatCount(written)} records in place)`);
  out(line('store listRecords', formatSummary(storeSummary)));
  out(line('raw pg, same SQL', formatSummary(rawSummary)));
  checks.push({
    label: 'read ratio raw mean/store mean',
    value: rawSummary.mean / storeSummary.mean,
    goal: 0.7,
    kind: 'min',
  });
  checks.push({ label: 'store read p99', value: storeSummary.p99, goal: 20, kind: 'max', unit: ' ms' });
  out(formatGoal(checks[1]!));
  out(formatGoal(checks[2]!));

  // 3. Erases.
  out('\nerases');
  const one = await timed(() =>
    store.eraseConnection({ environmentId: ENV, integrationId: INTEGRATION, connectionId: connectionId(0) }),
  );
  out(line('eraseConnection (1 connection)', `${formatMs(one.ms)} for ${formatCount(one.result)} records`));
  const syncOne = await timed(() =>
    store.eraseSync({ environmentId: ENV, integrationId: INTEGRATION, syncName: SYNC, connectionId: connectionId(1) }),
  );
  out(line('eraseSync (1 connection)', `${formatMs(syncOne.ms)} for ${formatCount(syncOne.result)} records`));
  // The whole sync: detached in one transaction (unreachable from then on), then purged in chunks.
  const deferred = createPostgresRecordStore({ db: pool, purge: 'deferred' });
  const detach = await timed(() =>
    deferred.eraseSync({ environmentId: ENV, integrationId: INTEGRATION, syncName: SYNC }),
  );
  out(line('eraseSync (all connections): unreachable', `${formatMs(detach.ms)}`));
  const purged = await timed(() => store.purgeErasedRecords());
  out(line('  then purgeErasedRecords', `${formatMs(purged.ms)} for ${formatCount(purged.result)} records`));
  const rawDelete = await timed(() => pool.query('DELETE FROM records_raw WHERE sync_name = $1', [SYNC]));
  out(
    line(
      'raw DELETE of the raw table (reference)',
      `${formatMs(rawDelete.ms)} for ${formatCount(rawDelete.result.rowCount ?? 0)} records`,
    ),
  );
  const left = await pool.query<{ n: string }>('SELECT count(*) AS n FROM records');
  if (Number(left.rows[0]?.n) !== 0) throw new Error(`erase left ${left.rows[0]?.n} records behind`);

  out(
    `\nsummary: ${checks.map((check) => `${check.label} ${check.value.toFixed(2)} ${goalMet(check) ? 'met' : 'MISSED'}`).join('; ')}`,
  );
} finally {
  await db.close();
}
