/**
 * The records cache on Postgres (ARCHITECTURE.md "Records cache"; design and measurements in
 * docs/records.md). Tables: record_scopes (one row per environment, integration, connection and
 * model: the unit that is locked and read), records, record_sync_runs (run fencing).
 */
import { ServiceError } from '../errors.js';
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { deleteEnvironmentRows, type EnvironmentHoldings } from '../db/environmentHoldings.js';
import { METADATA_KEY, canonicalRecordJson, contentHash, decodeCursor, encodeCursor, recordKey } from './encoding.js';
import type {
  EraseSyncOptions,
  LastAction,
  ListRecordsOptions,
  RecordPage,
  RecordScope,
  RecordStore,
  SaveRecordsOptions,
  RecordPageJson,
  StoredRecord,
  SyncScope,
  WriteStep,
  WriteSummary,
} from './types.js';
import { onceInTransaction } from '../steps/stepLedger.js';

export const DEFAULT_PAGE_LIMIT = 100;
export const MAX_PAGE_LIMIT = 1000;
/** Most ids one read may ask for. */
export const MAX_IDS_PER_READ = 10_000;
const LAST_ACTIONS: readonly LastAction[] = ['ADDED', 'UPDATED', 'DELETED'];

export interface PostgresRecordStoreOptions {
  db: Pool;
  /**
   * Records per statement. A larger batch is still written in one transaction (all or nothing), in
   * several statements, so no single statement carries tens of megabytes.
   * @default 2000
   */
  chunkSize?: number;
  /**
   * What the erase methods do after detaching (docs/records.md "Erase"): `inline` deletes the
   * detached records before returning and returns their number; `deferred` returns at once (the
   * records are already unreachable) and leaves the deleting to `purgeErasedRecords()`.
   * @default 'inline'
   */
  purge?: 'inline' | 'deferred';
}

interface PreparedRecord {
  key: string;
  json: string;
  hash: string;
}

/**
 * The owner of a sync's run row once its records were erased (the sync removed, the connection
 * deleted): no run has this id, so every batch still in flight is refused; a later run's beginRun
 * takes the row over. The rows go with their environment.
 */
const ERASED_RUN = '(erased)';

const zeroSummary = (): WriteSummary => ({ added: 0, updated: 0, deleted: 0, unchanged: 0 });

/** The write once per step when a step is given (src/steps/stepLedger.ts), else simply the write. */
function once<T>(client: PoolClient, step: WriteStep | undefined, work: () => Promise<T>): Promise<T> {
  return step ? onceInTransaction(client, step, work) : work();
}

