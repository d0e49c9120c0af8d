import pg from 'pg';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

export interface CreatePoolOptions {
  /** Connection string, as DATABASE_URL. */
  url: string;
  /** Most connections this pool opens. */
  max?: number;
  /** Name shown in pg_stat_activity, so an operator can tell the service's processes apart. */
  applicationName?: string;
}

/**
 * A pg pool that fails fast instead of hanging: a connection attempt gives up after 5 s and an idle
 * connection's error (the server restarted, say) is logged rather than crashing the process.
 */
export function createPool({ url, max = 10, applicationName = 'integration-service' }: CreatePoolOptions): Pool {
  const pool = new pg.Pool({
    connectionString: url,
    max,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    application_name: applicationName,
  });
  pool.on('error', (error) => {
    // An idle client lost its server; the pool drops it and the next query opens a fresh one.
    process.stderr.write(`[db] idle connection lost: ${error.message}\n`);
  });
  return pool;
}

/** Runs `work` in one transaction on one client, committing on success and rolling back on any error. */
export async function inTransaction<T>(pool: Pool, work: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
