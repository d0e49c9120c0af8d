/**
 * The step ledger (table script_steps, docs/architecture.md "Exact resume").
 *
 * A local activity's result reaches Temporal only when its workflow task completes or heartbeats, so a
 * worker that dies loses the markers of up to a few seconds of steps, and the run's replay executes
 * those steps again. The ledger makes each step's outcome durable the moment the step completes,
 * keyed by the run (Temporal's run id) and the step (its index in the run, the same on every replay):
 * a step executed again finds its outcome here and answers with it instead of acting again.
 *
 * - Requests: the outcome (the response, or a final failure) is kept, encrypted (responses carry
 *   users' data), from the moment the answer arrives, and written with the run's next step: in the
 *   transaction of its next record write (no round trip of its own, issue 31), before its next request
 *   is sent, or DEFER_MS after the answer, whichever comes first. So a sequential script still has at
 *   most one request whose answer is not yet recorded: the one in flight at a crash, or the one just
 *   answered; only that one is sent twice.
 * - Record writes: the ledger row is taken in the same transaction as the records
 *   (`onceInTransaction`), so a write is applied and counted exactly once.
 *
 * Rows are needed only until Temporal holds the steps' results. They are forgotten only when that is
 * sure: by the ordinary activity `forgetSteps` (it runs after the workflow task that scheduled it is
 * recorded; workflows/svc.ts schedules it at a task cut, once the answers the ledger keeps for the
 * run pass LEDGER_KEPT_BYTES, and at a run's end), when the execution has closed (the next run's `beginRun`), and by a periodic purge of rows older
 * than RETENTION_STEP_LEDGER (what failed runs left, and an open run's oldest rows).
 */
import type { Encryptor } from '../connections/encryption.js';
import { expiryByAge, type Expiring } from '../db/expiry.js';
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

/** A step's outcome as the ledger stores it (encrypted), not yet written: see StepLedger.defer. */
export interface StepRow {
  step: number;
  outcome: string;
}

/** `expireBefore` removes what runs left (a failed run does not forget its steps): retention's RETENTION_STEP_LEDGER. */
export interface StepLedger extends Expiring {
  /** The outcome of a step that already completed, if it did (a deferred one included). */
  recall<T>(key: StepKey): Promise<StepOutcome<T> | undefined>;
  /** Records a step's outcome now (the first record of a step wins). */
  remember(key: StepKey, outcome: StepOutcome<unknown>): Promise<void>;
  /**
   * Keeps a request's outcome to be recorded with the run's next step (`take`, `flush`), or by itself
   * DEFER_MS later. `recall` answers from it meanwhile.
   */
  defer(key: StepKey, outcome: StepOutcome<unknown>): void;
  /** `defer` of an outcome its caller already serialized (`JSON.stringify` of the StepOutcome). */
  deferJson(key: StepKey, outcomeJson: string): void;
  /**
   * Runs a write of the run with its deferred outcomes, which the write records in its own transaction
   * (WriteStep.earlier); when the write fails they stay deferred.
   */
  withDeferred<T>(runId: string, write: (earlier: StepRow[]) => Promise<T>): Promise<T>;
  /** Writes the run's deferred outcomes now: before a request of the run is sent. */
  flush(runId: string): Promise<void>;
  /** Forgets the steps of a run below this index: Temporal holds their results now. */
  forget(runId: string, below: number): Promise<void>;
  /**
   * The value a run committed to at its start (step -1): `value` when this is the first commit of the
   * run, else what the first commit stored (a run whose first workflow task is retried must take the
   * decision its first attempt took, whatever it would decide now).
   */
  commit<T>(runId: string, value: T): Promise<T>;
  /** What the run committed to, if it did. */
  committed<T>(runId: string): Promise<T | null>;
}

/** The ledger's step of a run's commitment (RunCommit); below every step's index. */
export const COMMIT_STEP = -1;

const PURPOSE = 'step_outcome';