export function createPostgresRecordStore({
  db,
  chunkSize = 2000,
  purge = 'inline',
}: PostgresRecordStoreOptions): RecordStore {
  if (!Number.isInteger(chunkSize) || chunkSize < 1) {
    throw new ServiceError('invalid_store_options', `chunkSize must be a positive integer, got ${String(chunkSize)}`);
  }
  const scopeIds = new ScopeIds();
  return {
    async saveRecords(options) {
      // Everything is validated before the database is touched: a bad record stores nothing.
      const prepared = prepareRecords(options);
      if (prepared.length === 0) return zeroSummary();
      try {
        // One batch, one statement (records_save_page, migration 20261127160000): the step's ledger row,
        // the run fence, the scope lock and the writes in a single round trip.
        if (prepared.length <= chunkSize) return (await saveChunk(db, options, prepared, options.step)).summary;
        // A larger batch: still one transaction (all or nothing), a statement per chunk, so that no
        // single statement carries tens of megabytes; the step is taken once for all of them.
        return await inTransaction(db, (client) =>
          once(client, options.step, async () => {
            const summary = zeroSummary();
            let at: string | undefined;
            for (let start = 0; start < prepared.length; start += chunkSize) {
              const saved = await saveChunk(client, options, prepared.slice(start, start + chunkSize), undefined, at);
              at = saved.at;
              for (const key of ['added', 'updated', 'unchanged'] as const) summary[key] += saved.summary[key];
            }
            return summary;
          }),
        );
      } catch (error) {
        throw storeError(error, options);
      }
    },

    async deleteRecords(options) {
      const keys = new Set<string>();
      options.records.forEach((record, index) => {
        const where = { index, model: options.model };
        if (record === null || typeof record !== 'object') {
          throw new ServiceError(
            'invalid_record',
            `record at index ${index} of model "${options.model}" is not an object with an id`,
            { details: where },
          );
        }
        keys.add(recordKey(record.id, where));
      });
      if (keys.size === 0) return zeroSummary();
      return inTransaction(db, (client) =>
        once(client, options.step, async () => {
          await assertRunOwnsSync(client, options, options.runId);
          const summary = zeroSummary();
          const scopeId = await lockScope(client, options, false);
          if (scopeId === null) return { ...summary, unchanged: keys.size };
          await keepCounts(client);
          const all = [...keys];
          for (let start = 0; start < all.length; start += chunkSize) {
            const result = await client.query(
              `UPDATE records SET deleted_at = clock_timestamp(), last_modified_at = clock_timestamp(),
               last_action = 'DELETED', position = nextval('record_positions')
             WHERE scope_id = $1 AND id = ANY($2::text[]) AND deleted_at IS NULL`,
              [scopeId, all.slice(start, start + chunkSize)],
            );
            summary.deleted += result.rowCount ?? 0;
          }
          // Ids never stored, or already deleted: nothing changes for them.
          summary.unchanged = keys.size - summary.deleted;
          await countLess(client, scopeId, summary.deleted);
          return summary;
        }),
      );
    },

    async markUnseenDeleted(options) {
      return inTransaction(db, (client) =>
        once(client, options.step, async () => {
          await assertRunOwnsSync(client, options, options.runId);
          const scopeId = await lockScope(client, options, false);
          if (scopeId === null) return zeroSummary();
          await keepCounts(client);
          const result = await client.query(
            `UPDATE records SET deleted_at = clock_timestamp(), last_modified_at = clock_timestamp(),
             last_action = 'DELETED', position = nextval('record_positions')
           WHERE scope_id = $1 AND sync_name = $2 AND deleted_at IS NULL AND last_run_id <> ALL($3::text[])`,
            [scopeId, options.syncName, [options.runId, ...(options.alsoSeenBy ?? [])]],
          );
          await countLess(client, scopeId, result.rowCount ?? 0);
          return { ...zeroSummary(), deleted: result.rowCount ?? 0 };
        }),
      );
    },

    async listRecords(options) {
      const { rows, limit } = await readPage(db, scopeIds, options);
      return toPage(rows, limit);
    },

    async listRecordsJson(options) {
      const { rows, limit } = await readPage(db, scopeIds, options);
      return toPageJson(rows, limit);
    },

    async countRecords(options) {
      if (options.includeDeleted) {
        const result = await db.query<{ count: string }>(
          `SELECT count(*) AS count FROM records WHERE scope_id = (${SCOPE_ID_SQL})`,
          scopeParams(options),
        );
        return Number(result.rows[0]?.count ?? 0);
      }
      // The live records are counted as they change (migration 20261128140000): one row read, whatever
      // the scope's size; counted from the records when the count is not known.
      const kept = await db.query<{ live_records: string | null }>(
        `SELECT live_records FROM record_scopes
          WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND model = $4`,
        scopeParams(options),
      );
      const row = kept.rows[0];
      if (!row) return 0;
      if (row.live_records !== null) return Number(row.live_records);
      return recountScope(db, options);
    },

    async countSyncRecords({ environmentId, integrationId, syncName }) {
      const result = await db.query<{ count: string }>(
        `SELECT count(*)::text AS count FROM records r JOIN record_scopes s ON s.scope_id = r.scope_id
          WHERE s.environment_id = $1 AND s.integration_id = $2 AND r.sync_name = $3`,
        [environmentId, integrationId, syncName],
      );
      return Number(result.rows[0]?.count ?? 0);
    },

    async eraseSync(options: EraseSyncOptions) {
      const connection = options.connectionId;
      const { detached, deleted } = await inTransaction(db, async (client) => {
        // Lock order everywhere: the sync's run row, then scope rows (ascending), then records.
        // The run rows stay, owned by no run (ERASED_RUN): a batch of the erased sync still in flight
        // then finds another owner and fails, instead of writing records into the emptied scope.
        await client.query(
          `UPDATE record_sync_runs SET run_id = '${ERASED_RUN}'
            WHERE environment_id = $1 AND integration_id = $2 AND sync_name = $3
             ${connection === undefined ? '' : 'AND connection_id = $4'}`,
          [
            options.environmentId,
            options.integrationId,
            options.syncName,
            ...(connection === undefined ? [] : [connection]),
          ],
        );
        // Its checkpoints go with its records (issue 32): a sync added again starts from the beginning.
        await client.query(
          `DELETE FROM sync_checkpoints WHERE environment_id = $1 AND integration_id = $2 AND sync_name = $3
             ${connection === undefined ? '' : 'AND connection_id = $4'}`,
          [
            options.environmentId,
            options.integrationId,
            options.syncName,
            ...(connection === undefined ? [] : [connection]),
          ],
        );
        // Only the scopes this sync wrote into; a scope no other sync wrote into is detached whole.
        const scopes = await client.query<{ scope_id: string; shared: boolean }>(
          `SELECT s.scope_id,
                  EXISTS (SELECT 1 FROM record_scope_syncs o WHERE o.scope_id = s.scope_id AND o.sync_name <> $3) AS shared
           FROM record_scopes s JOIN record_scope_syncs l ON l.scope_id = s.scope_id AND l.sync_name = $3
           WHERE s.environment_id = $1 AND s.integration_id = $2 ${connection === undefined ? '' : 'AND s.connection_id = $4'}
           ORDER BY s.scope_id FOR UPDATE OF s`,
          [
            options.environmentId,
            options.integrationId,
            options.syncName,
            ...(connection === undefined ? [] : [connection]),
          ],
        );
        const shared = scopes.rows.filter((row) => row.shared).map((row) => row.scope_id);
        const whole = scopes.rows.filter((row) => !row.shared).map((row) => row.scope_id);
        let deleted = 0;
        if (shared.length > 0) {
          // Other syncs' records live in these scopes too: only this sync's go, here and now, and the
          // live ones among them leave the scopes' counts.
          await keepCounts(client);
          const result = await client.query<{ deleted: string }>(
            `WITH gone AS (
               DELETE FROM records WHERE scope_id = ANY($1::bigint[]) AND sync_name = $2 RETURNING scope_id, deleted_at
             ), counted AS (
               UPDATE record_scopes s SET live_records = s.live_records - c.n
                 FROM (SELECT scope_id, count(*) AS n FROM gone WHERE deleted_at IS NULL GROUP BY scope_id) c
                WHERE s.scope_id = c.scope_id AND s.live_records IS NOT NULL
             )
             SELECT count(*) AS deleted FROM gone`,
            [shared, options.syncName],
          );
          deleted = Number(result.rows[0]?.deleted ?? 0);
          await client.query('DELETE FROM record_scope_syncs WHERE scope_id = ANY($1::bigint[]) AND sync_name = $2', [
            shared,
            options.syncName,
          ]);
        }
        await detachScopes(client, whole);
        return { detached: whole, deleted };
      });
      return deleted + (purge === 'inline' ? await purgeScopes(db, detached) : 0);
    },

    async eraseConnection(options: RecordScope) {
      const detached = await inTransaction(db, async (client) => {
        // As in eraseSync: a batch still in flight for the deleted connection may not write after the
        // erase (its records would show to the next connection of that id).
        await client.query(
          `UPDATE record_sync_runs SET run_id = '${ERASED_RUN}'
            WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3`,
          [options.environmentId, options.integrationId, options.connectionId],
        );
        await client.query(
          'DELETE FROM sync_checkpoints WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3',
          [options.environmentId, options.integrationId, options.connectionId],
        );
        const scopes = await client.query<{ scope_id: string }>(
          `SELECT scope_id FROM record_scopes WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3
           ORDER BY scope_id FOR UPDATE`,
          [options.environmentId, options.integrationId, options.connectionId],
        );
        const ids = scopes.rows.map((row) => row.scope_id);
        await detachScopes(client, ids);
        return ids;
      });
      return purge === 'inline' ? purgeScopes(db, detached) : 0;
    },

    async purgeErasedRecords() {
      return purgeScopes(db, undefined);
    },

    async beginRun(options) {
      // One statement: the CTE reads the fence as it was before the upsert (one snapshot for both).
      const { rows } = await db.query<{ run_id: string }>(
        `WITH previous AS (
           SELECT run_id FROM record_sync_runs
            WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND sync_name = $4
         ), taken AS (
           INSERT INTO record_sync_runs (environment_id, integration_id, connection_id, sync_name, run_id)
           VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (environment_id, integration_id, connection_id, sync_name)
           DO UPDATE SET run_id = excluded.run_id, started_at = now() WHERE record_sync_runs.run_id <> excluded.run_id
         )
         SELECT run_id FROM previous WHERE run_id <> $5`,
        [options.environmentId, options.integrationId, options.connectionId, options.syncName, options.runId],
      );
      return { previousRunId: rows[0]?.run_id ?? null };
    },
  };
}

