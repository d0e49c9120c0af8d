/**
 * The records cache contract (ARCHITECTURE.md "Records cache", SPEC.md "Record deletion"). The
 * runtime writes through it, the API reads through it; its Postgres implementation is in
 * postgresRecordStore.ts.
 */

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

export interface SaveRecordsOptions extends SyncScope {
  model: string;
  records: readonly Record<string, unknown>[];
  /** The run that writes; `track_deletes` later marks what this run did not save. */
  runId: string;
}

export interface DeleteRecordsOptions extends SyncScope {
  model: string;
  records: readonly { id: unknown }[];
  runId: string;
}

export interface ListRecordsOptions extends RecordScope {
  model: string;
  /** Opaque cursor from a previous page's `next_cursor` or a record's `_service_metadata.cursor`. */
  cursor?: string | undefined;
  /** Page size; the store applies its default and maximum. */
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

export interface RecordStore {
  /** Upserts by (connection, model, id); the last occurrence of an id in the batch wins. */
  saveRecords(options: SaveRecordsOptions): Promise<WriteSummary>;
  /** Soft-deletes by id. */
  deleteRecords(options: DeleteRecordsOptions): Promise<WriteSummary>;
  /**
   * `track_deletes` after a successful full run: every record of the sync and model that `runId`
   * did not save is marked deleted. Never called for a failed or cancelled run.
   */
  markUnseenDeleted(options: SyncScope & { model: string; runId: string }): Promise<WriteSummary>;
  listRecords(options: ListRecordsOptions): Promise<RecordPage>;
  countRecords(options: RecordScope & { model: string; includeDeleted?: boolean }): Promise<number>;
  /** Erases every record a sync wrote, for all connections (a deploy removed the sync). */
  eraseSync(options: { environmentId: string; integrationId: string; syncName: string }): Promise<number>;
  /** Erases every record of one connection (the connection was deleted). */
  eraseConnection(options: RecordScope): Promise<number>;
}