/**
 * How long a deferred outcome waits for the run's next step before it is written by itself. The next
 * step of a script that awaits each one comes a few milliseconds later (tens on a loaded machine); a
 * script that computes longer, or runs requests side by side, gets its outcomes written after this.
 */
export const DEFER_MS = 100;

/** Deferred outcomes kept per run at most while their writes fail (the lowest steps go first). */
export const DEFERRED_KEPT = 100;
/** How soon a write of deferred outcomes that failed is tried again. */
export const RETRY_MS = 1000;

// Runs whose steps below some index were forgotten, kept to refuse late deferred rows of theirs.
const FORGOTTEN_KEPT = 10_000;

const INSERT_ROWS_SQL = `INSERT INTO script_steps (run_id, step, outcome)
  SELECT $1, s, o FROM unnest($2::integer[], $3::text[]) AS u(s, o)
  ON CONFLICT (run_id, step) DO NOTHING`;

/** Records deferred outcomes of a run in the caller's transaction (the first record of a step wins). */
export async function recordEarlier(client: PoolClient, runId: string, rows: readonly StepRow[]): Promise<void> {
  if (rows.length === 0) return;
  await client.query(INSERT_ROWS_SQL, [runId, rows.map((row) => row.step), rows.map((row) => row.outcome)]);
}

/**
 * Runs `work` (which writes in `client`'s open transaction) once per step: the ledger row is taken
 * first in the same transaction, so a repeated (or concurrent) execution of the step waits for the
 * first to commit and then answers with its result instead of writing again.
 */