/** Records deleted per statement by a purge: small enough to keep each transaction short. */
const PURGE_CHUNK = 20_000;

/**
 * Makes the scopes' records unreachable in the caller's transaction: every read and write finds a
 * scope by its key in record_scopes, so once the row is gone its records are invisible, and a new
 * write of the same key creates a new scope id. The scope ids are queued for purging.
 */
async function detachScopes(client: PoolClient, scopeIds: string[]): Promise<void> {
  if (scopeIds.length === 0) return;
  await client.query('DELETE FROM record_scopes WHERE scope_id = ANY($1::bigint[])', [scopeIds]);
  await client.query('DELETE FROM record_scope_syncs WHERE scope_id = ANY($1::bigint[])', [scopeIds]);
  await client.query(
    'INSERT INTO record_scopes_detached (scope_id) SELECT unnest($1::bigint[]) ON CONFLICT DO NOTHING',
    [scopeIds],
  );
}

/**
 * Deletes the records of detached scopes (the given ones, or every queued one), a chunk per
 * transaction. SKIP LOCKED lets several purgers share the queue. Returns the number deleted.
 */
async function purgeScopes(db: Pool, only: string[] | undefined): Promise<number> {
  if (only !== undefined && only.length === 0) return 0;
  let purged = 0;
  for (;;) {
    const step = await inTransaction(db, async (client) => {
      const next = await client.query<{ scope_id: string }>(
        `SELECT scope_id FROM record_scopes_detached ${only === undefined ? '' : 'WHERE scope_id = ANY($1::bigint[])'}
         ORDER BY detached_at, scope_id LIMIT 1 FOR UPDATE SKIP LOCKED`,
        only === undefined ? [] : [only],
      );
      const scopeId = next.rows[0]?.scope_id;
      if (scopeId === undefined) return null;
      // A detached scope has no count left to keep.
      await keepCounts(client);
      // The chunk's rows by the scope's index, then deleted by physical row address (a TID scan), not
      // by key: no second index probe per row. For the delete the planner is left the address scan
      // alone: a scope the table's statistics do not know (one written since the last ANALYZE, as most
      // erased ones are) is estimated at one row, and the planner then walked the scope's index, testing
      // every row against the whole list of addresses: 7-8 s a chunk of 20,000 instead of 0.1 s
      // (bench/recordCount.ts); on a small table it chose a sequential scan of it all. A ctid is unique only within one table: `scope_id = $1` keeps the delete
      // to the scope's own rows should records ever be partitioned (bench/recordsScale.ts: without it,
      // other scopes' rows went too).
      const chunk = await client.query<{ ctid: string }>('SELECT ctid FROM records WHERE scope_id = $1 LIMIT $2', [
        scopeId,
        PURGE_CHUNK,
      ]);
      await client.query(
        'SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off; SET LOCAL enable_bitmapscan = off',
      );
      const deleted = await client.query('DELETE FROM records WHERE scope_id = $1 AND ctid = ANY($2::tid[])', [
        scopeId,
        chunk.rows.map((row) => row.ctid),
      ]);
      await client.query(
        'SET LOCAL enable_seqscan TO DEFAULT; SET LOCAL enable_indexscan TO DEFAULT; SET LOCAL enable_bitmapscan TO DEFAULT',
      );
      const count = deleted.rowCount ?? 0;
      if (count < PURGE_CHUNK) await client.query('DELETE FROM record_scopes_detached WHERE scope_id = $1', [scopeId]);
      return count;
    });
    if (step === null) return purged;
    purged += step;
  }
}

