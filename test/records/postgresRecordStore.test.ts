import { beforeAll, describe, expect, it } from 'vitest';
import { ServiceError } from '../../src/errors.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { loadMigrations } from '../../src/db/migrate.js';
import { createPostgresRecordStore, SCOPE_ID_SQL } from '../../src/records/postgresRecordStore.js';
import type { RecordStore, StoredRecord, SyncScope } from '../../src/records/types.js';
import { uniqueName } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';

let pool: Pool;
let store: RecordStore;

beforeAll(async () => {
  ({ pool } = await useDatabase());
  store = createPostgresRecordStore({ db: pool, chunkSize: 7 });
});

/** A fresh connection of its own for each test, so tests cannot see each other's records. */
function scope(overrides: Partial<SyncScope> = {}): SyncScope {
  return {
    environmentId: 'dev',
    integrationId: 'github',
    connectionId: uniqueName('conn'),
    syncName: 'issues',
    ...overrides,
  };
}

async function readAll(
  where: SyncScope,
  model: string,
  extra: { filter?: ('ADDED' | 'UPDATED' | 'DELETED')[]; modifiedAfter?: Date; ids?: string[]; limit?: number } = {},
): Promise<StoredRecord[]> {
  const all: StoredRecord[] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await store.listRecords({ ...where, model, cursor, ...extra });
    // The API's page (its JSON written by the store from each stored record's text) is this page, byte
    // for byte, whatever the conditions of the read.
    const text = await store.listRecordsJson({ ...where, model, cursor, ...extra });
    expect(text.json).toBe(JSON.stringify(page));
    expect(text.count).toBe(page.records.length);
    all.push(...page.records);
    if (page.next_cursor === null) return all;
    cursor = page.next_cursor;
  }
}

const byId = (records: StoredRecord[]) => new Map(records.map((record) => [String(record.id), record]));

async function rejection(promise: Promise<unknown>): Promise<ServiceError> {
  const error = await promise.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  if (!(error instanceof ServiceError)) throw new Error(`expected a ServiceError, got ${String(error)}`);
  return error;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('saving', () => {
  it('stores records with their metadata and counts them as added', async () => {
    const where = scope();
    const before = Date.now();
    const summary = await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [
        { id: 1, title: 'one' },
        { id: 'b', title: 'bee', nested: { list: [1, 2] } },
      ],
    });
    expect(summary).toEqual({ added: 2, updated: 0, deleted: 0, unchanged: 0 });
    const records = await readAll(where, 'Issue');
    expect(records.map(({ _service_metadata: _, ...rest }) => rest)).toEqual([
      { id: 1, title: 'one' },
      { id: 'b', title: 'bee', nested: { list: [1, 2] } },
    ]);
    for (const record of records) {
      const meta = record._service_metadata;
      expect(meta.last_action).toBe('ADDED');
      expect(meta.deleted_at).toBeNull();
      expect(meta.first_seen_at).toBe(meta.last_modified_at);
      expect(Date.parse(meta.first_seen_at)).toBeGreaterThanOrEqual(before - 1000);
      expect(typeof meta.cursor).toBe('string');
    }
    expect(await store.countRecords({ ...where, model: 'Issue' })).toBe(2);
  });

  it('keeps the last occurrence of an id in a batch, and treats the number 1 and the string "1" as one record', async () => {
    const where = scope();
    const summary = await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [
        { id: 1, v: 'first' },
        { id: 'x', v: 'x' },
        { id: '1', v: 'second' },
        { id: 1, v: 'third' },
      ],
    });
    expect(summary).toEqual({ added: 2, updated: 0, deleted: 0, unchanged: 0 });
    const records = byId(await readAll(where, 'Issue'));
    expect(records.size).toBe(2);
    expect(records.get('1')).toMatchObject({ id: 1, v: 'third' });
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r2', records: [{ id: '1', v: 'fourth' }] });
    expect(byId(await readAll(where, 'Issue')).get('1')).toMatchObject({ id: '1', v: 'fourth' });
  });

  it('rejects an id that is not a string or a number, naming position and model, and stores nothing of the batch', async () => {
    const where = scope();
    for (const bad of [null, { nested: 1 }, true, undefined]) {
      const error = await rejection(
        store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'ok' }, { id: 2 }, { id: bad }] }),
      );
      expect(error.code).toBe('invalid_record_id');
      expect(error.status).toBe(400);
      expect(error.message).toContain('record at index 2 of model "Issue"');
      expect(error.details).toEqual({ index: 2, model: 'Issue' });
    }
    const notObject = await rejection(
      store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'ok' }, 'x' as never] }),
    );
    expect(notObject.code).toBe('invalid_record');
    expect(notObject.message).toContain('record at index 1 of model "Issue"');
    expect(await store.countRecords({ ...where, model: 'Issue', includeDeleted: true })).toBe(0);
  });

  it('changes nothing when an identical record is saved again, even with its keys in another order', async () => {
    const where = scope();
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a', x: 1, y: { p: 1, q: 2 } }] });
    const [before] = await readAll(where, 'Issue');
    await sleep(20);
    const summary = await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r2',
      records: [{ y: { q: 2, p: 1 }, x: 1, id: 'a', _service_metadata: before?._service_metadata }],
    });
    expect(summary).toEqual({ added: 0, updated: 0, deleted: 0, unchanged: 1 });
    const [after] = await readAll(where, 'Issue');
    expect(after?._service_metadata).toEqual(before?._service_metadata);
    // Nothing new for a reader who already had it.
    const since = await store.listRecords({ ...where, model: 'Issue', cursor: before?._service_metadata.cursor });
    expect(since.records).toEqual([]);
  });

  it('marks a changed record UPDATED with a later last_modified_at and the same first_seen_at', async () => {
    const where = scope();
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a', x: 1 }, { id: 'b' }] });
    const [before] = await readAll(where, 'Issue');
    await sleep(20);
    const summary = await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r2',
      records: [{ id: 'a', x: 2 }, { id: 'b' }, { id: 'c' }],
    });
    expect(summary).toEqual({ added: 1, updated: 1, deleted: 0, unchanged: 1 });
    const a = byId(await readAll(where, 'Issue')).get('a');
    expect(a).toMatchObject({ id: 'a', x: 2 });
    expect(a?._service_metadata.last_action).toBe('UPDATED');
    expect(a?._service_metadata.first_seen_at).toBe(before?._service_metadata.first_seen_at);
    expect(Date.parse(a?._service_metadata.last_modified_at ?? '')).toBeGreaterThan(
      Date.parse(before?._service_metadata.last_modified_at ?? ''),
    );
  });

  it('writes a batch larger than one statement in one transaction', async () => {
    const where = scope();
    const records = Array.from({ length: 30 }, (_, i) => ({ id: i, v: i }));
    const summary = await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records });
    expect(summary.added).toBe(30);
    const bad = await rejection(
      store.saveRecords({
        ...where,
        model: 'Issue',
        runId: 'r2',
        records: [...records.map((r) => ({ ...r, v: -1 })), { id: { not: 'an id' } }],
      }),
    );
    expect(bad.code).toBe('invalid_record_id');
    expect(bad.message).toContain('index 30');
    expect((await readAll(where, 'Issue')).every((record) => record['v'] !== -1)).toBe(true);
  });
  it('stores ids and content with characters that COPY and JSON treat specially, unchanged', async () => {
    const where = scope();
    const awkward = 'tab\there\nnew line\\back\\slash "quoted" \r é 日本 😀';
    const records = [
      { id: awkward, text: `${awkward} \u0000 nul`, nested: { [awkward]: [awkward] } },
      { id: '\\N', text: '\\N' },
    ];
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records });
    const stored = byId(await readAll(where, 'Issue'));
    expect(stored.get(awkward)).toMatchObject(records[0]!);
    expect(stored.get('\\N')).toMatchObject(records[1]!);
    const again = await store.saveRecords({ ...where, model: 'Issue', runId: 'r2', records });
    expect(again.unchanged).toBe(2);
    expect((await readAll(where, 'Issue', { ids: [awkward] })).map((r) => r.id)).toEqual([awkward]);
  });

  it('finds what the previous statement (records_save, text[]) stored unchanged, byte for byte (rolling upgrade)', async () => {
    const where = scope();
    const awkward = 'tab\there\nnew line\\back\\slash "quoted" \r é 日本 😀 \u0000';
    const records = [
      { id: 'a', text: awkward, nested: { z: 1, a: [awkward, null, 2.5] } },
      { id: 7, list: [{ b: true, a: false }] },
    ];
    // What a worker of the previous version stores: the same canonical texts and hashes, as text[].
    const { canonicalRecordJson, contentHash } = await import('../../src/records/encoding.js');
    const texts = records.map((record, index) => canonicalRecordJson(record, { index, model: 'Issue' }));
    await pool.query('SELECT records_save($1, $2, $3, $4, $5, $6, NULL, NULL, NULL, $7, $8, $9)', [
      where.environmentId,
      where.integrationId,
      where.connectionId,
      'Issue',
      where.syncName,
      'r1',
      ['a', '7'],
      texts.map(contentHash),
      texts,
    ]);
    const before = await pool.query<{ id: string; data: string }>(
      'SELECT id, data::text AS data FROM records WHERE scope_id = (SELECT scope_id FROM record_scopes WHERE connection_id = $1) ORDER BY id',
      [where.connectionId],
    );
    const again = await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records });
    expect(again).toEqual({ added: 0, updated: 0, deleted: 0, unchanged: 2 });
    // And the new statement stores the very texts the previous one did.
    const fresh = scope();
    await store.saveRecords({ ...fresh, model: 'Issue', runId: 'r1', records });
    const after = await pool.query<{ id: string; data: string }>(
      'SELECT id, data::text AS data FROM records WHERE scope_id = (SELECT scope_id FROM record_scopes WHERE connection_id = $1) ORDER BY id',
      [fresh.connectionId],
    );
    expect(after.rows).toEqual(before.rows);
    expect(before.rows.map((row) => row.data)).toEqual([texts[1], texts[0]]); // ordered by id: '7', 'a'
  });
});

