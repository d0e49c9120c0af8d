/**
 * Outbound webhooks to the application (docs/api.md "Outbound webhooks"): when a sync run ends, one
 * delivery per model with changes (added, updated, deleted counts), or one for the failure. Each is
 * a row of webhook_deliveries (the delivery log) and is sent by the `sendWebhookDelivery` activity,
 * whose retry policy in the `deliverWebhook` workflow does the back-off; every attempt updates the row.
 * The body is signed: `X-Service-Hmac-Sha256` is the hex HMAC-SHA256 of the exact body bytes. The
 * request obeys the outbound request policy (src/runtime/outbound.ts), like every request the service sends.
 */
import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { expiryByAge } from '../db/expiry.js';
import type { Pool } from '../db/pool.js';
import { webhookAttempts, webhookDeliveries } from '../metrics/index.js';
import { outboundRefusal, policyFetch } from '../runtime/outbound.js';
import type { SyncRunResult } from '../runtime/definitions.js';
import type { WebhookSettingsStore } from './settings.js';

export const SIGNATURE_HEADER = 'X-Service-Hmac-Sha256';

/** What the sync entity hands over when a run ends (successfully or not). */
export interface SyncFinishedEvent {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
  result: SyncRunResult | null;
  error: { code: string; message: string } | null;
}

/** The input of the `deliverWebhook` workflow (workflows/deliverWebhook.ts). */
export interface DeliverWebhookInput {
  /** A finished sync run: its deliveries are recorded first. */
  event?: SyncFinishedEvent | undefined;
  /**
   * Deliveries already recorded under this workflow's id (connection events: the service records them
   * before it starts the workflow, `event:<env>:<uuid>`).
   */
  deliveries?: string[] | undefined;
  /** Back-off tunables, for tests; production uses the defaults. */
  retry?: { initialIntervalMs?: number; maximumIntervalMs?: number; maximumAttempts?: number } | undefined;
}

export const webhookDeliverySchema = z.object({
  id: z.string(),
  event_type: z.string(),
  integration_id: z.string().nullable(),
  connection_id: z.string().nullable(),
  sync_name: z.string().nullable(),
  model: z.string().nullable(),
  url: z.string(),
  payload: z.unknown(),
  status: z.enum(['pending', 'delivered', 'failed']),
  attempts: z.number(),
  last_status_code: z.number().nullable(),
  last_error: z.string().nullable(),
  created_at: z.string(),
  last_attempt_at: z.string().nullable(),
  delivered_at: z.string().nullable(),
});
export type WebhookDelivery = z.infer<typeof webhookDeliverySchema>;

interface DeliveryRow {
  id: string;
  environment_id: string;
  event_type: string;
  integration_id: string | null;
  connection_id: string | null;
  sync_name: string | null;
  model: string | null;
  url: string;
  payload: unknown;
  status: WebhookDelivery['status'];
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: Date;
  last_attempt_at: Date | null;
  delivered_at: Date | null;
}

const toDelivery = (row: DeliveryRow): WebhookDelivery => ({
  id: row.id,
  event_type: row.event_type,
  integration_id: row.integration_id,
  connection_id: row.connection_id,
  sync_name: row.sync_name,
  model: row.model,
  url: row.url,
  payload: row.payload,
  status: row.status,
  attempts: row.attempts,
  last_status_code: row.last_status_code,
  last_error: row.last_error,
  created_at: row.created_at.toISOString(),
  last_attempt_at: row.last_attempt_at?.toISOString() ?? null,
  delivered_at: row.delivered_at?.toISOString() ?? null,
});

async function listDeliveries(
  db: Pool,
  options: {
    environmentId: string;
    status?: string | undefined;
    connection_id?: string | undefined;
    before?: string | undefined;
    limit: number;
  },
): Promise<WebhookDelivery[]> {
  const { rows } = await db.query<DeliveryRow>(
    `SELECT * FROM webhook_deliveries
     WHERE environment_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR connection_id = $3)
       AND ($4::bigint IS NULL OR id < $4)
     ORDER BY id DESC LIMIT $5`,
    [
      options.environmentId,
      options.status ?? null,
      options.connection_id ?? null,
      options.before ?? null,
      options.limit,
    ],
  );
  return rows.map(toDelivery);
}