/** Validates and encodes a batch; the last occurrence of an id wins (Map keeps the first position, the last value). */
function prepareRecords(options: SaveRecordsOptions): PreparedRecord[] {
  const byKey = new Map<string, PreparedRecord>();
  options.records.forEach((record, index) => {
    const where = { index, model: options.model };
    const json = canonicalRecordJson(record, where);
    const key = recordKey(record['id'], where);
    byKey.set(key, { key, json, hash: contentHash(json) });
  });
  return [...byKey.values()];
}

/**
 * Writes one chunk under the scope lock (records_save_page): inserts the new records, rewrites the changed
 * ones and only stamps the run on the unchanged ones. `at` is the batch's timestamp when an earlier
 * chunk of the same batch took one, so every record of a batch carries the same one.
 */
async function saveChunk(
  db: Pool | PoolClient,
  options: SaveRecordsOptions,
  chunk: PreparedRecord[],
  step: WriteStep | undefined,
  at?: string,
): Promise<{ summary: WriteSummary; at: string | undefined }> {
  const { rows } = await db.query<{ saved: WriteSummary & { at?: string } }>(
    'SELECT records_save_page($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) AS saved',
    [
      ...scopeParams(options),
      options.syncName,
      options.runId,
      step?.runId ?? null,
      step?.step ?? null,
      at ?? null,
      chunk.map((record) => record.key),
      chunk.map((record) => record.hash),
      // One JSON array of the canonical texts (records_save_page takes each element's text as given).
      `[${chunk.map((record) => record.json).join(',')}]`,
      step?.earlier?.length ? step.earlier.map((row) => row.step) : null,
      step?.earlier?.length ? step.earlier.map((row) => row.outcome) : null,
    ],
  );
  const { at: savedAt, ...summary } = rows[0]!.saved;
  return {
    summary: { added: summary.added, updated: summary.updated, deleted: 0, unchanged: summary.unchanged },
    at: savedAt,
  };
}