describe('deleting', () => {
  it('soft-deletes: the record is still returned, marked, with its content; other fields passed are ignored', async () => {
    const where = scope();
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [
        { id: 'a', x: 1 },
        { id: 'b', x: 2 },
      ],
    });
    const summary = await store.deleteRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [{ id: 'a', x: 99 } as { id: unknown }, { id: 'missing' }],
    });
    expect(summary).toEqual({ added: 0, updated: 0, deleted: 1, unchanged: 1 });
    const a = byId(await readAll(where, 'Issue')).get('a');
    expect(a).toMatchObject({ id: 'a', x: 1 });
    expect(a?._service_metadata.last_action).toBe('DELETED');
    expect(a?._service_metadata.deleted_at).not.toBeNull();
    expect(await store.countRecords({ ...where, model: 'Issue' })).toBe(1);
    expect(await store.countRecords({ ...where, model: 'Issue', includeDeleted: true })).toBe(2);
    // Deleting again changes nothing.
    expect(await store.deleteRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a' }] })).toEqual({
      added: 0,
      updated: 0,
      deleted: 0,
      unchanged: 1,
    });
  });

  it('brings a deleted record back as ADDED when it is saved again, even unchanged', async () => {
    const where = scope();
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a', x: 1 }] });
    await store.deleteRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a' }] });
    const summary = await store.saveRecords({ ...where, model: 'Issue', runId: 'r2', records: [{ id: 'a', x: 1 }] });
    expect(summary).toEqual({ added: 1, updated: 0, deleted: 0, unchanged: 0 });
    const a = byId(await readAll(where, 'Issue')).get('a');
    expect(a?._service_metadata).toMatchObject({ last_action: 'ADDED', deleted_at: null });
  });

  it('rejects a bad id in a delete with its position and model, deleting nothing', async () => {
    const where = scope();
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a' }] });
    const error = await rejection(
      store.deleteRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'a' }, { id: [1] }] }),
    );
    expect(error.code).toBe('invalid_record_id');
    expect(error.message).toContain('record at index 1 of model "Issue"');
    expect(await store.countRecords({ ...where, model: 'Issue' })).toBe(1);
  });

  it('track_deletes: marks what the run did not save, for its sync and model only', async () => {
    const where = scope();
    const other = { ...where, syncName: 'other-sync' };
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [{ id: 'a' }, { id: 'b' }, { id: 'c' }],
    });
    await store.saveRecords({ ...where, model: 'Label', runId: 'r1', records: [{ id: 'l1' }] });
    await store.saveRecords({ ...other, model: 'Issue', runId: 'o1', records: [{ id: 'from-other' }] });
    // Run r2 sees a (unchanged) and b (changed); c has gone from the external API.
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r2', records: [{ id: 'a' }, { id: 'b', v: 2 }] });
    const summary = await store.markUnseenDeleted({ ...where, model: 'Issue', runId: 'r2' });
    expect(summary).toEqual({ added: 0, updated: 0, deleted: 1, unchanged: 0 });
    const issues = byId(await readAll(where, 'Issue'));
    expect(issues.get('c')?._service_metadata.last_action).toBe('DELETED');
    expect(issues.get('a')?._service_metadata.last_action).toBe('ADDED');
    expect(issues.get('b')?._service_metadata.last_action).toBe('UPDATED');
    expect(issues.get('from-other')?._service_metadata.last_action).toBe('ADDED');
    expect((await readAll(where, 'Label'))[0]?._service_metadata.last_action).toBe('ADDED');
    // Idempotent; and a scope never written has nothing to mark.
    expect((await store.markUnseenDeleted({ ...where, model: 'Issue', runId: 'r2' })).deleted).toBe(0);
    expect((await store.markUnseenDeleted({ ...where, model: 'Nothing', runId: 'r2' })).deleted).toBe(0);
  });
});

