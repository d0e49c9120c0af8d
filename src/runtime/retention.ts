/**
 * Retention: the tables that grow with every run are trimmed to an age the operator chooses
 * (docs/configuration.md "Retention"). Every worker process runs the purge on the records-maintenance
 * rhythm (src/records/maintenance.ts); a Postgres advisory lock lets one process at a time do it, the
 * others skip the round. Retention only schedules: each table's store deletes its own rows
 * (`expireBefore`, src/db/expiry.ts), in batches, each its own short statement, so the purge never
 * holds locks for long.
 *
 * payload_blobs is special: a blob is the body of a claim check that a Temporal history refers to, and
 * a history is read again whenever its workflow replays (a worker restart, a query) for as long as
 * Temporal keeps it: while the workflow is open, and for the namespace's retention after it closed.
 * A history that refers to a blob belongs to an execution that was open when the blob was last
 * written, so it started before that. The purge therefore asks Temporal for the oldest start of any
 * execution it still keeps (open, or closed and not yet removed by namespace retention) and removes
 * only blobs last written before that, and before the configured age.
 */
import type { Client } from '@temporalio/client';
import type { Expiring } from '../db/expiry.js';
import type { Pool } from '../db/pool.js';
import { retentionDeletedRows, retentionLastSuccess } from '../metrics/index.js';
import { lineLog } from '../log.js';

/** How long each table keeps its rows, in milliseconds; null keeps them forever. */
export interface RetentionPolicy {
  /** sync_runs (GET /sync/runs, the dashboard's chart); the latest run of each sync always stays. */
  syncRuns: number | null;
  /** script_logs (svc.log lines, GET /logs). */
  scriptLogs: number | null;
  /** webhook_deliveries (GET /webhook-deliveries). */
  webhookDeliveries: number | null;
  /** payload_blobs, and only once no history Temporal keeps can refer to them (above). */
  payloadBlobs: number | null;
  /** script_steps, the step ledger's leftovers (a run's steps are forgotten at its end or at its sync's next run; this also trims an open run's oldest rows). */
  stepLedger: number | null;
}

/**
 * The oldest start time among the executions Temporal still keeps that started before `before`;
 * `before` itself when there are none; undefined when it cannot tell (then no blob is removed).
 */
export type TemporalHorizon = (before: Date) => Promise<Date | undefined>;

/**
 * The horizon from Temporal's visibility: every execution of the namespace, open or closed, that
 * started before `before`. Closed executions leave visibility with their history when the namespace's
 * retention removes them, so what is listed is exactly what may still be replayed or read.
 */
export function temporalHorizon(client: Client, options: { maxExecutions?: number } = {}): TemporalHorizon {
  const maxExecutions = options.maxExecutions ?? 100_000;
  return async (before) => {
    let oldest = before;
    let seen = 0;
    const query = `StartTime < "${before.toISOString()}"`;
    for await (const execution of client.workflow.list({ query, pageSize: 1000 })) {
      // Too many long-lived executions to list each round: keep every blob rather than guess.
      if (++seen > maxExecutions) return undefined;
      if (execution.startTime < oldest) oldest = execution.startTime;
    }
    return oldest;
  };
}

/** The store that owns each table of the policy (src/service.ts builds them). */
export type RetentionStores = Record<keyof RetentionPolicy, Expiring>;

export interface PurgeOptions {
  /** For the advisory lock that lets one process at a time purge; the stores delete on its connection. */
  db: Pool;
  stores: RetentionStores;
  policy: RetentionPolicy;
  /** Without it no blob is removed. */
  horizon?: TemporalHorizon | undefined;
  /** Rows per DELETE statement. @default 5000 */
  batchSize?: number;
  /**
   * How far Temporal's clock (execution start times) may be ahead of Postgres's (last_written_at):
   * blobs are kept for this much longer. @default 5 minutes
   */
  clockSkewMs?: number;
  now?: () => Date;
  log?: (line: string) => void;
}

/** The table each store of the policy owns: the `table` label of the deleted-rows metric. */
const TABLES = {
  scriptLogs: 'script_logs',
  webhookDeliveries: 'webhook_deliveries',
  syncRuns: 'sync_runs',
  stepLedger: 'script_steps',
  payloadBlobs: 'payload_blobs',
} as const satisfies Record<keyof RetentionPolicy, string>;

export type PurgeCounts = Record<(typeof TABLES)[keyof RetentionPolicy], number>;

/** One id of the lock that lets one process at a time purge (pg_try_advisory_lock's two-key form). */
const RETENTION_LOCK: [number, number] = [0x5e41, 0x7e7e];

/**
 * One round of the purge: the rows of every table past its retention. Returns what was deleted per
 * table, or undefined when another process holds the purge lock.
 */
export async function purgeExpired(options: PurgeOptions): Promise<PurgeCounts | undefined> {
  const { db, policy, stores } = options;
  const now = (options.now ?? (() => new Date()))();
  const log = options.log ?? lineLog('retention');
  const client = await db.connect();
  try {
    const locked = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, $2) AS ok', RETENTION_LOCK);
    if (!locked.rows[0]?.ok) return undefined;
    try {
      const counts: PurgeCounts = {
        sync_runs: 0,
        script_logs: 0,
        webhook_deliveries: 0,
        payload_blobs: 0,
        script_steps: 0,
      };
      const expire = async (kind: keyof RetentionPolicy, cutoff: Date): Promise<void> => {
        const table = TABLES[kind];
        counts[table] = await stores[kind].expireBefore(cutoff, { batchSize: options.batchSize, client });
        if (counts[table] > 0) retentionDeletedRows.inc({ table }, counts[table]);
      };
      const byAge = (retention: number): Date => new Date(now.getTime() - retention);
      for (const kind of ['scriptLogs', 'webhookDeliveries', 'syncRuns', 'stepLedger'] as const) {
        const retention = policy[kind];
        if (retention !== null) await expire(kind, byAge(retention));
      }
      if (policy.payloadBlobs !== null) {
        const oldest = byAge(policy.payloadBlobs);
        const horizon = await options.horizon?.(oldest).catch((error: unknown) => {
          log(
            `[retention] keeping every payload blob this round: Temporal's visibility did not answer: ${(error as Error).message}`,
          );
          return undefined;
        });
        if (horizon === undefined) {
          if (options.horizon)
            log('[retention] keeping every payload blob this round: the oldest execution is unknown');
        } else {
          const before = new Date(Math.min(oldest.getTime(), horizon.getTime()) - (options.clockSkewMs ?? 300_000));
          await expire('payloadBlobs', before);
        }
      }
      retentionLastSuccess.set(Date.now() / 1000);
      return counts;
    } finally {
      await client.query('SELECT pg_advisory_unlock($1, $2)', RETENTION_LOCK);
    }
  } finally {
    client.release();
  }
}
