/**
 * Expiry: each store that keeps rows which grow with every run deletes its own rows past a cutoff
 * (`expireBefore`), and retention (src/runtime/retention.ts) only decides when and with which cutoff.
 */
import type { Pool, PoolClient } from './pool.js';

export interface ExpireOptions {
  /** Rows per DELETE statement, so that no statement holds its locks for long. @default 5000 */
  batchSize?: number | undefined;
  /**
   * The connection to delete on instead of one from the store's pool: retention's, which holds its
   * advisory lock, so that a purge needs one connection however small the pool (DATABASE_POOL_SIZE=1).
   */
  client?: PoolClient | undefined;
}

/** A store that owns the expiry of its rows. */
export interface Expiring {
  /** Deletes the rows older than `cutoff` (each store says what "older" means for it); how many went. */
  expireBefore(cutoff: Date, options?: ExpireOptions): Promise<number>;
}

export const DEFAULT_EXPIRE_BATCH = 5000;

/**
 * Runs `sql` (parameters: the cutoff, the batch size) until it deletes fewer rows than a batch; the
 * rows deleted in all. The statement keeps the age condition in its outer WHERE, so that a row written
 * again meanwhile is rechecked under its lock and kept.
 */
export async function deleteInBatches(
  db: Pool,
  sql: string,
  cutoff: Date,
  options: ExpireOptions = {},
): Promise<number> {
  const batchSize = options.batchSize ?? DEFAULT_EXPIRE_BATCH;
  let deleted = 0;
  for (;;) {
    const { rowCount } = await (options.client ?? db).query(sql, [cutoff, batchSize]);
    deleted += rowCount ?? 0;
    if ((rowCount ?? 0) < batchSize) return deleted;
  }
}

/**
 * The expiry of a table whose rows age by one column: deletes the rows with `column` before the cutoff,
 * `key` (the columns of the table's key) naming the rows of each batch.
 */
export function expiryByAge(db: Pool, table: string, column: string, key: readonly string[]): Expiring['expireBefore'] {
  const columns = key.join(', ');
  return (cutoff, options) =>
    deleteInBatches(
      db,
      `DELETE FROM ${table} WHERE ${column} < $1
         AND (${columns}) IN (SELECT ${columns} FROM ${table} WHERE ${column} < $1 LIMIT $2)`,
      cutoff,
      options,
    );
}
