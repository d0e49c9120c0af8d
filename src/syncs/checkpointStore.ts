/**
 * Checkpoints of sync scripts (issue 32), one per (environment, integration, connection, sync, variant):
 * saved by the run's `saveCheckpoint` step, read by `getCheckpoint`, cleared by the script, by the API
 * (DELETE /sync/checkpoint) and by a full resync. Table `sync_checkpoints` (migration 20261127120000).
 */
import type { Pool, PoolClient } from '../db/pool.js';
import { holdingsOfTables } from '../db/environmentHoldings.js';
import { ServiceError } from '../errors.js';
import { checkCheckpoint, type Checkpoint } from './checkpoint.js';

/** The only variant this service has (src/api/routes/shared.ts). */
export const BASE_VARIANT = 'base';

export interface CheckpointRef {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
  variant?: string | undefined;
}

export interface StoredCheckpoint {
  checkpoint: Checkpoint;
  version: number;
  /** The run (execution) that saved it. */
  runId: string;
  updatedAt: string;
}

interface CheckpointRow {
  checkpoint: Checkpoint;
  version: number;
  run_id: string;
  updated_at: Date;
}

const KEY = 'environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND sync_name = $4 AND variant = $5';
const keyOf = (ref: CheckpointRef) => [
  ref.environmentId,
  ref.integrationId,
  ref.connectionId,
  ref.syncName,
  ref.variant ?? BASE_VARIANT,
];

export class CheckpointStore {
  constructor(private readonly db: Pool) {}

  async get(ref: CheckpointRef): Promise<StoredCheckpoint | null> {
    const { rows } = await this.db.query<CheckpointRow>(
      `SELECT checkpoint, version, run_id, updated_at FROM sync_checkpoints WHERE ${KEY}`,
      keyOf(ref),
    );
    const row = rows[0];
    return row
      ? { checkpoint: row.checkpoint, version: row.version, runId: row.run_id, updatedAt: row.updated_at.toISOString() }
      : null;
  }

  /** Saves it (validated again here: the store takes nothing the script side did not check). Its new version. */
  async save(
    ref: CheckpointRef & { runId: string },
    value: unknown,
    client: Pool | PoolClient = this.db,
  ): Promise<number> {
    const checked = checkCheckpoint(value);
    if (!checked.ok) throw new ServiceError('invalid_checkpoint', checked.problem);
    const { rows } = await client.query<{ version: number }>(
      `INSERT INTO sync_checkpoints (environment_id, integration_id, connection_id, sync_name, variant, checkpoint, run_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7)
       ON CONFLICT (environment_id, integration_id, connection_id, sync_name, variant)
       DO UPDATE SET checkpoint = excluded.checkpoint, run_id = excluded.run_id, updated_at = now(),
                     version = sync_checkpoints.version + 1
       RETURNING version`,
      [...keyOf(ref), JSON.stringify(checked.checkpoint), ref.runId],
    );
    return rows[0]?.version ?? 1;
  }

  /** True when there was one. */
  async clear(ref: CheckpointRef, client: Pool | PoolClient = this.db): Promise<boolean> {
    const { rowCount } = await client.query(`DELETE FROM sync_checkpoints WHERE ${KEY}`, keyOf(ref));
    return (rowCount ?? 0) > 0;
  }
}

/** The checkpoints of an environment go with it. */
export const checkpointEnvironmentHoldings = holdingsOfTables('sync_checkpoints');
