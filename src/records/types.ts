/**
 * The records cache contract (ARCHITECTURE.md "Records cache", SPEC.md "Record deletion"). The
 * runtime writes through it, the API reads through it; its Postgres implementation is in
 * postgresRecordStore.ts.
 */

import type { StepRow } from '../steps/stepLedger.js';

/** Whose records: one connection of one integration in one environment, and the sync that wrote them. */
export interface RecordScope {
  environmentId: string;
  /** The integration id (provider_config_key). */
  integrationId: string;
  connectionId: string;
}

export interface SyncScope extends RecordScope {
  syncName: string;
}

export type LastAction = 'ADDED' | 'UPDATED' | 'DELETED';

/** The `_service_metadata` every returned record carries. */
export interface RecordMetadata {
  first_seen_at: string;
  last_modified_at: string;
  last_action: LastAction;
  deleted_at: string | null;
  /** Opaque cursor of this record: pass it as `cursor` to read what comes after it. */
  cursor: string;
}

export type StoredRecord = Record<string, unknown> & { id: string | number; _service_metadata: RecordMetadata };

/** Counts of one write, as outbound webhooks and run results report them. */
export interface WriteSummary {
  added: number;
  updated: number;
  deleted: number;
  /** Records whose content was identical to the stored one (nothing changed). */
  unchanged: number;
}

/** A write done once per step of a run (src/steps/stepLedger.ts): Temporal's run id and the step's index. */
export interface WriteStep {
  runId: string;
  step: number;
  /**
   * Outcomes of earlier steps of the same run that the step ledger deferred (requests answered since
   * its last write): recorded in the write's own transaction, whatever becomes of the write itself.
   */
  earlier?: readonly StepRow[] | undefined;
}

export interface SaveRecordsOptions extends SyncScope {
  model: string;
  records: readonly Record<string, unknown>[];
  /** The run that writes; `track_deletes` later marks what this run did not save. */
  runId: string;
  /** When given, the write is applied once per step: a repeat answers the first one's summary. */
  step?: WriteStep | undefined;
}

export interface DeleteRecordsOptions extends SyncScope {
  model: string;
  records: readonly { id: unknown }[];
  runId: string;
  step?: WriteStep | undefined;
}

/** A page as JSON text (RecordStore.listRecordsJson) and how many records it holds. */
export interface RecordPageJson {
  json: string;
  count: number;
}

export interface ListRecordsOptions extends RecordScope {
  model: string;
  /** Opaque cursor from a previous page's `next_cursor` or a record's `_service_metadata.cursor`. */
  cursor?: string | undefined;
  /** Page size, 1 to 1000; default 100. */
  limit?: number | undefined;
  /** Only records modified at or after this instant. */
  modifiedAfter?: Date | undefined;
  /** Only records whose last action is one of these. */
  filter?: readonly LastAction[] | undefined;
  /** Only records with these ids. */
  ids?: readonly string[] | undefined;
}

export interface RecordPage {
  records: StoredRecord[];
  /** Cursor of the next page, or null when this page is the last one for now. */
  next_cursor: string | null;
}

/**
 * Errors (ServiceError codes): `invalid_record` and `invalid_record_id` (status 400, naming the
 * record's position and model; nothing of the batch is stored), `invalid_cursor`, `invalid_limit`,
 * `invalid_filter`, `invalid_ids`, `invalid_modified_after` (400), `run_superseded` (409).
 */
export interface RecordStore {
  /**
   * Upserts by (environment, integration, connection, model, id); the last occurrence of an id in
   * the batch wins. Ids are compared as text: the number 1 and the string "1" are one record, and
   * reads return the `id` as last saved. A record equal to the stored one (same canonical JSON)
   * counts as unchanged and keeps its metadata; a deleted record saved again counts as added. The
   * batch is all or nothing: a bad record (`invalid_record`, `invalid_record_id`) stores none.
   */
  saveRecords(options: SaveRecordsOptions): Promise<WriteSummary>;
  /** Soft-deletes by id. */
  deleteRecords(options: DeleteRecordsOptions): Promise<WriteSummary>;
  /**
   * `track_deletes` after a successful full run: every record of the sync and model that `runId`
   * did not save is marked deleted. Never called for a failed or cancelled run.
   */
  markUnseenDeleted(
    options: SyncScope & {
      model: string;
      runId: string;
      step?: WriteStep | undefined;
      /**
       * Earlier executions of the same run (issue 32: a run that continued in next executions): a record
       * one of them saved counts as seen too.
       */
      alsoSeenBy?: readonly string[] | undefined;
    },
  ): Promise<WriteSummary>;
  listRecords(options: ListRecordsOptions): Promise<RecordPage>;
  /**
   * The same page as `listRecords`, as the JSON text of a RecordPage (`{"records":[…],"next_cursor":…}`),
   * built from the stored JSON of each record without parsing it: what the API answers with.
   */
  listRecordsJson(options: ListRecordsOptions): Promise<RecordPageJson>;
  countRecords(options: RecordScope & { model: string; includeDeleted?: boolean }): Promise<number>;
  /** Records a sync wrote, deleted ones included, across every connection (what removing it erases). */
  countSyncRecords(options: { environmentId: string; integrationId: string; syncName: string }): Promise<number>;
  /**
   * Erases every record a sync wrote, for all connections (a deploy removed the sync), or for one
   * connection when `connectionId` is given (`sync_mode: full_refresh_and_clear_cache`). Also forgets
   * the sync's current run (see `beginRun`). Returns the number of records erased. Records of a
   * model that another sync also wrote are erased only where this sync wrote them last.
   */
  eraseSync(options: EraseSyncOptions): Promise<number>;
  /** Erases every record of one connection (the connection was deleted). Returns the number erased. */
  eraseConnection(options: RecordScope): Promise<number>;
  /**
   * Both erases first make the records unreachable in one short transaction, then delete them in
   * chunks. This deletes what is left of erases whose deleting was deferred or interrupted (a
   * crashed process, say); call it from a periodic job. Returns the number of records deleted.
   */
  purgeErasedRecords(): Promise<number>;
  /**
   * Makes `runId` the run that owns the sync's records for this connection (a fencing token). From
   * then on, `saveRecords`, `deleteRecords` and `markUnseenDeleted` of any other run of the same sync
   * and connection fail with `run_superseded`; a batch of the old run already in flight finishes
   * before this returns. Idempotent for the same run. Syncs that never call it are not fenced.
   */
  beginRun(options: SyncScope & { runId: string }): Promise<BeganRun>;
}

export interface BeganRun {
  /** The run that held the fence before this one (null when none, or this run held it already). */
  previousRunId: string | null;
}

export interface EraseSyncOptions {
  environmentId: string;
  integrationId: string;
  syncName: string;
  /** Only this connection's records of the sync; all connections when omitted. */
  connectionId?: string | undefined;
}