describe('models and isolation', () => {
  it('stores and reads several models of one sync on their own', async () => {
    const where = scope();
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 1, kind: 'issue' }] });
    await store.saveRecords({ ...where, model: 'Comment', runId: 'r1', records: [{ id: 1, kind: 'comment' }] });
    expect((await readAll(where, 'Issue')).map((r) => r['kind'])).toEqual(['issue']);
    expect((await readAll(where, 'Comment')).map((r) => r['kind'])).toEqual(['comment']);
    await store.deleteRecords({ ...where, model: 'Comment', runId: 'r1', records: [{ id: 1 }] });
    expect((await readAll(where, 'Issue'))[0]?._service_metadata.last_action).toBe('ADDED');
  });

  it("never shows one connection's records to another, nor another integration's or environment's", async () => {
    const a = scope();
    const neighbours = [
      { ...a, connectionId: uniqueName('conn') },
      { ...a, integrationId: 'gitlab' },
      { ...a, environmentId: 'prod' },
    ];
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: [{ id: 'same', owner: 'a' }] });
    for (const [i, other] of neighbours.entries()) {
      expect(await readAll(other, 'Issue')).toEqual([]);
      expect(await store.countRecords({ ...other, model: 'Issue' })).toBe(0);
      await store.saveRecords({ ...other, model: 'Issue', runId: 'r1', records: [{ id: 'same', owner: `n${i}` }] });
      // The same id in another scope is another record; deleting it there leaves a's alone.
      await store.deleteRecords({ ...other, model: 'Issue', runId: 'r1', records: [{ id: 'same' }] });
      await store.markUnseenDeleted({ ...other, model: 'Issue', runId: 'none' });
    }
    const mine = await readAll(a, 'Issue');
    expect(mine).toHaveLength(1);
    expect(mine[0]).toMatchObject({ id: 'same', owner: 'a' });
    expect(mine[0]?._service_metadata.last_action).toBe('ADDED');
    // A cursor from another connection gives nothing of this one it should not.
    const otherPage = await store.listRecords({ ...neighbours[0]!, model: 'Issue' });
    const viaOtherCursor = await store.listRecords({
      ...a,
      model: 'Issue',
      cursor: otherPage.records[0]?._service_metadata.cursor,
    });
    expect(viaOtherCursor.records.every((r) => r['owner'] === 'a')).toBe(true);
  });
});

describe('reading', () => {
  it('pages with an opaque cursor: default 100, at most 1000, every record exactly once', async () => {
    const where = scope();
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: Array.from({ length: 250 }, (_, i) => ({ id: `i${i}`, n: i })),
    });
    const first = await store.listRecords({ ...where, model: 'Issue' });
    expect(first.records).toHaveLength(100);
    expect(first.next_cursor).not.toBeNull();
    const all = await readAll(where, 'Issue', { limit: 60 });
    expect(all.map((r) => r['n'])).toEqual(Array.from({ length: 250 }, (_, i) => i));
    const whole = await store.listRecords({ ...where, model: 'Issue', limit: 1000 });
    expect(whole.records).toHaveLength(250);
    expect(whole.next_cursor).toBeNull();
    // A record's own cursor continues right after it.
    const after = await store.listRecords({
      ...where,
      model: 'Issue',
      limit: 1,
      cursor: all[9]?._service_metadata.cursor,
    });
    expect(after.records[0]?.['n']).toBe(10);

    for (const limit of [0, 1001, 2.5, -1]) {
      const error = await rejection(store.listRecords({ ...where, model: 'Issue', limit }));
      expect(error.code).toBe('invalid_limit');
      expect(error.message).toContain('1 to 1000');
    }
    expect((await rejection(store.listRecords({ ...where, model: 'Issue', cursor: 'nonsense' }))).code).toBe(
      'invalid_cursor',
    );
  });

  it('answers the JSON page byte for byte as JSON.stringify of the page, instants as the database holds them', async () => {
    const where = scope();
    const awkward = 'tab\there\nnew line\\back "quoted" é 日本 😀 \u2028 \u0000';
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [
        { id: 'a', text: awkward, nested: { list: [1, 2.5, -0.001, 1e21, null, true], empty: {} }, z: 'last' },
        { id: 7, n: Number.MAX_SAFE_INTEGER },
        { id: 'gone', text: 'deleted later' },
        ...Array.from({ length: 5 }, (_, i) => ({ id: `p${i}` })),
      ],
    });
    await store.deleteRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'gone' }] });
    // Microseconds the millisecond form must cut, as Date does (never round up).
    await pool.query(
      `UPDATE records SET first_seen_at = '2026-01-02 03:04:05.678999+00' WHERE id = 'a' AND scope_id =
         (SELECT scope_id FROM record_scopes WHERE connection_id = $1)`,
      [where.connectionId],
    );
    let cursor: string | undefined;
    for (let pages = 0; pages < 5; pages++) {
      const options = { ...where, model: 'Issue', limit: 3, cursor };
      const [text, page] = [await store.listRecordsJson(options), await store.listRecords(options)];
      expect(text.json).toBe(JSON.stringify(page));
      expect(text.count).toBe(page.records.length);
      cursor = page.next_cursor ?? undefined;
      if (!cursor) break;
    }
    const all = byId(await readAll(where, 'Issue'));
    expect(all.get('a')?._service_metadata.first_seen_at).toBe('2026-01-02T03:04:05.678Z');
    expect(all.get('a')?.['text']).toBe(awkward);
    expect(all.get('gone')?._service_metadata.deleted_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    const { rows } = await pool.query<{ last_modified_at: Date }>(
      `SELECT r.last_modified_at FROM records r JOIN record_scopes s USING (scope_id) WHERE s.connection_id = $1 AND r.id = 'gone'`,
      [where.connectionId],
    );
    expect(all.get('gone')?._service_metadata.last_modified_at).toBe(rows[0]!.last_modified_at.toISOString());
    expect(JSON.parse((await store.listRecordsJson({ ...where, model: 'Nothing' })).json)).toEqual({
      records: [],
      next_cursor: null,
    });
  });

  it('filters by modified_after, by last action (alone and combined) and by ids', async () => {
    const where = scope();
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: [{ id: 'a' }, { id: 'b' }, { id: 'c' }],
    });
    await sleep(20);
    const between = new Date();
    await sleep(20);
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r2', records: [{ id: 'b', v: 2 }, { id: 'd' }] });
    await store.deleteRecords({ ...where, model: 'Issue', runId: 'r2', records: [{ id: 'c' }] });

    const ids = async (extra: Parameters<typeof readAll>[2]) =>
      (await readAll(where, 'Issue', extra)).map((r) => r.id).sort();
    expect(await ids({ modifiedAfter: between })).toEqual(['b', 'c', 'd']);
    expect(await ids({ filter: ['ADDED'] })).toEqual(['a', 'd']);
    expect(await ids({ filter: ['UPDATED'] })).toEqual(['b']);
    expect(await ids({ filter: ['DELETED'] })).toEqual(['c']);
    expect(await ids({ filter: ['ADDED', 'DELETED'] })).toEqual(['a', 'c', 'd']);
    expect(await ids({ filter: ['UPDATED', 'DELETED'], modifiedAfter: between })).toEqual(['b', 'c']);
    expect(await ids({ ids: ['a', 'c', 'zzz'] })).toEqual(['a', 'c']);
    expect(await ids({ ids: ['a', 'b'], filter: ['UPDATED'] })).toEqual(['b']);

    expect((await rejection(store.listRecords({ ...where, model: 'Issue', filter: ['GONE' as never] }))).code).toBe(
      'invalid_filter',
    );
    expect((await rejection(store.listRecords({ ...where, model: 'Issue', filter: [] }))).code).toBe('invalid_filter');
    expect(
      (await rejection(store.listRecords({ ...where, model: 'Issue', modifiedAfter: new Date('nope') }))).code,
    ).toBe('invalid_modified_after');
    expect((await rejection(store.listRecords({ ...where, model: 'Issue', ids: [''] }))).code).toBe('invalid_ids');
  });

  it('shows a record that changes while a client pages through again later, never skipping it', async () => {
    const where = scope();
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r1',
      records: Array.from({ length: 10 }, (_, i) => ({ id: i, v: 0 })),
    });
    const first = await store.listRecords({ ...where, model: 'Issue', limit: 5 });
    // Record 2 (already read) and 7 (not yet read) change between pages.
    await store.saveRecords({
      ...where,
      model: 'Issue',
      runId: 'r2',
      records: [
        { id: 2, v: 1 },
        { id: 7, v: 1 },
      ],
    });
    const rest = await store.listRecords({
      ...where,
      model: 'Issue',
      limit: 100,
      cursor: first.next_cursor ?? undefined,
    });
    expect(rest.records.map((r) => [r.id, r['v']])).toEqual([
      [5, 0],
      [6, 0],
      [8, 0],
      [9, 0],
      [2, 1],
      [7, 1],
    ]);
  });
});

