/**
 * The history of sync runs: what each finished execution did, for charts and for GET /sync/runs. The
 * entity workflow records a run once it has its outcome; the latest result alone lives in the
 * workflow's state (the status query).
 */
import type { Pool } from '../db/pool.js';
import { holdingsOfTables } from '../db/environmentHoldings.js';
import { deleteInBatches, type ExpireOptions } from '../db/expiry.js';
import type { WriteSummary } from '../records/types.js';

export interface SyncRunRecord {
  runId: string;
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
  mode: string;
  status: 'success' | 'failed';
  startedAt: string;
  finishedAt: string;
  models: Record<string, WriteSummary>;
  error: { code: string; message: string } | null;
  /** The queued webhook (src/webhooks/inboundQueue.ts) the run handled: recording the run removes it. */
  webhookQueueId?: string | undefined;
  /** A run that continued past one execution (issue 32): the run id of each, oldest first. */
  executions?: string[] | undefined;
}

export interface ListSyncRunsOptions {
  environmentId: string;
  integrationId: string;
  connectionId?: string | undefined;
  syncNames?: readonly string[] | undefined;
  /** Newest first; @default 50, at most 500. */
  limit?: number | undefined;
}

interface SyncRunRow {
  run_id: string;
  environment_id: string;
  integration_id: string;
  connection_id: string;
  sync_name: string;
  mode: string;
  status: 'success' | 'failed';
  started_at: Date;
  finished_at: Date;
  models: Record<string, WriteSummary>;
  error_code: string | null;
  error_message: string | null;
  executions: string[] | null;
}

export function createRunHistory({ db }: { db: Pool }) {
  return {
    /** Idempotent: a replayed or retried write of the same run changes nothing. True when this call stored it. */
    async record(run: SyncRunRecord): Promise<boolean> {
      const { rowCount } = await db.query(
        `INSERT INTO sync_runs (run_id, environment_id, integration_id, connection_id, sync_name, mode, status,
                                started_at, finished_at, models, error_code, error_message, executions)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) ON CONFLICT (run_id) DO NOTHING`,
        [
          run.runId,
          run.environmentId,
          run.integrationId,
          run.connectionId,
          run.syncName,
          run.mode,
          run.status,
          run.startedAt,
          run.finishedAt,
          JSON.stringify(run.models),
          run.error?.code ?? null,
          run.error?.message ?? null,
          run.executions ? JSON.stringify(run.executions) : null,
        ],
      );
      return rowCount === 1;
    },

    async list(options: ListSyncRunsOptions): Promise<SyncRunRecord[]> {
      const limit = Math.min(Math.max(options.limit ?? 50, 1), 500);
      const result = await db.query<SyncRunRow>(
        `SELECT * FROM sync_runs
          WHERE environment_id = $1 AND integration_id = $2
            AND ($3::text IS NULL OR connection_id = $3)
            AND ($4::text[] IS NULL OR sync_name = ANY($4))
          ORDER BY finished_at DESC LIMIT $5`,
        [options.environmentId, options.integrationId, options.connectionId ?? null, options.syncNames ?? null, limit],
      );
      return result.rows.map((row) => ({
        runId: row.run_id,
        environmentId: row.environment_id,
        integrationId: row.integration_id,
        connectionId: row.connection_id,
        syncName: row.sync_name,
        mode: row.mode,
        status: row.status,
        startedAt: row.started_at.toISOString(),
        finishedAt: row.finished_at.toISOString(),
        models: row.models,
        error: row.error_code === null ? null : { code: row.error_code, message: row.error_message ?? '' },
        ...(row.executions ? { executions: row.executions } : {}),
      }));
    },

    /**
     * The syncs whose latest run failed, per connection of the environment given: what the connection
     * lists show as `errors` of type `sync` (the run id leads to its log lines in GET /logs).
     */
    async latestFailures(
      environmentId: string,
      connections: readonly { integrationId: string; connectionId: string }[],
    ): Promise<{ integrationId: string; connectionId: string; syncName: string; runId: string }[]> {
      if (connections.length === 0) return [];
      const { rows } = await db.query<{
        integration_id: string;
        connection_id: string;
        sync_name: string;
        run_id: string;
        status: string;
      }>(
        `SELECT * FROM (
           SELECT DISTINCT ON (r.integration_id, r.connection_id, r.sync_name)
                  r.integration_id, r.connection_id, r.sync_name, r.run_id, r.status
             FROM sync_runs r
             JOIN unnest($2::text[], $3::text[]) AS c(integration_id, connection_id)
               ON c.integration_id = r.integration_id AND c.connection_id = r.connection_id
            WHERE r.environment_id = $1
            ORDER BY r.integration_id, r.connection_id, r.sync_name, r.finished_at DESC
         ) latest WHERE status = 'failed'`,
        [environmentId, connections.map((c) => c.integrationId), connections.map((c) => c.connectionId)],
      );
      return rows.map((row) => ({
        integrationId: row.integration_id,
        connectionId: row.connection_id,
        syncName: row.sync_name,
        runId: row.run_id,
      }));
    },

    /**
     * Deletes the runs that finished before `cutoff` (retention: RETENTION_SYNC_RUNS), but for the latest
     * run of each sync while its connection exists: it is the sync's last outcome (the `errors` of GET
     * /connections, the dashboard), however long ago it ran.
     */
    expireBefore: (cutoff: Date, options?: ExpireOptions): Promise<number> =>
      deleteInBatches(
        db,
        `DELETE FROM sync_runs r WHERE r.finished_at < $1
           AND r.run_id IN (
             SELECT o.run_id FROM sync_runs o
              WHERE o.finished_at < $1
                AND (EXISTS (SELECT 1 FROM sync_runs n
                              WHERE n.environment_id = o.environment_id AND n.integration_id = o.integration_id
                                AND n.connection_id = o.connection_id AND n.sync_name = o.sync_name
                                AND n.finished_at > o.finished_at)
                     OR NOT EXISTS (SELECT 1 FROM connections c
                                     WHERE c.environment_id = o.environment_id
                                       AND c.provider_config_key = o.integration_id
                                       AND c.connection_id = o.connection_id))
              LIMIT $2)`,
        cutoff,
        options,
      ),
  };
}

export type RunHistory = ReturnType<typeof createRunHistory>;

/** Run history goes with its environment (src/db/environmentHoldings.ts). */
export const runHistoryEnvironmentHoldings = holdingsOfTables('sync_runs');