/** What the run history knows of a run that the event alone does not say (a failed run's start). */
export interface RunTimes {
  mode: string;
  startedAt: string;
  finishedAt: string;
}

/**
 * The bodies of one run's deliveries, in the de-facto shape (camelCase, `type: 'sync'`): one per model
 * with changes, or one for the failure. `syncType` is `INITIAL` for a run that fetched everything (a
 * full sync or a full refresh), as the de-facto API names it; `runId` is this service's addition.
 */
export function syncWebhookBodies(
  event: SyncFinishedEvent,
  run?: RunTimes,
): { model: string | null; body: Record<string, unknown> }[] {
  const common = {
    from: 'integration-service',
    type: 'sync',
    connectionId: event.connectionId,
    providerConfigKey: event.integrationId,
    syncName: event.syncName,
    syncVariant: 'base',
  };
  if (event.error || !event.result) {
    const failedAt = run?.finishedAt ?? new Date().toISOString();
    return [
      {
        model: null,
        body: {
          ...common,
          model: null,
          syncType: run === undefined || run.mode === 'incremental' ? 'INCREMENTAL' : 'INITIAL',
          success: false,
          error: {
            type: event.error?.code ?? 'run_failed',
            description: event.error?.message ?? 'the run failed',
          },
          startedAt: run?.startedAt ?? failedAt,
          failedAt,
        },
      },
    ];
  }
  const result = event.result;
  return Object.entries(result.models)
    .filter(([, summary]) => summary.added + summary.updated + summary.deleted > 0)
    .map(([model, summary]) => ({
      model,
      body: {
        ...common,
        model,
        syncType: result.full ? 'INITIAL' : 'INCREMENTAL',
        success: true,
        responseResults: { added: summary.added, updated: summary.updated, deleted: summary.deleted },
        // Read the changes with GET /records?model=…&modified_after=<this>.
        modifiedAfter: result.startedAt,
        // Deprecated in the de-facto API; the same instant.
        queryTimeStamp: result.startedAt,
        runId: result.runId,
      },
    }));
}

/**
 * Writes the delivery rows of one event (idempotent by `key`, the delivering workflow's id) and
 * returns their ids; none when the environment has no webhook URL or nothing changed.
 */