describe('concurrency', () => {
  it('never skips a record committed later with an earlier position (a writer held mid-transaction)', async () => {
    const where = scope();
    await store.saveRecords({ ...where, model: 'Issue', runId: 'r1', records: [{ id: 'x', v: 1 }] });
    const seen = await store.listRecords({ ...where, model: 'Issue' });
    let cursor = seen.records[0]?._service_metadata.cursor;

    // Hold record x so that writer one stops inside its transaction after it has inserted new1.
    const blocker = await pool.connect();
    try {
      await blocker.query('BEGIN');
      await blocker.query(
        `SELECT 1 FROM records r JOIN record_scopes s USING (scope_id) WHERE s.connection_id = $1 AND r.id = 'x' FOR UPDATE OF r`,
        [where.connectionId],
      );
      const one = store.saveRecords({
        ...where,
        model: 'Issue',
        runId: 'r2',
        records: [{ id: 'new1' }, { id: 'x', v: 2 }],
      });
      await waitForLockWaiters(1);
      const two = store.saveRecords({ ...where, model: 'Issue', runId: 'r2', records: [{ id: 'new2' }] });
      await waitForLockWaiters(2);
      // Neither has committed, so a reader sees neither, and its cursor stays put.
      const during = await store.listRecords({ ...where, model: 'Issue', cursor });
      expect(during.records).toEqual([]);
      await blocker.query('COMMIT');
      await Promise.all([one, two]);
    } finally {
      blocker.release();
    }
    const after: StoredRecord[] = [];
    for (;;) {
      const page = await store.listRecords({ ...where, model: 'Issue', cursor, limit: 1 });
      after.push(...page.records);
      if (page.records.length === 0) break;
      cursor = page.records[page.records.length - 1]?._service_metadata.cursor;
    }
    expect(after.map((r) => r.id).sort()).toEqual(['new1', 'new2', 'x']);
  });

  it('loses nothing when a reader pages while several writers add and change records at once', async () => {
    const where = scope();
    const writers = 4;
    const rounds = 15;
    let done = false;
    const expected = new Map<string, number>();
    const write = async (w: number) => {
      for (let round = 0; round < rounds; round++) {
        const records = Array.from({ length: 5 }, (_, i) => ({ id: `w${w}-${(round * 5 + i) % 40}`, round }));
        await store.saveRecords({ ...where, model: 'Issue', runId: `w${w}`, records });
        for (const record of records) expected.set(record.id, record.round);
      }
    };
    const latest = new Map<string, number>();
    const read = async () => {
      let cursor: string | undefined;
      // Keep paging until the writers are done and a page comes back empty after that.
      for (let finished = false; ;) {
        const page = await store.listRecords({ ...where, model: 'Issue', cursor, limit: 7 });
        for (const record of page.records) latest.set(String(record.id), record['round'] as number);
        cursor = page.records.at(-1)?._service_metadata.cursor ?? cursor;
        if (page.records.length === 0) {
          if (finished) return;
          finished = done;
          await sleep(5);
        }
      }
    };
    const reader = read();
    await Promise.all(Array.from({ length: writers }, (_, w) => write(w)));
    done = true;
    await reader;
    // The reader ends with the latest version of every record, as one that never skipped must.
    expect(latest).toEqual(expected);
  });

  it('serialises concurrent writes of the same records into one consistent state', async () => {
    const where = scope();
    const ids = Array.from({ length: 20 }, (_, i) => i);
    const runs = 6;
    // The scope exists already, so only the scope lock stands between the runs.
    await store.saveRecords({ ...where, model: 'Issue', runId: 'first', records: [{ id: 'other' }] });
    const summaries = await Promise.all(
      Array.from({ length: runs }, (_, run) =>
        store.saveRecords({
          ...where,
          model: 'Issue',
          runId: `run${run}`,
          records: ids.map((id) => ({ id, same: true })),
        }),
      ),
    );
    // Each record is added exactly once across the runs; the others see it unchanged. Without the
    // scope lock two runs would both find an id missing and collide on the primary key.
    const total = summaries.reduce(
      (sum, s) => ({
        added: sum.added + s.added,
        updated: sum.updated + s.updated,
        unchanged: sum.unchanged + s.unchanged,
      }),
      { added: 0, updated: 0, unchanged: 0 },
    );
    expect(total).toEqual({ added: ids.length, updated: 0, unchanged: ids.length * (runs - 1) });
    expect(await store.countRecords({ ...where, model: 'Issue' })).toBe(ids.length + 1);
  });

  it('fences runs: after beginRun of a newer run, the older run can no longer write', async () => {
    const where = scope();
    await store.beginRun({ ...where, runId: 'old' });
    await store.beginRun({ ...where, runId: 'old' });
    await store.saveRecords({ ...where, model: 'Issue', runId: 'old', records: [{ id: 'a' }, { id: 'b' }] });
    await store.beginRun({ ...where, runId: 'new' });
    for (const write of [
      () => store.saveRecords({ ...where, model: 'Issue', runId: 'old', records: [{ id: 'c' }] }),
      () => store.deleteRecords({ ...where, model: 'Issue', runId: 'old', records: [{ id: 'a' }] }),
      () => store.markUnseenDeleted({ ...where, model: 'Issue', runId: 'old' }),
    ]) {
      const error = await rejection(write());
      expect(error.code).toBe('run_superseded');
      expect(error.status).toBe(409);
    }
    await store.saveRecords({ ...where, model: 'Issue', runId: 'new', records: [{ id: 'a' }] });
    // Another sync of the same connection is not fenced by this one.
    await store.saveRecords({ ...where, syncName: 'labels', model: 'Label', runId: 'x', records: [{ id: 'l' }] });
    expect((await store.markUnseenDeleted({ ...where, model: 'Issue', runId: 'new' })).deleted).toBe(1);
    expect((await readAll(where, 'Issue')).map((r) => [r.id, r._service_metadata.last_action])).toEqual([
      ['a', 'ADDED'],
      ['b', 'DELETED'],
    ]);
  });

  it('beginRun waits for a batch of the old run that is in flight', async () => {
    const where = scope();
    await store.beginRun({ ...where, runId: 'old' });
    await store.saveRecords({ ...where, model: 'Issue', runId: 'old', records: [{ id: 'x', v: 1 }] });
    const blocker = await pool.connect();
    let began = false;
    try {
      await blocker.query('BEGIN');
      await blocker.query(
        `SELECT 1 FROM records r JOIN record_scopes s USING (scope_id) WHERE s.connection_id = $1 FOR UPDATE OF r`,
        [where.connectionId],
      );
      // The old run's batch is inside its transaction (past the run check), held at its update of x.
      const batch = store.saveRecords({ ...where, model: 'Issue', runId: 'old', records: [{ id: 'x', v: 2 }] });
      await waitForLockWaiters(1);
      const begin = store.beginRun({ ...where, runId: 'new' }).then(() => {
        began = true;
      });
      await waitForLockWaiters(2);
      await sleep(150);
      expect(began).toBe(false);
      await blocker.query('COMMIT');
      // The batch that was in flight lands; it is not refused half-way.
      expect(await batch).toEqual({ added: 0, updated: 1, deleted: 0, unchanged: 0 });
      await begin;
    } finally {
      blocker.release();
    }
    const error = await rejection(
      store.saveRecords({ ...where, model: 'Issue', runId: 'old', records: [{ id: 'x', v: 3 }] }),
    );
    expect(error.code).toBe('run_superseded');
    expect(byId(await readAll(where, 'Issue')).get('x')?.['v']).toBe(2);
  });
});

