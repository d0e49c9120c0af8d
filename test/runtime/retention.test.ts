/**
 * Retention on the real Postgres and Temporal (src/runtime/retention.ts): rows older than their
 * table's retention go, newer rows stay, the latest run of each sync stays, and a claim-checked
 * payload stays while any history Temporal still keeps may refer to it: while the execution that was
 * open when it was written runs, after it closed, until Temporal removed that execution. Each table's
 * own store deletes (`expireBefore`); retention decides when and the cutoff.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Client } from '@temporalio/client';
import { msToTs, type Payload } from '@temporalio/common';
import { beforeAll, describe, expect, it } from 'vitest';
import { Encryptor } from '../../src/connections/encryption.js';
import { createPool, type Pool } from '../../src/db/pool.js';
import { createPostgresLogStore } from '../../src/runtime/logStore.js';
import { createClaimCheckCodec, createPayloadBlobStore } from '../../src/runtime/payloadStorage.js';
import {
  purgeExpired,
  temporalHorizon,
  type RetentionPolicy,
  type RetentionStores,
} from '../../src/runtime/retention.js';
import { createRunHistory } from '../../src/runtime/runHistory.js';
import { createStepLedger } from '../../src/steps/stepLedger.js';
import { createWebhookDeliveryStore } from '../../src/webhooks/deliveries.js';
import { createWebhookSettingsStore } from '../../src/webhooks/settings.js';
import { loadSettings } from '../../src/settings.js';
import { eventually } from '../helpers/eventually.js';
import { uniqueName, useTemporalClient } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';

const DAY = 24 * 3_600_000;
const NONE: RetentionPolicy = {
  syncRuns: null,
  scriptLogs: null,
  webhookDeliveries: null,
  payloadBlobs: null,
  stepLedger: null,
};

let db: Pool;
let url: string;
let stores: RetentionStores;
let temporal: Client;

/** The stores the service purges with (src/service.ts), over `pool`. */
function storesOver(pool: Pool): RetentionStores {
  const encryptor = new Encryptor([randomBytes(32)]);
  return {
    syncRuns: createRunHistory({ db: pool }),
    scriptLogs: createPostgresLogStore({ db: pool }),
    webhookDeliveries: createWebhookDeliveryStore({
      db: pool,
      settings: createWebhookSettingsStore({ db: pool, encryptor }),
    }),
    payloadBlobs: createPayloadBlobStore({ db: pool }),
    stepLedger: createStepLedger({ db: pool, encryptor }),
  };
}

beforeAll(async () => {
  ({ pool: db, url } = await useDatabase());
  stores = storesOver(db);
  const client = await useTemporalClient();
  // A namespace of this file's own: other test files' executions must not hold its blobs back.
  const namespace = uniqueName('retention');
  await client.workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs('1 day') });
  temporal = new Client({ connection: client.connection, namespace });
  await eventually(
    async () => (await temporal.workflowService.describeNamespace({ namespace })) && true,
    30_000,
    'the namespace',
  );
});

const ago = (ms: number): Date => new Date(Date.now() - ms);

