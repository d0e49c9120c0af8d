import { describe, expect, it } from 'vitest';
import { eventually } from '../helpers/eventually.js';
import { createPool } from '../../src/db/pool.js';
import { startRecordsMaintenance } from '../../src/records/maintenance.js';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import { freePort } from '../../src/devstack/process.js';
import { uniqueName } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';

describe('records maintenance (the worker purges what interrupted erases left)', () => {
  it('deletes erased records left behind at start and on every round after', async () => {
    const { pool } = await useDatabase();
    // `deferred` leaves the deleting to the purge, as a process that died after detaching would.
    const interrupted = createPostgresRecordStore({ db: pool, purge: 'deferred' });
    const store = createPostgresRecordStore({ db: pool });
    const scope = () => ({
      environmentId: 'dev',
      integrationId: 'github',
      connectionId: uniqueName('conn'),
      syncName: 'issues',
    });
    const rows = async () => Number((await pool.query<{ n: string }>('SELECT count(*) AS n FROM records')).rows[0]?.n);
    const first = scope();
    await interrupted.saveRecords({ ...first, model: 'Issue', runId: 'r', records: [{ id: 1 }, { id: 2 }, { id: 3 }] });
    await interrupted.eraseConnection(first);
    expect(await rows()).toBe(3);

    const lines: string[] = [];
    const maintenance = startRecordsMaintenance(store, { intervalMs: 300, log: (line) => lines.push(line) });
    try {
      await eventually(async () => ((await rows()) === 0 ? true : undefined), 10_000, 'the first purge');
      const second = scope();
      await interrupted.saveRecords({ ...second, model: 'Issue', runId: 'r', records: [{ id: 'a' }, { id: 'b' }] });
      const kept = scope();
      await interrupted.saveRecords({ ...kept, model: 'Issue', runId: 'r', records: [{ id: 'k' }] });
      await interrupted.eraseSync({ ...second, connectionId: second.connectionId });
      await eventually(async () => ((await rows()) === 1 ? true : undefined), 10_000, 'a later round');
      // What was not erased stays.
      expect((await store.listRecords({ ...kept, model: 'Issue' })).records.map((r) => r.id)).toEqual(['k']);
    } finally {
      await maintenance.stop();
    }
    expect(lines).toEqual([
      '[maintenance] deleted 3 records left by interrupted erases',
      '[maintenance] deleted 2 records left by interrupted erases',
    ]);
  });

  it('says so when Postgres cannot be reached, and keeps trying', async () => {
    // A port nobody listens on: the real driver error, not a simulated one.
    const db = createPool({ url: `postgres://nobody@127.0.0.1:${await freePort()}/none`, max: 1 });
    const lines: string[] = [];
    const maintenance = startRecordsMaintenance(createPostgresRecordStore({ db }), {
      intervalMs: 200,
      log: (line) => lines.push(line),
    });
    try {
      await eventually(async () => (lines.length >= 2 ? true : undefined), 10_000, 'two failed rounds');
    } finally {
      await maintenance.stop();
      await db.end();
    }
    expect(lines[0]).toMatch(/^\[maintenance\] purging erased records failed \(next try in 0 s\): .*ECONNREFUSED/);
  });
});