/** The store's own errors, raised by records_save_page with SQLSTATEs of their own. */
function storeError(error: unknown, scope: SyncScope & { runId: string }): unknown {
  const code = (error as { code?: unknown }).code;
  if (code === 'SV001') {
    const detail = (error as { detail?: unknown }).detail;
    const current = typeof detail === 'string' ? detail : 'another run';
    return supersededError(scope, scope.runId, current);
  }
  if (code === 'SV002') {
    return new ServiceError('record_scope_contended', 'could not lock the records of this connection and model', {
      retryable: true,
    });
  }
  return error;
}

/** Where a scope's row is, with the parameters of scopeParams(). */
const SCOPE_WHERE_SQL = 'WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND model = $4';

/** The scope of a read, with the parameters of scopeParams(). */
export const SCOPE_ID_SQL = `SELECT scope_id FROM record_scopes ${SCOPE_WHERE_SQL}`;

export function scopeParams(scope: RecordScope & { model: string }): string[] {
  return [scope.environmentId, scope.integrationId, scope.connectionId, scope.model];
}

/**
 * Locks the scope's row for the rest of the transaction, creating the scope when asked. Every change
 * to a scope's records happens under this lock, which makes writes of one (connection, model)
 * serial: positions are then handed out in commit order, and two runs cannot interleave inside one
 * batch. Returns null when the scope does not exist and `create` is false.
 */
async function lockScope(
  client: PoolClient,
  scope: RecordScope & { model: string },
  create: boolean,
): Promise<string | null> {
  const params = scopeParams(scope);
  // A concurrent eraseConnection may delete the row between our insert attempt and our lock: retry.
  for (let attempt = 0; attempt < 5; attempt++) {
    const locked = await client.query<{ scope_id: string }>(`${SCOPE_ID_SQL} FOR UPDATE`, params);
    if (locked.rows[0]) return locked.rows[0].scope_id;
    if (!create) return null;
    const inserted = await client.query<{ scope_id: string }>(
      `INSERT INTO record_scopes (environment_id, integration_id, connection_id, model, live_records)
       VALUES ($1, $2, $3, $4, 0) ON CONFLICT DO NOTHING RETURNING scope_id`,
      params,
    );
    // A row this transaction inserted is invisible to others until commit: it is as good as locked.
    if (inserted.rows[0]) return inserted.rows[0].scope_id;
  }
  throw new ServiceError('record_scope_contended', 'could not lock the records of this connection and model', {
    retryable: true,
  });
}

/**
 * Says, for the rest of the transaction, that its writes of records keep the scopes' counts themselves:
 * the triggers that make a count unknown stay quiet (migration 20261128140000).
 */
async function keepCounts(client: PoolClient): Promise<void> {
  await client.query("SELECT set_config('service.counts_kept', 'on', true)");
}

/** `deleted` live records of the locked scope are deleted now (a count not known stays so). */
async function countLess(client: PoolClient, scopeId: string, deleted: number): Promise<void> {
  if (deleted === 0) return;
  await client.query(
    'UPDATE record_scopes SET live_records = live_records - $2 WHERE scope_id = $1 AND live_records IS NOT NULL',
    [scopeId, deleted],
  );
}