async function count(sql: string, values: unknown[] = []): Promise<number> {
  const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM (${sql}) t`, values);
  return Number(rows[0]?.n);
}

describe('retention', () => {
  it('deletes rows past each table’s retention and keeps the newer ones, and each sync’s latest run', async () => {
    const env = `env_${randomUUID()}`;
    await db.query(`INSERT INTO environments (id, name, secret_key_hash, public_key) VALUES ($1, $1, $1, $1)`, [env]);
    await db.query(`INSERT INTO integrations (environment_id, id, provider) VALUES ($1, 'crm', 'fake')`, [env]);
    await db.query(
      `INSERT INTO connections (environment_id, provider_config_key, connection_id, credentials_encrypted) VALUES ($1, 'crm', 'c1', 'x')`,
      [env],
    );
    const run = async (id: string, connection: string, sync: string, finished: Date) =>
      db.query(
        `INSERT INTO sync_runs (run_id, environment_id, integration_id, connection_id, sync_name, mode, status, started_at, finished_at)
         VALUES ($1, $2, 'crm', $3, $4, 'incremental', 'success', $5, $5)`,
        [id, env, connection, sync, finished],
      );
    await run('r-old', 'c1', 'contacts', ago(100 * DAY));
    await run('r-latest-old', 'c1', 'contacts', ago(95 * DAY));
    await run('r-gone-connection', 'gone', 'contacts', ago(100 * DAY));
    await run('r-other-sync', 'c1', 'deals', ago(100 * DAY));
    await run('r-new', 'c1', 'notes', ago(DAY));
    const log = async (runId: string, created: Date) =>
      db.query(
        `INSERT INTO script_logs (environment_id, integration_id, connection_id, script_kind, script_name, run_id, level, message, logged_at, seq, created_at)
         VALUES ($1, 'crm', 'c1', 'sync', 'contacts', $2, 'info', 'line', $3, 0, $3)`,
        [env, runId, created],
      );
    await log('log-old', ago(31 * DAY));
    await log('log-new', ago(29 * DAY));
    const delivery = async (key: string, status: string, created: Date) =>
      db.query(
        `INSERT INTO webhook_deliveries (delivery_key, environment_id, event_type, url, payload, status, created_at)
         VALUES ($1, $2, 'sync', 'https://app.example/hook', '{}', $3, $4)`,
        [key, env, status, created],
      );
    await delivery('d-old', 'delivered', ago(31 * DAY));
    await delivery('d-old-pending', 'pending', ago(31 * DAY));
    await delivery('d-new', 'failed', ago(DAY));
    await db.query(`INSERT INTO script_steps (run_id, step, created_at) VALUES ('s', 1, $1), ('s', 2, $2)`, [
      ago(2 * 3_600_000),
      ago(60_000),
    ]);

    const policy: RetentionPolicy = {
      syncRuns: 90 * DAY,
      scriptLogs: 30 * DAY,
      webhookDeliveries: 30 * DAY,
      payloadBlobs: null,
      stepLedger: 3_600_000,
    };
    // Batches of one row: the purge loops until a table has nothing left past its retention.
    const counts = await purgeExpired({ db, stores, policy, batchSize: 1, log: () => undefined });
    expect(counts).toEqual({ sync_runs: 2, script_logs: 1, webhook_deliveries: 2, payload_blobs: 0, script_steps: 1 });
    const runs = await db.query<{ run_id: string }>(
      'SELECT run_id FROM sync_runs WHERE environment_id = $1 ORDER BY run_id',
      [env],
    );
    // c1's contacts keep their latest run however old it is, and so does `deals` (its only run); the older
    // contacts run goes, and so does the run of a connection that no longer exists.
    expect(runs.rows.map((r) => r.run_id)).toEqual(['r-latest-old', 'r-new', 'r-other-sync']);
    expect(await count('SELECT run_id FROM script_logs WHERE environment_id = $1', [env])).toBe(1);
    expect(await count(`SELECT 1 FROM script_logs WHERE run_id = 'log-new'`)).toBe(1);
    expect(await count(`SELECT 1 FROM webhook_deliveries WHERE delivery_key = 'd-new'`)).toBe(1);
    expect(await count('SELECT 1 FROM webhook_deliveries WHERE environment_id = $1', [env])).toBe(1);
    expect(await count(`SELECT 1 FROM script_steps WHERE run_id = 's' AND step = 2`)).toBe(1);
    expect(await count(`SELECT 1 FROM script_steps WHERE run_id = 's'`)).toBe(1);

    // A second round finds nothing more; `forever` (null) keeps everything.
    expect(await purgeExpired({ db, stores, policy, log: () => undefined })).toEqual({
      sync_runs: 0,
      script_logs: 0,
      webhook_deliveries: 0,
      payload_blobs: 0,
      script_steps: 0,
    });
    await run('r-ancient', 'c1', 'contacts', ago(3650 * DAY));
    await purgeExpired({ db, stores, policy: NONE, log: () => undefined });
    expect(await count(`SELECT 1 FROM sync_runs WHERE run_id = 'r-ancient'`)).toBe(1);
  });

  it('needs one connection: the stores delete on the connection that holds the purge lock', async () => {
    // DATABASE_POOL_SIZE=1: a store that took a connection of its own would wait for the lock's forever.
    const one = createPool({ url, max: 1, applicationName: 'retention-one-connection' });
    try {
      const runId = `one-${randomUUID()}`;
      await one.query(
        `INSERT INTO script_steps (run_id, step, created_at) VALUES ($1, 1, now() - interval '2 hours')`,
        [runId],
      );
      const counts = await purgeExpired({
        db: one,
        stores: storesOver(one),
        policy: { ...NONE, stepLedger: 3_600_000 },
        log: () => undefined,
      });
      expect(counts?.script_steps).toBeGreaterThanOrEqual(1);
      expect(await count('SELECT 1 FROM script_steps WHERE run_id = $1', [runId])).toBe(0);
    } finally {
      await one.end();
    }
  }, 60_000);

  it('keeps a payload blob while Temporal keeps an execution that was open when it was written', async () => {
    const codec = createClaimCheckCodec({ db, threshold: 0 });
    const payload = (text: string): Payload => ({
      metadata: { encoding: new TextEncoder().encode('json/plain') },
      data: new TextEncoder().encode(JSON.stringify({ text, pad: 'x'.repeat(64) })),
    });
    const store = async (text: string): Promise<string> => {
      const [claim] = await codec.encode([payload(text)]);
      return new TextDecoder().decode(claim!.data);
    };
    const exists = async (hash: string) => (await count('SELECT 1 FROM payload_blobs WHERE hash = $1', [hash])) === 1;
    const policy: RetentionPolicy = { ...NONE, payloadBlobs: 0 };
    const purge = () =>
      purgeExpired({ db, stores, policy, horizon: temporalHorizon(temporal), clockSkewMs: 0, log: () => undefined });

    const before = await store('written before any execution');
    const rewritten = await store('written before, and again while the execution runs');
    // An execution on a task queue no worker polls: open, as a long sync run or a paused entity is.
    const workflowId = uniqueName('open');
    const handle = await temporal.workflow.start('checkHealth', {
      taskQueue: uniqueName('nobody'),
      workflowId,
      args: [],
    });
    await eventually(
      async () => {
        for await (const execution of temporal.workflow.list({ query: `WorkflowId = "${workflowId}"` }))
          return execution;
        return undefined;
      },
      30_000,
      'the execution in visibility',
    );
    const during = await store('written while the execution runs');
    expect(await store('written before, and again while the execution runs')).toBe(rewritten);

    expect((await purge())?.payload_blobs).toBe(1);
    expect(await exists(before)).toBe(false);
    // The execution's history may refer to these two (the second was written again meanwhile).
    expect(await exists(during)).toBe(true);
    expect(await exists(rewritten)).toBe(true);

    // Closed, its history stays for the namespace's retention: so do the blobs.
    await handle.terminate('closing it');
    await eventually(
      async () => ((await handle.describe()).status.name === 'TERMINATED' ? true : undefined),
      30_000,
      'the termination',
    );
    expect((await purge())?.payload_blobs).toBe(0);
    expect(await exists(during)).toBe(true);

    // Once Temporal removed the execution (what the namespace's retention does), nothing refers to them.
    await temporal.workflowService.deleteWorkflowExecution({
      namespace: temporal.options.namespace,
      workflowExecution: { workflowId },
    });
    await eventually(
      async () => {
        for await (const _ of temporal.workflow.list({ query: `WorkflowId = "${workflowId}"` })) return undefined;
        return true;
      },
      150_000,
      'the execution gone from visibility',
    );
    expect((await purge())?.payload_blobs).toBe(2);
    expect(await exists(during)).toBe(false);
    expect(await exists(rewritten)).toBe(false);
  }, 240_000);

  it('keeps every blob when Temporal cannot say what it keeps, and lets one process purge at a time', async () => {
    const codec = createClaimCheckCodec({ db, threshold: 0 });
    const [claim] = await codec.encode([{ metadata: {}, data: new TextEncoder().encode(`blob ${randomUUID()}`) }]);
    const hash = new TextDecoder().decode(claim!.data);
    await db.query(`UPDATE payload_blobs SET last_written_at = now() - interval '30 days' WHERE hash = $1`, [hash]);
    const lines: string[] = [];
    const counts = await purgeExpired({
      db,
      stores,
      policy: { ...NONE, payloadBlobs: DAY },
      horizon: () => Promise.reject(new Error('visibility unavailable')),
      log: (line) => lines.push(line),
    });
    expect(counts?.payload_blobs).toBe(0);
    expect(lines.join(' ')).toContain('visibility unavailable');
    expect(await count('SELECT 1 FROM payload_blobs WHERE hash = $1', [hash])).toBe(1);

    const holder = await db.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1, $2)', [0x5e41, 0x7e7e]);
      expect(
        await purgeExpired({ db, stores, policy: { ...NONE, payloadBlobs: DAY }, horizon: async (b) => b }),
      ).toBeUndefined();
      expect(await count('SELECT 1 FROM payload_blobs WHERE hash = $1', [hash])).toBe(1);
      await holder.query('SELECT pg_advisory_unlock($1, $2)', [0x5e41, 0x7e7e]);
    } finally {
      holder.release();
    }
    expect(
      (
        await purgeExpired({
          db,
          stores,
          policy: { ...NONE, payloadBlobs: DAY },
          horizon: async (b) => b,
          clockSkewMs: 0,
        })
      )?.payload_blobs,
    ).toBe(1);
  });
});

describe('retention settings', () => {
  it('parse durations and forever, and refuse what is too short or unreadable, naming the variable', () => {
    const settings = loadSettings({
      RETENTION_SYNC_RUNS: '14d',
      RETENTION_SCRIPT_LOGS: 'forever',
      RETENTION_STEP_LEDGER: '2h',
    });
    expect(settings.RETENTION_SYNC_RUNS).toBe(14 * DAY);
    expect(settings.RETENTION_SCRIPT_LOGS).toBeNull();
    expect(settings.RETENTION_STEP_LEDGER).toBe(2 * 3_600_000);
    expect(settings.RETENTION_WEBHOOK_DELIVERIES).toBe(30 * DAY);
    expect(settings.RETENTION_PAYLOAD_BLOBS).toBe(7 * DAY);
    expect(() => loadSettings({ RETENTION_SCRIPT_LOGS: '2h' })).toThrow(/RETENTION_SCRIPT_LOGS: must be at least 1d/);
    expect(() => loadSettings({ RETENTION_PAYLOAD_BLOBS: 'soon' })).toThrow(
      /RETENTION_PAYLOAD_BLOBS: expected a duration/,
    );
  });
});
