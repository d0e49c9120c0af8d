/**
 * The step ledger (table script_steps, docs/architecture.md "Exact resume").
 *
 * A local activity's result reaches Temporal only when its workflow task completes or heartbeats, so a
 * worker that dies loses the markers of up to a few seconds of steps, and the run's replay executes
 * those steps again. The ledger makes each step's outcome durable the moment the step completes,
 * keyed by the run (Temporal's run id) and the step (its index in the run, the same on every replay):
 * a step executed again finds its outcome here and answers with it instead of acting again.
 *
 * - Requests: the outcome (the response, or a final failure) is written right after the answer
 *   arrives, encrypted (responses carry users' data). Only the request in flight at the crash is sent
 *   twice.
 * - Record writes: the ledger row is taken in the same transaction as the records
 *   (`onceInTransaction`), so a write is applied and counted exactly once.
 *
 * Rows are needed only until Temporal holds the steps' results: the run says which steps that is
 * (`forget`), and a periodic purge removes what finished runs left.
 */
import type { Encryptor } from '../connections/encryption.js';
import type { Pool, PoolClient } from '../db/pool.js';

export interface StepKey {
  /** Temporal's run id of the workflow execution. */
  runId: string;
  /** The step's index in its run. */
  step: number;
}

/** A step's recorded outcome: its value, or a failure that is final (never retried). */
export type StepOutcome<T> =
  { ok: true; value: T } | { ok: false; failure: { type: string; message: string; details: unknown[] } };

export interface StepLedger {
  /** The outcome of a step that already completed, if it did. */
  recall<T>(key: StepKey): Promise<StepOutcome<T> | undefined>;
  /** Records a step's outcome (the first record of a step wins). */
  remember(key: StepKey, outcome: StepOutcome<unknown>): Promise<void>;
  /** Forgets the steps of a run below this index: Temporal holds their results now. */
  forget(runId: string, below: number): Promise<void>;
}

const PURPOSE = 'step_outcome';

/**
 * Runs `work` (which writes in `client`'s open transaction) once per step: the ledger row is taken
 * first in the same transaction, so a repeated (or concurrent) execution of the step waits for the
 * first to commit and then answers with its result instead of writing again.
 */
export async function onceInTransaction<T>(client: PoolClient, key: StepKey, work: () => Promise<T>): Promise<T> {
  const taken = await client.query(
    'INSERT INTO script_steps (run_id, step) VALUES ($1, $2) ON CONFLICT (run_id, step) DO NOTHING',
    [key.runId, key.step],
  );
  if (taken.rowCount === 0) {
    const { rows } = await client.query<{ result: T }>(
      'SELECT result FROM script_steps WHERE run_id = $1 AND step = $2',
      [key.runId, key.step],
    );
    return rows[0]!.result;
  }
  const result = await work();
  await client.query('UPDATE script_steps SET result = $3 WHERE run_id = $1 AND step = $2', [
    key.runId,
    key.step,
    JSON.stringify(result),
  ]);
  return result;
}

export function createStepLedger({ db, encryptor }: { db: Pool; encryptor: Encryptor }): StepLedger {
  return {
    async recall<T>(key: StepKey): Promise<StepOutcome<T> | undefined> {
      const { rows } = await db.query<{ outcome: string | null }>(
        'SELECT outcome FROM script_steps WHERE run_id = $1 AND step = $2',
        [key.runId, key.step],
      );
      const stored = rows[0]?.outcome;
      return stored ? (encryptor.decryptJson(stored, PURPOSE) as StepOutcome<T>) : undefined;
    },

    async remember(key, outcome) {
      await db.query(
        `INSERT INTO script_steps (run_id, step, outcome) VALUES ($1, $2, $3) ON CONFLICT (run_id, step) DO NOTHING`,
        [key.runId, key.step, encryptor.encryptJson(outcome, PURPOSE)],
      );
    },

    async forget(runId, below) {
      await db.query('DELETE FROM script_steps WHERE run_id = $1 AND step < $2', [runId, below]);
    },
  };
}