/**
 * Counts a scope's live records whose count is not known (a scope of before migration 20261128140000,
 * or one a writer that keeps no count wrote since) and keeps the count. Under the scope's lock, which
 * every writer of its records takes first: no write is half done while it counts, and every later one
 * sees the count. Read committed, whatever the server's default: the count must see the writes that
 * committed while it waited for the lock.
 */
async function recountScope(db: Pool, scope: RecordScope & { model: string }): Promise<number> {
  return inTransaction(
    db,
    async (client) => {
      const locked = await client.query<{ scope_id: string; live_records: string | null }>(
        `SELECT scope_id, live_records FROM record_scopes ${SCOPE_WHERE_SQL} FOR UPDATE`,
        scopeParams(scope),
      );
      const row = locked.rows[0];
      if (!row) return 0;
      if (row.live_records !== null) return Number(row.live_records);
      const counted = await client.query<{ n: string }>(
        'SELECT count(*) AS n FROM records WHERE scope_id = $1 AND deleted_at IS NULL',
        [row.scope_id],
      );
      const count = Number(counted.rows[0]?.n ?? 0);
      await client.query('UPDATE record_scopes SET live_records = $2 WHERE scope_id = $1', [row.scope_id, count]);
      return count;
    },
    'BEGIN ISOLATION LEVEL READ COMMITTED',
  );
}

/** Refuses the write when another run has begun for this sync and connection (see RecordStore.beginRun). */
export async function assertRunOwnsSync(client: PoolClient, scope: SyncScope, runId: string): Promise<void> {
  // FOR SHARE: concurrent batches of the owning run proceed together, and beginRun (an update of
  // this row) waits until they commit, so no batch of a superseded run lands after it returns.
  const owner = await client.query<{ run_id: string }>(
    `SELECT run_id FROM record_sync_runs
     WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND sync_name = $4 FOR SHARE`,
    [scope.environmentId, scope.integrationId, scope.connectionId, scope.syncName],
  );
  const current = owner.rows[0]?.run_id;
  if (current !== undefined && current !== runId) {
    throw supersededError(scope, runId, current);
  }
}

/** A batch of `runId` refused: `current` owns the sync's records now, or they were erased. */
function supersededError(scope: SyncScope, runId: string, current: string): ServiceError {
  const why =
    current === ERASED_RUN
      ? 'its records were erased since (the sync removed by a deploy, or the connection deleted)'
      : `run ${current} has begun since`;
  return new ServiceError(
    'run_superseded',
    `run ${runId} of sync "${scope.syncName}" may no longer write records of connection "${scope.connectionId}": ${why}`,
    { details: { runId, currentRunId: current } },
  );
}

/**
 * A record as the page query returns it (an array, in LIST_COLUMNS order: pg builds no object per row):
 * the id, the stored JSON as text (never parsed on the way out), the instants already in the form of
 * Date.toISOString() (UTC, milliseconds, `Z`), the last action and the position as text.
 */
export type ListRow = [
  id: string,
  data: string,
  firstSeenAt: string,
  lastModifiedAt: string,
  lastAction: LastAction,
  deletedAt: string | null,
  position: string,
];

