/**
 * The records cache's periodic job: deletes what is left of interrupted erases. An erase makes its
 * records unreachable in one short transaction and deletes them afterwards (docs/records.md "Erase");
 * a process that dies in between leaves them queued in `record_scopes_detached`. Every worker process
 * runs this; several at once share the queue (each scope is taken with SKIP LOCKED).
 */
import { lineLog, type LineLog } from '../log.js';
import type { RecordStore } from './types.js';

/** How often the worker looks for erased records left behind. */
export const PURGE_INTERVAL_MS = 10 * 60 * 1000;

export interface Maintenance {
  /** Stops the job; resolves once a purge in progress has finished. */
  stop(): Promise<void>;
}

export function startRecordsMaintenance(
  store: Pick<RecordStore, 'purgeErasedRecords'>,
  options: {
    intervalMs?: number;
    log?: LineLog;
    /** Other purges of the same rhythm (the step ledger's leftovers), by what they delete. */
    also?: Record<string, () => Promise<number>>;
  } = {},
): Maintenance {
  const intervalMs = options.intervalMs ?? PURGE_INTERVAL_MS;
  const log = options.log ?? lineLog('maintenance');
  let running: Promise<void> = Promise.resolve();
  const purge = (): void => {
    running = running.then(async () => {
      try {
        const purged = await store.purgeErasedRecords();
        if (purged > 0) log(`[maintenance] deleted ${purged} records left by interrupted erases`, 'info');
        for (const [what, purgeMore] of Object.entries(options.also ?? {})) {
          const more = await purgeMore();
          if (more > 0) log(`[maintenance] deleted ${more} ${what}`, 'info');
        }
      } catch (error) {
        // Postgres may be restarting: the next round tries again, nothing is lost meanwhile.
        log(
          `[maintenance] purging erased records failed (next try in ${Math.round(intervalMs / 1000)} s): ${(error as Error).message}`,
        );
      }
    });
  };
  purge();
  const timer = setInterval(purge, intervalMs);
  timer.unref();
  return {
    async stop() {
      clearInterval(timer);
      await running;
    },
  };
}
