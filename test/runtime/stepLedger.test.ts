/**
 * The step ledger's deferred outcomes (src/steps/stepLedger.ts, issue 31): a request's answer is kept
 * from the moment it arrives and written with the run's next record write (in its statement), before
 * the run's next request, or by itself a moment later; never lost, never a row of a forgotten step.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import type { Pool } from '../../src/db/pool.js';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import type { RecordStore } from '../../src/records/types.js';
import { createStepLedger, DEFER_MS, DEFERRED_KEPT, RETRY_MS, type StepLedger } from '../../src/steps/stepLedger.js';
import { eventually } from '../helpers/eventually.js';
import { uniqueName } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';

let pool: Pool;
let ledger: StepLedger;
let records: RecordStore;
const statements: string[] = [];

beforeAll(async () => {
  ({ pool } = await useDatabase());
  const encryptor = new Encryptor([randomBytes(32)]);
  // Every statement the ledger and the store send, to tell a write of its own from one in a record write.
  const counted = new Proxy(pool, {
    get(target, property, receiver) {
      if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
      return (...args: Parameters<Pool['query']>) => {
        const config = args[0] as string | { text: string };
        statements.push(typeof config === 'string' ? config : config.text);
        return (target.query as (...a: unknown[]) => unknown)(...args);
      };
    },
  });
  ledger = createStepLedger({ db: counted, encryptor });
  records = createPostgresRecordStore({ db: counted });
});

const stored = async (runId: string) =>
  (
    await pool.query<{ step: number; outcome: string | null }>(
      'SELECT step, outcome FROM script_steps WHERE run_id = $1 ORDER BY step',
      [runId],
    )
  ).rows;

const scope = () => ({
  environmentId: 'dev',
  integrationId: 'github',
  connectionId: uniqueName('conn'),
  syncName: 'issues',
  model: 'Issue',
});

describe('deferred step outcomes', () => {
  it('answer recall at once, and reach the database by themselves within DEFER_MS', async () => {
    const runId = randomUUID();
    ledger.defer({ runId, step: 0 }, { ok: true, value: { status: 200, data: 'page 1' } });
    expect(await ledger.recall({ runId, step: 0 })).toEqual({ ok: true, value: { status: 200, data: 'page 1' } });
    expect(await stored(runId)).toEqual([]);
    const started = Date.now();
    const rows = await eventually(async () => ((await stored(runId)).length === 1 ? stored(runId) : undefined), 10_000);
    expect(Date.now() - started).toBeLessThan(DEFER_MS + 2000);
    expect(rows[0]!.outcome).not.toContain('page 1');
    expect(await ledger.recall({ runId, step: 0 })).toEqual({ ok: true, value: { status: 200, data: 'page 1' } });
  });

  it('are written in the statement of the run’s next record write, without one of their own', async () => {
    const runId = randomUUID();
    const where = scope();
    ledger.defer({ runId, step: 0 }, { ok: true, value: 'page 1' });
    ledger.defer(
      { runId, step: 1 },
      { ok: false, failure: { type: 'http_status_error', message: '404', details: [] } },
    );
    statements.length = 0;
    const summary = await ledger.withDeferred(runId, (earlier) =>
      records.saveRecords({
        ...where,
        runId: 'run-a',
        records: [{ id: 'a' }],
        step: { runId, step: 2, earlier },
      }),
    );
    expect(summary.added).toBe(1);
    expect((await stored(runId)).map((row) => row.step)).toEqual([0, 1, 2]);
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/records_save/);
    expect(await ledger.recall({ runId, step: 1 })).toEqual({
      ok: false,
      failure: { type: 'http_status_error', message: '404', details: [] },
    });
    // A repeat of the write (a resumed run) records what was deferred since, and applies nothing twice.
    ledger.defer({ runId, step: 3 }, { ok: true, value: 'page 2' });
    const again = await ledger.withDeferred(runId, (earlier) =>
      records.saveRecords({ ...where, runId: 'run-a', records: [{ id: 'a' }], step: { runId, step: 2, earlier } }),
    );
    expect(again).toEqual(summary);
    expect((await stored(runId)).map((row) => row.step)).toEqual([0, 1, 2, 3]);
  });

  it('stay deferred when the write fails, and are written all the same', async () => {
    const runId = randomUUID();
    const where = scope();
    await records.beginRun({ ...where, runId: 'run-new' });
    ledger.defer({ runId, step: 0 }, { ok: true, value: 'page 1' });
    await expect(
      ledger.withDeferred(runId, (earlier) =>
        records.saveRecords({ ...where, runId: 'run-old', records: [{ id: 'a' }], step: { runId, step: 1, earlier } }),
      ),
    ).rejects.toMatchObject({ code: 'run_superseded' });
    await eventually(async () => ((await stored(runId)).some((row) => row.step === 0) ? true : undefined), 10_000);
    expect((await stored(runId)).map((row) => row.step)).toEqual([0]);
  });

  it('are written before the run’s next request (flush), and those of forgotten steps never', async () => {
    const runId = randomUUID();
    ledger.defer({ runId, step: 0 }, { ok: true, value: 'page 1' });
    ledger.defer({ runId, step: 1 }, { ok: true, value: 'page 2' });
    await ledger.forget(runId, 1);
    await ledger.flush(runId);
    expect((await stored(runId)).map((row) => row.step)).toEqual([1]);
    // An answer of a forgotten step that arrives late is not written either.
    ledger.defer({ runId, step: 0 }, { ok: true, value: 'late' });
    await new Promise((resolve) => setTimeout(resolve, DEFER_MS * 3));
    expect((await stored(runId)).map((row) => row.step)).toEqual([1]);
    await ledger.forget(runId, 2_147_483_647);
    expect(await stored(runId)).toEqual([]);
  });

  it('are tried again while Postgres refuses them, said once, the latest DEFERRED_KEPT of a run kept', async () => {
    // A ledger whose writes of deferred rows fail until `refusing` is turned off (Postgres away).
    let refusing = true;
    const refused: string[] = [];
    const flaky = new Proxy(pool, {
      get(target, property, receiver) {
        if (property !== 'query') return Reflect.get(target, property, receiver) as unknown;
        return (...args: Parameters<Pool['query']>) => {
          const text = typeof args[0] === 'string' ? args[0] : (args[0] as { text: string }).text;
          if (refusing && text.includes('unnest')) {
            refused.push(text);
            return Promise.reject(new Error('connection refused'));
          }
          return (target.query as (...a: unknown[]) => unknown)(...args);
        };
      },
    });
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    try {
      const away = createStepLedger({ db: flaky, encryptor: new Encryptor([randomBytes(32)]) });
      const runId = randomUUID();
      const total = DEFERRED_KEPT + 20;
      for (let step = 0; step < total; step++) away.defer({ runId, step }, { ok: true, value: `page ${step}` });
      // Tried at DEFER_MS, then every RETRY_MS: at least two attempts, one warning.
      await eventually(async () => (refused.length >= 2 ? true : undefined), 10_000);
      expect(warn.mock.calls.filter((call) => String(call[0]).includes(runId))).toHaveLength(1);
      expect(await stored(runId)).toEqual([]);
      // Still answered from memory meanwhile: the latest steps; the earliest went unrecorded.
      expect(await away.recall({ runId, step: total - 1 })).toEqual({ ok: true, value: `page ${total - 1}` });
      expect(await away.recall({ runId, step: 0 })).toBeUndefined();
      refusing = false;
      const rows = await eventually(
        async () => ((await stored(runId)).length === DEFERRED_KEPT ? stored(runId) : undefined),
        10_000 + RETRY_MS,
      );
      expect(rows.map((row) => row.step)).toEqual(
        Array.from({ length: DEFERRED_KEPT }, (_, i) => total - DEFERRED_KEPT + i),
      );
      await away.forget(runId, 2_147_483_647);
    } finally {
      warn.mockRestore();
    }
  });

  it('records_save still takes the twelve arguments of the previous version (rolling upgrade)', async () => {
    const where = scope();
    const { rows } = await pool.query<{ saved: { added: number } }>(
      `SELECT records_save($1, $2, $3, $4, $5, $6, $7, $8, NULL, ARRAY['x'], ARRAY[gen_random_uuid()], ARRAY['{"id":"x"}']) AS saved`,
      [
        where.environmentId,
        where.integrationId,
        where.connectionId,
        where.model,
        where.syncName,
        'run-x',
        randomUUID(),
        0,
      ],
    );
    expect(rows[0]!.saved.added).toBe(1);
  });
});