/** An instant as Date.toISOString() writes it (to_char truncates to the millisecond, as Date does). */
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS ${column}`;
const LIST_COLUMNS = `id, data::text AS data, ${iso('first_seen_at')}, ${iso('last_modified_at')}, last_action, ${iso('deleted_at')}, position`;

/** Scope ids a store has read (the most recent 10,000), by scope key: a page of a known scope is one statement. */
class ScopeIds {
  static readonly MAX = 10_000;
  readonly #ids = new Map<string, string>();

  static key(scope: RecordScope & { model: string }): string {
    return JSON.stringify(scopeParams(scope));
  }

  get(key: string): string | undefined {
    return this.#ids.get(key);
  }

  set(key: string, scopeId: string): void {
    this.#ids.delete(key);
    this.#ids.set(key, scopeId);
    if (this.#ids.size > ScopeIds.MAX) this.#ids.delete(this.#ids.keys().next().value ?? key);
  }

  delete(key: string): void {
    this.#ids.delete(key);
  }
}

/**
 * Reads one page (rows of the page query, one more than `limit`). The page query takes the scope id
 * as a parameter, so that it is planned with it as a constant: with an unknown id the planner guesses
 * an average scope size, and for a large scope it then picks a bitmap scan that reads and sorts every
 * record of the scope. The id of a scope read before is known (ScopeIds), and the page is then one
 * statement; the query itself checks that the scope row still exists with that id and key (a scope is
 * detached by deleting its row, in the transaction that erases it, and an id is never given to another
 * scope), so a known id never shows an erased record. An empty page, or a scope not read before,
 * resolves the scope by its key first (two statements, as every read took before issue 31).
 */
async function readPage(
  db: Pool,
  scopeIds: ScopeIds,
  options: ListRecordsOptions,
): Promise<{ rows: ListRow[]; limit: number }> {
  // Validate first, so a bad request fails the same whether or not the scope exists.
  const build = listQueryBuilder(options);
  const key = ScopeIds.key(options);
  const known = scopeIds.get(key);
  if (known !== undefined) {
    const query = build(known);
    const { rows } = await db.query<ListRow>(query);
    if (rows.length > 0) return { rows, limit: query.limit };
  }
  const scope = await db.query<{ scope_id: string }>(SCOPE_ID_SQL, scopeParams(options));
  const scopeId = scope.rows[0]?.scope_id;
  if (scopeId === undefined) {
    scopeIds.delete(key);
    return { rows: [], limit: options.limit ?? DEFAULT_PAGE_LIMIT };
  }
  const query = build(scopeId);
  // The same scope, and its page was empty: nothing to read again.
  if (scopeId === known) return { rows: [], limit: query.limit };
  scopeIds.set(key, scopeId);
  return { rows: (await db.query<ListRow>(query)).rows, limit: query.limit };
}

/** The SQL of one page, exported so the benchmark runs exactly the store's queries through raw pg. */
export interface ListQuery {
  text: string;
  values: unknown[];
  rowMode: 'array';
  limit: number;
}

/** A read's options, checked: the page size, and each condition given (the cursor as its position). */
interface ListConditions {
  limit: number;
  after?: string;
  modifiedAfter?: Date;
  actions?: LastAction[];
  ids?: string[];
}

/** Validates a read, so a bad request fails the same whether or not the scope exists. */
function listConditions(options: ListRecordsOptions): ListConditions {
  const limit = options.limit ?? DEFAULT_PAGE_LIMIT;
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_LIMIT) {
    throw new ServiceError(
      'invalid_limit',
      `limit must be an integer from 1 to ${MAX_PAGE_LIMIT}, got ${String(limit)}`,
    );
  }
  const conditions: ListConditions = { limit };
  if (options.cursor !== undefined) conditions.after = decodeCursor(options.cursor);
  if (options.modifiedAfter !== undefined) {
    if (!(options.modifiedAfter instanceof Date) || Number.isNaN(options.modifiedAfter.getTime())) {
      throw new ServiceError('invalid_modified_after', 'modified_after must be a valid date-time');
    }
    conditions.modifiedAfter = options.modifiedAfter;
  }
  if (options.filter !== undefined) {
    const unknown = options.filter.filter((action) => !LAST_ACTIONS.includes(action));
    if (unknown.length > 0 || options.filter.length === 0) {
      throw new ServiceError(
        'invalid_filter',
        `filter takes one or more of added, updated, deleted; got ${options.filter.length === 0 ? 'nothing' : unknown.join(', ')}`,
      );
    }
    conditions.actions = [...new Set(options.filter)];
  }
  if (options.ids !== undefined) {
    if (options.ids.length > MAX_IDS_PER_READ) {
      throw new ServiceError('invalid_ids', `at most ${MAX_IDS_PER_READ} ids per read, got ${options.ids.length}`);
    }
    conditions.ids = options.ids.map((id: unknown, index) => {
      if ((typeof id !== 'string' || id.length === 0) && !(typeof id === 'number' && Number.isFinite(id))) {
        throw new ServiceError('invalid_ids', `ids[${index}] is not a record id (a non-empty string or a number)`);
      }
      return String(id);
    });
  }
  return conditions;
}

/**
 * Validates a read and returns the builder of its page query for the scope, once resolved. The query
 * returns nothing unless the scope row still exists with that id and key (see readPage).
 */
export function listQueryBuilder(options: ListRecordsOptions): (scopeId: string) => ListQuery {
  const { limit, after, modifiedAfter, actions, ids } = listConditions(options);
  const values: unknown[] = [null, ...scopeParams(options)];
  const conditions = [
    'scope_id = $1',
    'EXISTS (SELECT 1 FROM record_scopes s WHERE s.scope_id = $1 AND s.environment_id = $2 AND s.integration_id = $3 AND s.connection_id = $4 AND s.model = $5)',
  ];
  const condition = (value: unknown, sql: (param: string) => string) => {
    values.push(value);
    conditions.push(sql(`$${values.length}`));
  };
  if (after !== undefined) condition(after, (param) => `position > ${param}::bigint`);
  if (modifiedAfter !== undefined) condition(modifiedAfter, (param) => `last_modified_at >= ${param}`);
  if (actions !== undefined) condition(actions, (param) => `last_action = ANY(${param}::text[])`);
  if (ids !== undefined) condition(ids, (param) => `id = ANY(${param}::text[])`);
  values.push(limit + 1);
  const text = `SELECT ${LIST_COLUMNS} FROM records
           WHERE ${conditions.join(' AND ')} ORDER BY position LIMIT $${values.length}`;
  return (scopeId) => ({ text, values: [scopeId, ...values.slice(1)], rowMode: 'array', limit });
}

/** A record's `_service_metadata`, added on the way out (the stored object is the script's record). */
function metadataOf(row: ListRow): StoredRecord[typeof METADATA_KEY] {
  return {
    first_seen_at: row[2],
    last_modified_at: row[3],
    last_action: row[4],
    deleted_at: row[5],
    cursor: encodeCursor(row[6]),
  };
}

function toPage(rows: ListRow[], limit: number): RecordPage {
  const page = rows.length > limit ? rows.slice(0, limit) : rows;
  const records = page.map((row) => {
    const record = JSON.parse(row[1]) as Record<string, unknown>;
    record[METADATA_KEY] = metadataOf(row);
    return record as StoredRecord;
  });
  const last = page[page.length - 1];
  return { records, next_cursor: rows.length > limit && last ? encodeCursor(last[6]) : null };
}

/**
 * The page as toPage would give it, written as JSON.stringify would write that, in one string: each
 * stored record's text (the canonical JSON of a JSON object, which never holds METADATA_KEY:
 * canonicalRecordJson drops it) with the metadata member spliced in before its closing brace. The
 * metadata's values need no escaping: instants and cursors are ASCII letters, digits and `-:._`, and
 * the last action one of three words (test/records/postgresRecordStore.test.ts compares the two pages
 * byte for byte). Exported for bench/api.ts, whose references encode the rows of the same statement
 * into the same answer.
 */
export function toPageJson(rows: ListRow[], limit: number): RecordPageJson {
  const count = Math.min(rows.length, limit);
  let json = '{"records":[';
  for (let i = 0; i < count; i++) {
    const [, data, firstSeenAt, lastModifiedAt, lastAction, deletedAt, position] = rows[i]!;
    const body = data.slice(0, data.lastIndexOf('}')).trimEnd();
    json += `${i === 0 ? '' : ','}${body}${body.endsWith('{') ? '' : ','}"${METADATA_KEY}":{"first_seen_at":"${firstSeenAt}","last_modified_at":"${lastModifiedAt}","last_action":"${lastAction}","deleted_at":${deletedAt === null ? 'null' : `"${deletedAt}"`},"cursor":"${encodeCursor(position)}"}}`;
  }
  const last = rows[count - 1];
  const next = rows.length > limit && last ? `"${encodeCursor(last[6])}"` : 'null';
  return { json: `${json}],"next_cursor":${next}}`, count };
}

/**
 * The records module's share of an environment (src/db/environmentHoldings.ts). Scopes left means a
 * deleted connection's records are still being erased: the environment waits for that. The records'
 * part of run history goes with the environment.
 */
export const recordEnvironmentHoldings: EnvironmentHoldings = {
  async blocker(client, environmentId) {
    const { rows } = await client.query<{ n: string }>(
      'SELECT count(*) AS n FROM record_scopes WHERE environment_id = $1',
      [environmentId],
    );
    const count = Number(rows[0]?.n ?? 0);
    if (count === 0) return undefined;
    return {
      key: 'record_scopes',
      count,
      message: `records of ${count} deleted connection scope(s) being erased; try again shortly`,
    };
  },
  remove: (client, environmentId) => deleteEnvironmentRows(client, environmentId, ['record_sync_runs']),
};