describe('erasing', () => {
  it('erases a sync for all connections, or for one, leaving other syncs, integrations and environments', async () => {
    const a = scope();
    const b = scope();
    const otherSync = { ...a, syncName: 'labels' };
    const otherIntegration = { ...a, integrationId: 'gitlab' };
    const otherEnvironment = { ...a, environmentId: 'prod' };
    for (const where of [a, b, otherSync, otherIntegration, otherEnvironment]) {
      await store.saveRecords({
        ...where,
        model: where === otherSync ? 'Label' : 'Issue',
        runId: 'r',
        records: [{ id: 1 }, { id: 2 }],
      });
    }
    await store.saveRecords({ ...a, model: 'Comment', runId: 'r', records: [{ id: 1 }] });

    expect(await store.eraseSync({ ...a, syncName: 'issues', connectionId: b.connectionId })).toBe(2);
    expect(await readAll(b, 'Issue')).toEqual([]);
    expect(await readAll(a, 'Issue')).toHaveLength(2);

    const erased = await store.eraseSync({ environmentId: 'dev', integrationId: 'github', syncName: 'issues' });
    expect(erased).toBeGreaterThanOrEqual(3);
    expect(await readAll(a, 'Issue')).toEqual([]);
    expect(await readAll(a, 'Comment')).toEqual([]);
    expect(await readAll(otherSync, 'Label')).toHaveLength(2);
    expect(await readAll(otherIntegration, 'Issue')).toHaveLength(2);
    expect(await readAll(otherEnvironment, 'Issue')).toHaveLength(2);
    // Saving after an erase starts afresh.
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r2', records: [{ id: 1 }] });
    expect((await readAll(a, 'Issue'))[0]?._service_metadata.last_action).toBe('ADDED');
  });

  it('erases one connection (every model, its run fence too) and no other', async () => {
    const a = scope();
    const b = { ...a, connectionId: uniqueName('conn') };
    await store.beginRun({ ...a, runId: 'run-a' });
    await store.saveRecords({ ...a, model: 'Issue', runId: 'run-a', records: [{ id: 1 }, { id: 2 }] });
    await store.saveRecords({ ...a, model: 'Comment', runId: 'run-a', records: [{ id: 1 }] });
    await store.saveRecords({ ...b, model: 'Issue', runId: 'run-b', records: [{ id: 1 }] });
    expect(await store.eraseConnection(a)).toBe(3);
    expect(await store.countRecords({ ...a, model: 'Issue', includeDeleted: true })).toBe(0);
    expect(await store.countRecords({ ...a, model: 'Comment', includeDeleted: true })).toBe(0);
    expect(await store.countRecords({ ...b, model: 'Issue' })).toBe(1);
    expect(await store.eraseConnection(a)).toBe(0);
    // A batch of the erased connection's run that was still in flight does not write after the erase
    // (its records would show to the next connection of that id).
    await expect(
      store.saveRecords({ ...a, model: 'Issue', runId: 'run-a', records: [{ id: 9 }] }),
    ).rejects.toMatchObject({ code: 'run_superseded' });
    expect(await store.countRecords({ ...a, model: 'Issue', includeDeleted: true })).toBe(0);
    // A recreated connection's run is not fenced by the erased one's: its beginRun takes the sync over.
    await store.beginRun({ ...a, runId: 'another' });
    await store.saveRecords({ ...a, model: 'Issue', runId: 'another', records: [{ id: 1 }] });
    expect(await store.countRecords({ ...a, model: 'Issue' })).toBe(1);
  });
});