async function recordSyncDeliveries(
  db: Pool,
  settings: WebhookSettingsStore,
  event: SyncFinishedEvent,
  key: string,
): Promise<string[]> {
  const outbound = await settings.outbound(event.environmentId);
  if (!outbound?.url) return [];
  let run: RunTimes | undefined;
  if (!event.result || event.error) {
    // The delivering workflow's id is `<run id>:webhook`; the run was recorded before it started.
    const { rows } = await db.query<{ mode: string; started_at: Date; finished_at: Date }>(
      'SELECT mode, started_at, finished_at FROM sync_runs WHERE run_id = $1',
      [key.replace(/:webhook$/, '')],
    );
    const row = rows[0];
    if (row)
      run = { mode: row.mode, startedAt: row.started_at.toISOString(), finishedAt: row.finished_at.toISOString() };
  }
  const ids: string[] = [];
  for (const { model, body } of syncWebhookBodies(event, run)) {
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (delivery_key, environment_id, event_type, integration_id, connection_id, sync_name, model, url, payload, status)
       VALUES ($1, $2, 'sync', $3, $4, $5, $6, $7, $8, 'pending')
       ON CONFLICT (delivery_key) DO UPDATE SET delivery_key = EXCLUDED.delivery_key
       RETURNING id`,
      [
        `${key}:${model ?? 'error'}`,
        event.environmentId,
        event.integrationId,
        event.connectionId,
        event.syncName,
        model,
        outbound.url,
        JSON.stringify(body),
      ],
    );
    ids.push(rows[0]!.id);
  }
  return ids;
}

export function sign(secret: string, body: string): string {
  return createHmac('sha256', secret).update(body, 'utf8').digest('hex');
}

export class DeliveryAttemptError extends Error {
  override name = 'DeliveryAttemptError';
}

/**
 * One attempt of one delivery. Returns when the application answered 2xx (or the delivery was
 * already delivered); throws DeliveryAttemptError otherwise, after recording the attempt.
 */
async function attemptDelivery(
  db: Pool,
  settings: WebhookSettingsStore,
  id: string,
  options: { fetch?: typeof fetch; timeoutMs?: number } = {},
): Promise<void> {
  const { rows } = await db.query<DeliveryRow>('SELECT * FROM webhook_deliveries WHERE id = $1', [id]);
  const row = rows[0];
  if (!row) throw new DeliveryAttemptError(`webhook delivery ${id} does not exist`);
  if (row.status === 'delivered') return;
  const outbound = await settings.outbound(row.environment_id);
  if (!outbound) throw new DeliveryAttemptError(`environment ${row.environment_id} has no webhook settings any more`);
  const body = JSON.stringify(row.payload);
  let status: number | null = null;
  let error: string | null = null;
  try {
    const response = await (options.fetch ?? policyFetch)(row.url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'user-agent': 'integration-service-webhooks',
        [SIGNATURE_HEADER]: sign(outbound.secret, body),
        'X-Service-Delivery-Id': row.id,
        'X-Service-Event': row.event_type,
      },
      body,
      redirect: 'manual',
      signal: AbortSignal.timeout(options.timeoutMs ?? 15_000),
    });
    status = response.status;
    await response.arrayBuffer().catch(() => undefined);
    if (status < 200 || status >= 300) error = `the application answered ${status}`;
  } catch (cause) {
    const refused = outboundRefusal(cause);
    error = `the request failed: ${refused?.message ?? (cause instanceof Error ? cause.message : String(cause))}`;
  }
  webhookAttempts.inc({ result: error === null ? 'ok' : 'error' });
  await db.query(
    `UPDATE webhook_deliveries SET attempts = attempts + 1, last_status_code = $2, last_error = $3, last_attempt_at = now(),
       status = CASE WHEN $3::text IS NULL THEN 'delivered' ELSE status END,
       delivered_at = CASE WHEN $3::text IS NULL THEN now() ELSE delivered_at END
     WHERE id = $1`,
    [id, status, error],
  );
  // Once per delivery: an attempt that finds it delivered returned above.
  if (error === null) webhookDeliveries.inc({ outcome: 'delivered' });
  if (error !== null) throw new DeliveryAttemptError(`webhook delivery ${id} to ${row.url}: ${error}`);
}

/** The key a delivery was recorded under (`<workflow id>:…`), or undefined when there is no such delivery. */
async function deliveryKeyOf(db: Pool, id: string): Promise<string | undefined> {
  const { rows } = await db.query<{ delivery_key: string }>(
    'SELECT delivery_key FROM webhook_deliveries WHERE id = $1',
    [id],
  );
  return rows[0]?.delivery_key;
}

/** After the last attempt failed: the delivery is given up, and the log says so. */
async function markDeliveryFailed(db: Pool, id: string, message: string): Promise<void> {
  const { rowCount } = await db.query(
    `UPDATE webhook_deliveries SET status = 'failed', last_error = $2 WHERE id = $1 AND status = 'pending'`,
    [id, message.slice(0, 2000)],
  );
  if (rowCount === 1) webhookDeliveries.inc({ outcome: 'failed' });
}

/** The options of `list`: one environment's deliveries, newest first, before the delivery id `before`. */
export type ListDeliveriesOptions = Parameters<typeof listDeliveries>[1];

/** The delivery log (webhook_deliveries): what the API lists, the worker records and sends, retention expires. */
export function createWebhookDeliveryStore({ db, settings }: { db: Pool; settings: WebhookSettingsStore }) {
  return {
    list: (options: ListDeliveriesOptions) => listDeliveries(db, options),
    record: (event: SyncFinishedEvent, key: string) => recordSyncDeliveries(db, settings, event, key),
    attempt: (id: string, options?: { fetch?: typeof fetch; timeoutMs?: number }) =>
      attemptDelivery(db, settings, id, options),
    keyOf: (id: string) => deliveryKeyOf(db, id),
    markFailed: (id: string, message: string) => markDeliveryFailed(db, id, message),
    /**
     * Deletes the deliveries created before `cutoff`. A pending delivery is retried for about 40 minutes
     * (workflows/deliverWebhook.ts) and the retention is at least a day: one older than that was
     * abandoned, and goes too.
     */
    expireBefore: expiryByAge(db, 'webhook_deliveries', 'created_at', ['id']),
  };
}

export type WebhookDeliveryStore = ReturnType<typeof createWebhookDeliveryStore>;
