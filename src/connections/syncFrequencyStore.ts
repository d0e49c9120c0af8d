/**
 * Per-connection sync frequencies: a connection's own `runs` for one sync, overriding service.yaml's
 * for that connection only. The sync control applies it whenever it hands a sync entity its
 * definition (start, redeploy, pause/start), so the override survives redeploys; it goes with its
 * connection.
 */
import type { Pool } from '../db/pool.js';

export interface SyncFrequencyRef {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
}

export interface SyncFrequency {
  /** As the caller wrote it: `30m`, `every 2 hours`. */
  frequency: string;
  frequencyMs: number;
}

export interface SyncFrequencyStore {
  get(ref: SyncFrequencyRef): Promise<SyncFrequency | undefined>;
  /** Sets the override, or removes it with `null` (the sync follows service.yaml again). */
  set(ref: SyncFrequencyRef, value: SyncFrequency | null): Promise<void>;
}

export function createSyncFrequencyStore({ db }: { db: Pool }): SyncFrequencyStore {
  return {
    async get(ref) {
      const { rows } = await db.query<{ frequency: string; frequency_ms: string }>(
        `SELECT frequency, frequency_ms FROM connection_sync_frequencies
       WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND sync_name = $4`,
        [ref.environmentId, ref.integrationId, ref.connectionId, ref.syncName],
      );
      const row = rows[0];
      return row ? { frequency: row.frequency, frequencyMs: Number(row.frequency_ms) } : undefined;
    },

    async set(ref, value) {
      const key = [ref.environmentId, ref.integrationId, ref.connectionId, ref.syncName];
      if (value === null) {
        await db.query(
          `DELETE FROM connection_sync_frequencies
         WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND sync_name = $4`,
          key,
        );
        return;
      }
      await db.query(
        `INSERT INTO connection_sync_frequencies (environment_id, integration_id, connection_id, sync_name, frequency, frequency_ms)
       VALUES ($1, $2, $3, $4, $5, $6)
       ON CONFLICT (environment_id, integration_id, connection_id, sync_name)
       DO UPDATE SET frequency = EXCLUDED.frequency, frequency_ms = EXCLUDED.frequency_ms, updated_at = now()`,
        [...key, value.frequency, value.frequencyMs],
      );
    },
  };
}