describe('erasing by detaching', () => {
  it('erases only its own records from a model another sync writes too', async () => {
    const a = scope();
    const b = { ...a, syncName: 'other' };
    await store.saveRecords({ ...a, model: 'Shared', runId: 'ra', records: [{ id: 1 }, { id: 2 }, { id: 3 }] });
    await store.saveRecords({ ...b, model: 'Shared', runId: 'rb', records: [{ id: 3, by: 'b' }, { id: 4 }] });
    expect(await store.eraseSync({ ...a, syncName: 'issues', connectionId: a.connectionId })).toBe(2);
    expect((await readAll(a, 'Shared')).map((r) => r.id).sort()).toEqual([3, 4]);
    expect(await store.eraseSync({ ...b, connectionId: b.connectionId })).toBe(2);
    expect(await readAll(a, 'Shared')).toEqual([]);
  });

  it('makes records unreachable at once and leaves the deleting to purgeErasedRecords when deferred', async () => {
    const deferred = createPostgresRecordStore({ db: pool, purge: 'deferred' });
    const a = scope();
    const b = scope();
    const records = Array.from({ length: 45 }, (_, i) => ({ id: i }));
    await deferred.saveRecords({ ...a, model: 'Issue', runId: 'r', records });
    await deferred.saveRecords({ ...b, model: 'Issue', runId: 'r', records });
    const scopeIds = await pool.query<{ scope_id: string }>(
      'SELECT scope_id FROM record_scopes WHERE connection_id = ANY($1)',
      [[a.connectionId, b.connectionId]],
    );
    const rowsLeft = async () =>
      Number(
        (
          await pool.query<{ n: string }>('SELECT count(*) AS n FROM records WHERE scope_id = ANY($1::bigint[])', [
            scopeIds.rows.map((row) => row.scope_id),
          ])
        ).rows[0]?.n,
      );

    expect(await deferred.eraseConnection(a)).toBe(0);
    expect(await deferred.eraseSync({ ...b, connectionId: b.connectionId })).toBe(0);
    for (const where of [a, b]) {
      expect(await readAll(where, 'Issue')).toEqual([]);
      expect(await deferred.countRecords({ ...where, model: 'Issue', includeDeleted: true })).toBe(0);
      expect((await deferred.markUnseenDeleted({ ...where, model: 'Issue', runId: 'x' })).deleted).toBe(0);
    }
    expect(await rowsLeft()).toBe(90);
    // Writing the same connection again starts a new, empty scope; the detached rows stay apart.
    await deferred.saveRecords({ ...a, model: 'Issue', runId: 'r2', records: [{ id: 1, again: true }] });
    expect((await readAll(a, 'Issue')).map((r) => [r.id, r._service_metadata.last_action])).toEqual([[1, 'ADDED']]);

    expect(await store.purgeErasedRecords()).toBe(90);
    expect(await rowsLeft()).toBe(0);
    expect(await store.purgeErasedRecords()).toBe(0);
    expect(await readAll(a, 'Issue')).toHaveLength(1);
  });

  it('purges an erased scope by row address even when the statistics do not know it (no walk of its index per chunk)', async () => {
    // A store on one connection of its own, whose every statement's plan is logged to it.
    const { url } = await useDatabase();
    const own = createPool({ url, max: 1, applicationName: 'purge-plan' });
    try {
      const purging = createPostgresRecordStore({ db: own, purge: 'deferred' });
      for (let connection = 0; connection < 5; connection++) {
        await purging.saveRecords({
          ...scope(),
          model: 'Issue',
          runId: 'r',
          records: Array.from({ length: 400 }, (_, i) => ({ id: i })),
        });
      }
      await own.query('ANALYZE records');
      // Written after the ANALYZE: the planner estimates this scope at one row.
      const a = scope();
      await purging.saveRecords({
        ...a,
        model: 'Issue',
        runId: 'r',
        records: Array.from({ length: 3000 }, (_, i) => ({ id: i })),
      });
      await purging.eraseConnection(a);
      const plans: string[] = [];
      const client = await own.connect();
      client.on('notice', (notice) => plans.push(notice.message ?? ''));
      await client.query(
        "LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0; SET auto_explain.log_nested_statements = on; SET client_min_messages = log",
      );
      client.release();
      expect(await purging.purgeErasedRecords()).toBe(3000);
      const deletes = plans.filter((plan) => /Delete on records/.test(plan));
      expect(deletes).toHaveLength(1);
      expect(deletes[0]).toMatch(/Tid Scan on records/);
      expect(deletes[0]).not.toMatch(/Index Scan/);
    } finally {
      await own.end();
    }
  });

  it('shows none of an erased scope’s records to a store that read the scope before (its known id is checked)', async () => {
    const deferred = createPostgresRecordStore({ db: pool, purge: 'deferred' });
    const a = scope();
    const records = Array.from({ length: 5 }, (_, i) => ({ id: i }));
    await deferred.saveRecords({ ...a, model: 'Issue', runId: 'r', records });
    // Both stores read the scope, so both know its id; a page of it is then one statement.
    const first = await deferred.listRecords({ ...a, model: 'Issue', limit: 2 });
    for (const reader of [deferred, store]) {
      expect((await reader.listRecordsJson({ ...a, model: 'Issue' })).count).toBe(5);
    }
    // Detached, not yet purged: the records are still in the table.
    expect(await deferred.eraseConnection(a)).toBe(0);
    for (const reader of [deferred, store]) {
      expect(await reader.listRecords({ ...a, model: 'Issue' })).toEqual({ records: [], next_cursor: null });
      const rest = { ...a, model: 'Issue', cursor: first.next_cursor ?? undefined };
      expect(JSON.parse((await reader.listRecordsJson(rest)).json)).toEqual({ records: [], next_cursor: null });
    }
    // The same connection and model again: a new scope, read although the old id was known.
    await deferred.saveRecords({ ...a, model: 'Issue', runId: 'r2', records: [{ id: 'new' }] });
    for (const reader of [deferred, store]) {
      expect((await reader.listRecords({ ...a, model: 'Issue' })).records.map((record) => record.id)).toEqual(['new']);
    }
    expect(await store.purgeErasedRecords()).toBeGreaterThanOrEqual(5);
  });
});