export async function onceInTransaction<T>(
  client: PoolClient,
  key: StepKey & { earlier?: readonly StepRow[] | undefined },
  work: () => Promise<T>,
): Promise<T> {
  await recordEarlier(client, key.runId, key.earlier ?? []);
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

/**
 * Whether the run recorded a step past `key` (in `client`'s transaction): a worker that ran the run
 * before went past that step. A claim of a save at a limit as not executed (`notExecuted`, written only
 * by such a probe: a second save the script called beside the first) is no step anyone went past (a
 * review: counted, it made the first save stand beside the other's cut, and its page was lost).
 */
export async function hasLaterStep(client: PoolClient, key: StepKey, notExecuted: number): Promise<boolean> {
  const { rowCount } = await client.query(
    'SELECT 1 FROM script_steps WHERE run_id = $1 AND step > $2 AND result IS DISTINCT FROM $3::jsonb LIMIT 1',
    [key.runId, key.step, JSON.stringify(notExecuted)],
  );
  return (rowCount ?? 0) > 0;
}

/**
 * What a run committed to at its start (its commit step), if it did; the commit is stored in the clear
 * (it names no credential), so reading it takes no key: SyncControl reads it for the status of an entity
 * whose run began in a workflow task not yet recorded (src/temporal/entityStatus.ts).
 */
export async function readRunCommit<T>(db: Pool, runId: string): Promise<T | null> {
  const { rows } = await db.query<{ result: T }>('SELECT result FROM script_steps WHERE run_id = $1 AND step = $2', [
    runId,
    COMMIT_STEP,
  ]);
  return rows[0]?.result ?? null;
}

export function createStepLedger({ db, encryptor }: { db: Pool; encryptor: Encryptor }): StepLedger {
  // Per run (Temporal's run id): deferred outcomes by step, and the timer that writes them.
  const deferred = new Map<string, { rows: Map<number, string>; timer: NodeJS.Timeout | undefined }>();
  const forgotten = new Map<string, number>();
  // Runs whose deferred outcomes could not be written (said once, until a write succeeds).
  const unrecorded = new Set<string>();

  function take(runId: string): StepRow[] {
    const entry = deferred.get(runId);
    if (!entry) return [];
    deferred.delete(runId);
    clearTimeout(entry.timer);
    return [...entry.rows].map(([step, outcome]) => ({ step, outcome }));
  }

  function put(runId: string, rows: readonly StepRow[], delayMs = DEFER_MS): void {
    const below = forgotten.get(runId) ?? 0;
    const kept = rows.filter((row) => row.step >= below);
    if (kept.length === 0) return;
    let entry = deferred.get(runId);
    if (!entry) {
      entry = { rows: new Map(), timer: undefined };
      deferred.set(runId, entry);
    }
    for (const row of kept) if (!entry.rows.has(row.step)) entry.rows.set(row.step, row.outcome);
    // Postgres away for long: the earliest steps go unrecorded (as a failed write did before), memory stays bounded.
    if (entry.rows.size > DEFERRED_KEPT) {
      const steps = [...entry.rows.keys()].sort((a, b) => a - b);
      for (const step of steps.slice(0, steps.length - DEFERRED_KEPT)) entry.rows.delete(step);
    }
    entry.timer ??= setTimeout(() => {
      flush(runId).then(
        () => unrecorded.delete(runId),
        (error: unknown) => {
          if (unrecorded.has(runId)) return;
          console.warn(`[worker] step ledger: could not record the steps of run ${runId}: ${String(error)}`);
          unrecorded.add(runId);
        },
      );
    }, delayMs).unref();
  }

  /** Writes the run's deferred outcomes; those a failed write leaves are tried again a second later. */
  async function flush(runId: string): Promise<void> {
    const rows = take(runId);
    if (rows.length === 0) return;
    try {
      await db.query(INSERT_ROWS_SQL, [runId, rows.map((row) => row.step), rows.map((row) => row.outcome)]);
    } catch (error) {
      // Kept for the next step or the timer: the request was answered all the same.
      put(runId, rows, RETRY_MS);
      throw error;
    }
  }

  return {
    expireBefore: expiryByAge(db, 'script_steps', 'created_at', ['run_id', 'step']),

    async recall<T>(key: StepKey): Promise<StepOutcome<T> | undefined> {
      const waiting = deferred.get(key.runId)?.rows.get(key.step);
      if (waiting !== undefined) return encryptor.decryptJson(waiting, PURPOSE) as StepOutcome<T>;
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

    defer(key, outcome) {
      put(key.runId, [{ step: key.step, outcome: encryptor.encryptJson(outcome, PURPOSE) }]);
    },

    deferJson(key, outcomeJson) {
      put(key.runId, [{ step: key.step, outcome: encryptor.encrypt(outcomeJson, PURPOSE) }]);
    },

    async withDeferred(runId, write) {
      const rows = take(runId);
      try {
        return await write(rows);
      } catch (error) {
        put(runId, rows);
        throw error;
      }
    },

    flush,

    async forget(runId, below) {
      const entry = deferred.get(runId);
      if (entry) {
        for (const step of entry.rows.keys()) if (step < below) entry.rows.delete(step);
        if (entry.rows.size === 0) take(runId);
      }
      forgotten.set(runId, Math.max(below, forgotten.get(runId) ?? 0));
      unrecorded.delete(runId);
      if (forgotten.size > FORGOTTEN_KEPT) forgotten.delete(forgotten.keys().next().value!);
      await db.query('DELETE FROM script_steps WHERE run_id = $1 AND step < $2', [runId, below]);
    },

    committed: <T>(runId: string) => readRunCommit<T>(db, runId),

    async commit<T>(runId: string, value: T): Promise<T> {
      // One statement: the insert's RETURNING, or (on conflict) the row as it was before it.
      const { rows } = await db.query<{ result: T }>(
        `WITH inserted AS (
           INSERT INTO script_steps (run_id, step, result) VALUES ($1, $2, $3)
           ON CONFLICT (run_id, step) DO NOTHING RETURNING result
         )
         SELECT result FROM inserted
         UNION ALL
         SELECT result FROM script_steps WHERE run_id = $1 AND step = $2`,
        [runId, COMMIT_STEP, JSON.stringify(value)],
      );
      return rows[0]!.result;
    },
  };
}
