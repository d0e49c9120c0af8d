/**
 * How many runs an environment has going at once, bounded per environment (issue 29; docs/operations.md
 * "Limits per environment"): an action takes a slot when the API starts it, a sync run when it begins
 * (its `beginRun` step), and each gives it back when it ends (the API when the action answered, the sync
 * entity when it records the run, or the service when it stops the entity). Owns the table
 * `run_slots`. Several API and worker processes share the bound: a transaction per environment and
 * kind, ordered by an advisory lock. A slot whose holder vanished (a process killed mid-run) lapses at
 * its expiry.
 */
import { holdingsOfTables } from '../db/environmentHoldings.js';
import { inTransaction, type Pool } from '../db/pool.js';

export type RunKind = 'action' | 'sync';

export interface TakeSlot {
  environmentId: string;
  kind: RunKind;
  /** The run's workflow id: taking again the slot a run holds (a retried step) renews it. */
  runId: string;
  limit: number;
  /** When the slot lapses if nobody gives it back. */
  ttlMs: number;
  /**
   * The sync entity whose run this is (its workflow id, verified by the caller): a slot another run of
   * the same entity holds is handed over to this one, not counted. An entity runs one run at a time,
   * so such a slot is its previous execution's, whose run continues in this one (issue 32) or that
   * ended without giving it back; counting it, a bound of 1 kept a continuing run from ever going on.
   */
  handOverFrom?: string;
}

export function createRunSlots({ db }: { db: Pool }) {
  return {
    /** Takes a slot for the run: false when the environment has `limit` runs of the kind going. */
    async take(slot: TakeSlot): Promise<boolean> {
      return inTransaction(db, async (client) => {
        await client.query("SELECT pg_advisory_xact_lock(hashtext('run_slots'), hashtext($1 || ':' || $2))", [
          slot.environmentId,
          slot.kind,
        ]);
        await client.query('DELETE FROM run_slots WHERE environment_id = $1 AND kind = $2 AND expires_at < now()', [
          slot.environmentId,
          slot.kind,
        ]);
        if (slot.handOverFrom !== undefined) {
          const prefix = `${slot.handOverFrom}:run:`;
          await client.query(
            'DELETE FROM run_slots WHERE environment_id = $1 AND kind = $2 AND left(run_id, length($3)) = $3 AND run_id <> $4',
            [slot.environmentId, slot.kind, prefix, slot.runId],
          );
        }
        const { rows } = await client.query<{ going: string }>(
          'SELECT count(*) AS going FROM run_slots WHERE environment_id = $1 AND kind = $2 AND run_id <> $3',
          [slot.environmentId, slot.kind, slot.runId],
        );
        if (Number(rows[0]?.going ?? 0) >= slot.limit) return false;
        await client.query(
          `INSERT INTO run_slots (run_id, environment_id, kind, expires_at)
           VALUES ($1, $2, $3, now() + make_interval(secs => $4::float8 / 1000))
           ON CONFLICT (run_id) DO UPDATE SET expires_at = EXCLUDED.expires_at`,
          [slot.runId, slot.environmentId, slot.kind, slot.ttlMs],
        );
        return true;
      });
    },

    /** Gives the run's slot back (idempotent). */
    async release(runId: string): Promise<void> {
      await db.query('DELETE FROM run_slots WHERE run_id = $1', [runId]);
    },

    /**
     * Gives back the slots of a sync entity's runs (`<entityId>:run:<uuid>`): the entity was stopped (its
     * sync removed, its connection deleted), so the run it would have recorded never gives its slot back.
     */
    async releaseEntity(entityId: string): Promise<void> {
      const prefix = `${entityId}:run:`;
      await db.query("DELETE FROM run_slots WHERE kind = 'sync' AND left(run_id, length($1)) = $1", [prefix]);
    },
  };
}

export type RunSlots = ReturnType<typeof createRunSlots>;

/** Deleting an environment removes its slots. */
export const runSlotEnvironmentHoldings = holdingsOfTables('run_slots');