/** Waits until `count` sessions of this database wait for a lock (a write held up by the test). */
async function waitForLockWaiters(count: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const result = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`,
    );
    if (Number(result.rows[0]?.n) >= count) return;
    await sleep(25);
  }
  throw new Error(`fewer than ${count} writers ever waited for a lock`);
}

describe('live counts (migration 20261128140000)', () => {
  /** The ground truth: the scope's live records counted in the table itself. */
  async function counted(where: SyncScope, model: string): Promise<number> {
    const { rows } = await pool.query<{ n: string }>(
      `SELECT count(*) AS n FROM records r JOIN record_scopes s ON s.scope_id = r.scope_id
        WHERE s.environment_id = $1 AND s.integration_id = $2 AND s.connection_id = $3 AND s.model = $4
          AND r.deleted_at IS NULL`,
      [where.environmentId, where.integrationId, where.connectionId, model],
    );
    return Number(rows[0]!.n);
  }

  /** The count as kept in the scope's row, before any countRecords: null when not known. */
  async function kept(where: SyncScope, model: string): Promise<number | null> {
    const { rows } = await pool.query<{ live_records: string | null }>(
      `SELECT live_records FROM record_scopes
        WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND model = $4`,
      [where.environmentId, where.integrationId, where.connectionId, model],
    );
    return rows[0] === undefined ? 0 : rows[0].live_records === null ? null : Number(rows[0].live_records);
  }

  async function expectCount(where: SyncScope, model: string, expected: number): Promise<void> {
    expect(await counted(where, model)).toBe(expected);
    expect(await store.countRecords({ ...where, model })).toBe(expected);
  }

  /** Kept by the writers themselves: right without being counted again. */
  async function expectKept(where: SyncScope, model: string, expected: number): Promise<void> {
    expect(await kept(where, model)).toBe(expected);
    await expectCount(where, model, expected);
  }

  const ids = (from: number, to: number, extra: Record<string, unknown> = {}) =>
    Array.from({ length: to - from + 1 }, (_, index) => ({ id: from + index, ...extra }));

  async function scopeIds(db: Pool, where: SyncScope): Promise<string[]> {
    const { rows } = await db.query<{ scope_id: string }>(SCOPE_ID_SQL, [
      where.environmentId,
      where.integrationId,
      where.connectionId,
      'Issue',
    ]);
    return rows.map((row) => row.scope_id);
  }

  it('answers what count(*) answers through adds, changes, deletes, re-adds, track_deletes, concurrent writers and erases', async () => {
    const a = scope();
    const b = { ...a, syncName: 'other' };
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 30) });
    await expectKept(a, 'Issue', 30);
    // 20-25 changed, 26-30 unchanged, 31-40 new.
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: [...ids(20, 25, { v: 2 }), ...ids(26, 40)] });
    await expectKept(a, 'Issue', 40);
    // 1-5 deleted (1 twice), 999 never stored, 6 deleted then saved again in the next batch.
    await store.deleteRecords({ ...a, model: 'Issue', runId: 'r1', records: [...ids(1, 6), { id: 1 }, { id: 999 }] });
    await expectKept(a, 'Issue', 34);
    await store.deleteRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 3) });
    await expectKept(a, 'Issue', 34);
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: [...ids(5, 6), { id: 7, v: 3 }] });
    await expectKept(a, 'Issue', 36);
    // Another sync writes the same model of the same connection (a shared scope), and another model.
    await store.saveRecords({ ...b, model: 'Issue', runId: 'o1', records: ids(100, 109) });
    await store.saveRecords({ ...a, model: 'Label', runId: 'r1', records: ids(1, 4) });
    await expectKept(a, 'Issue', 46);
    await expectKept(a, 'Label', 4);
    // Run r2 saves 1-10 only (1-4 come back): track_deletes marks 11-40 of sync `issues`, not b's.
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r2', records: ids(1, 10) });
    await expectKept(a, 'Issue', 50);
    expect((await store.markUnseenDeleted({ ...a, model: 'Issue', runId: 'r2' })).deleted).toBe(30);
    await expectKept(a, 'Issue', 20);
    await expectKept(a, 'Label', 4);

    // Writers at once, the same records among them, and two scopes in one go.
    await Promise.all([
      ...Array.from({ length: 6 }, (_, writer) =>
        store.saveRecords({ ...a, model: 'Issue', runId: 'r2', records: ids(writer * 5, writer * 5 + 20, { writer }) }),
      ),
      store.deleteRecords({ ...a, model: 'Issue', runId: 'r2', records: ids(1, 8) }),
      store.saveRecords({ ...a, model: 'Label', runId: 'r2', records: ids(3, 9) }),
    ]);
    await expectKept(a, 'Issue', await counted(a, 'Issue'));
    expect(await store.countRecords({ ...a, model: 'Issue' })).toBeGreaterThan(0);
    await expectKept(a, 'Label', 9);

    // Erasing sync `issues` of this connection takes its records out of the shared scope, not b's.
    await store.eraseSync({ ...a, connectionId: a.connectionId });
    await expectKept(a, 'Issue', 10);
    await expectKept(a, 'Label', 0);
    await store.eraseConnection(a);
    await expectKept(a, 'Issue', 0);
    // A scope made again after its erase starts from its own records.
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r3', records: ids(1, 2) });
    await expectKept(a, 'Issue', 2);
  });

  it('counts again a scope that a writer keeping no count changed (a worker of the previous version, a statement by hand)', async () => {
    const a = scope();
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 10) });
    await expectCount(a, 'Issue', 10);
    const scopeId = (
      await pool.query<{ scope_id: string }>(`${SCOPE_ID_SQL}`, [
        a.environmentId,
        a.integrationId,
        a.connectionId,
        'Issue',
      ])
    ).rows[0]!.scope_id;
    const known = async () =>
      (
        await pool.query<{ live_records: string | null }>(
          'SELECT live_records FROM record_scopes WHERE scope_id = $1',
          [scopeId],
        )
      ).rows[0]!.live_records;
    expect(await known()).toBe('10');
    await pool.query(
      `INSERT INTO records (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id)
       SELECT $1, 'raw-' || n, '{}', md5('{}')::uuid, 'issues', now(), now(), 'ADDED', 'r1' FROM generate_series(1, 3) AS n`,
      [scopeId],
    );
    expect(await known()).toBeNull();
    await expectCount(a, 'Issue', 13);
    await pool.query("UPDATE records SET deleted_at = now() WHERE scope_id = $1 AND id IN ('raw-1', 'raw-2')", [
      scopeId,
    ]);
    await expectCount(a, 'Issue', 11);
    await pool.query("DELETE FROM records WHERE scope_id = $1 AND id IN ('raw-3', '1', 'raw-1')", [scopeId]);
    await expectCount(a, 'Issue', 9);
    // An update that leaves deleted_at alone changes no count and keeps it known.
    await pool.query("UPDATE records SET last_run_id = 'r9' WHERE scope_id = $1", [scopeId]);
    expect(await known()).toBe('9');
    // And the writers of this version go on from the count made again.
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r2', records: ids(1, 12) });
    await expectCount(a, 'Issue', 12);
    expect(await known()).toBe('12');
  });

  const RAW_INSERT = `INSERT INTO records (scope_id, id, data, data_hash, sync_name, first_seen_at, last_modified_at, last_action, last_run_id)
    SELECT $1, $2 || n, '{}', md5('{}')::uuid, 'issues', now(), now(), 'ADDED', 'r1' FROM generate_series(1, $3::int) AS n`;

  it('counts a transaction by hand that was open while the count was made again, once it commits', async () => {
    const a = scope();
    await store.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 10) });
    const [scopeId] = await scopeIds(pool, a);
    await pool.query(RAW_INSERT, [scopeId, 'before-', 3]);
    expect(await kept(a, 'Issue')).toBeNull();
    const operator = await pool.connect();
    try {
      await operator.query('BEGIN');
      await operator.query(RAW_INSERT, [scopeId, 'by-hand-', 5]);
      // The count waits for the transaction that holds the scope (its trigger took the row's lock).
      const counting = store.countRecords({ ...a, model: 'Issue' });
      const early = await Promise.race([counting, sleep(300).then(() => 'waiting')]);
      expect(early).toBe('waiting');
      await operator.query('COMMIT');
      expect(await counting).toBe(18);
    } finally {
      operator.release();
    }
    await expectKept(a, 'Issue', 18);
  });

  it('makes a count again only after a writer that keeps none and holds the scope commits, whatever the default isolation', async () => {
    for (const isolation of ['read committed', 'repeatable read']) {
      const database = await useDatabase();
      await database.pool.query(`ALTER DATABASE ${database.name} SET default_transaction_isolation = '${isolation}'`);
      const db = createPool({ url: database.url, max: 4, applicationName: 'isolation' });
      try {
        const own = createPostgresRecordStore({ db });
        const a = scope();
        await own.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 10) });
        const [scopeId] = await scopeIds(db, a);
        await db.query(RAW_INSERT, [scopeId, 'before-', 2]);
        // As the previous version's deleteRecords: the scope's lock first, then its writes.
        const writer = await db.connect();
        let counting: Promise<number>;
        try {
          await writer.query('BEGIN ISOLATION LEVEL READ COMMITTED');
          await writer.query('SELECT 1 FROM record_scopes WHERE scope_id = $1 FOR UPDATE', [scopeId]);
          await writer.query(RAW_INSERT, [scopeId, 'w-', 4]);
          await writer.query("UPDATE records SET deleted_at = now() WHERE scope_id = $1 AND id IN ('1', '2', '3')", [
            scopeId,
          ]);
          counting = own.countRecords({ ...a, model: 'Issue' });
          await sleep(300);
          await writer.query('COMMIT');
        } finally {
          writer.release();
        }
        expect({ isolation, count: await counting }).toEqual({ isolation, count: 13 });
        expect(await own.countRecords({ ...a, model: 'Issue' })).toBe(13);
      } finally {
        await db.end();
      }
    }
  });

  it('keeps counts right when records are moved between scopes or truncated by hand', async () => {
    const { pool: own } = await useDatabase();
    const apart = createPostgresRecordStore({ db: own });
    const a = scope();
    const b = scope();
    await apart.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 10) });
    await apart.saveRecords({ ...b, model: 'Issue', runId: 'r1', records: ids(1, 2) });
    const [from, to] = [...(await scopeIds(own, a)), ...(await scopeIds(own, b))];
    await own.query("UPDATE records SET scope_id = $2 WHERE scope_id = $1 AND id IN ('5', '6')", [from, to]);
    expect(await apart.countRecords({ ...a, model: 'Issue' })).toBe(8);
    expect(await apart.countRecords({ ...b, model: 'Issue' })).toBe(4);
    await own.query('TRUNCATE records');
    expect(await apart.countRecords({ ...a, model: 'Issue' })).toBe(0);
    expect(await apart.countRecords({ ...b, model: 'Issue' })).toBe(0);
  });

  it('counts, after the migration, the records stored before it (no record read by the migration itself)', async () => {
    const { pool: own } = await useDatabase();
    const before = createPostgresRecordStore({ db: own });
    const named = (name: string) => {
      const migration = loadMigrations().find((m) => m.name === name);
      if (!migration) throw new Error(`migration ${name} not found`);
      return migration.sql;
    };
    // The database as it was before the migration: records_save_page as it was, no count, no triggers.
    await own.query(`DROP TRIGGER record_scope_count_insert ON records; DROP TRIGGER record_scope_count_update ON records;
      DROP TRIGGER record_scope_count_delete ON records; DROP TRIGGER record_scope_count_truncate ON records;
      DROP FUNCTION record_scope_count_unknown();
      ${named('20261127160000_records_save_page').replace('CREATE FUNCTION', 'CREATE OR REPLACE FUNCTION')};
      ALTER TABLE record_scopes DROP COLUMN live_records`);
    const a = scope();
    const c = scope();
    await before.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 12) });
    // A delete of the previous version's store (its statement, by hand: this store's keeps counts).
    await own.query("UPDATE records SET deleted_at = now() WHERE id IN ('1', '2')");
    await before.saveRecords({ ...c, model: 'Issue', runId: 'r1', records: ids(1, 3) });
    await own.query(`BEGIN; ${named('20261128140000_record_scope_counts')}; COMMIT`);
    const unknown = await own.query<{ n: string }>(
      'SELECT count(*) AS n FROM record_scopes WHERE live_records IS NULL',
    );
    expect(Number(unknown.rows[0]!.n)).toBe(2);
    const count = (where: SyncScope) => before.countRecords({ ...where, model: 'Issue' });
    expect(await count(a)).toBe(10);
    expect(await count(c)).toBe(3);
    await before.saveRecords({ ...a, model: 'Issue', runId: 'r1', records: ids(1, 13) });
    expect(await count(a)).toBe(13);
  });
});
