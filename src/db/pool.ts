import pg from 'pg';
import { log } from '../log.js';

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
 * A pg pool that fails fast instead of hanging: a connection attempt gives up after 5 s, and a lost
 * connection (the server restarted or was killed), idle or checked out, is logged rather than
 * crashing the process; queries fail until the server is back, then new connections are opened.
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
    log.warn({ component: 'db' }, `idle connection lost: ${error.message}`);
  });
  // A client checked out of the pool (a transaction, a COPY, a held lock) has no pool listener while
  // it is out: when the server dies (a SIGKILL of the postmaster, a failover) it emits 'error', and an
  // 'error' event nobody listens to ends the process. This listener stays on every client for its
  // whole life; the query in flight fails on its own, and the pool discards the broken client when
  // it is released (it is no longer queryable).
  pool.on('connect', (client) => {
    client.on('error', (error) => {
      log.warn({ component: 'db' }, `connection lost: ${error.message}`);
    });
  });
  return pool;
}

/**
 * Runs `work` in one transaction on one client, committing on success and rolling back on any error.
 * `begin` names an isolation level when the work needs one whatever the server's default.
 */
export async function inTransaction<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
  begin = 'BEGIN',
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query(begin);
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

// Postgres SQLSTATEs of a server that is going away or not back yet: admin_shutdown, crash_shutdown,
// cannot_connect_now, and the connection_exception class.
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '08000', '08001', '08003', '08004', '08006']);
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN']);
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|not queryable|Client was closed|Connection ended/i;

/**
 * Whether an error says Postgres cannot be reached right now (down, restarting, recovering), as
 * opposed to a query that failed on its own: the API answers those with 503, retryable.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current = error, depth = 0; current && typeof current === 'object' && depth < 5; depth++) {
    const { code, message, errors } = current as { code?: unknown; message?: unknown; errors?: unknown };
    if (typeof code === 'string' && (UNAVAILABLE_STATES.has(code) || UNAVAILABLE_CODES.has(code))) return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGES.test(message)) return true;
    // Node's dual-stack connect fails with an AggregateError of the attempts.
    if (Array.isArray(errors) && errors.some((inner) => isDatabaseUnavailable(inner))) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}
