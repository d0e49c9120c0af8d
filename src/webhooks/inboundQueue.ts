/**
 * The queue of inbound webhooks for sync entities (docs/api.md "Inbound webhooks", issue 29). Owns the
 * tables `inbound_webhook_bodies`, `inbound_webhook_queue` and `inbound_webhook_usage` (their rows go
 * with their environment by foreign key).
 *
 * A webhook's body is stored once, encrypted, however many syncs it goes to, and each of those syncs
 * gets an entry that refers to it; the entity workflow is signalled the entry's id, and the payload
 * itself only when it is small (`inlineBytes`). A larger payload never enters a workflow's memory or
 * history while it waits: the run that handles it loads it (`load`). The run's end removes the entry
 * (`complete`), a body goes with its last entry, and the entries of a sync go when it is stopped
 * (`erase`: its connection deleted, the sync removed by a deploy).
 *
 * What may wait is bounded three ways, all checked in the transaction that queues (`enqueue`), so that
 * several API processes share the bounds: entries per sync (the entity's own bound), bytes per sync,
 * and bytes per environment. A webhook that would pass one is refused whole (nothing queued) with 429
 * `webhook_queue_full`.
 */
import { randomUUID } from 'node:crypto';
import type { Encryptor } from '../connections/encryption.js';
import { inTransaction, type Pool } from '../db/pool.js';
import { ServiceError } from '../errors.js';

export interface InboundQueueLimits {
  /** Webhooks waiting per sync: the entity's own bound (workflows/syncEntity.ts MAX_QUEUED_WEBHOOKS). */
  syncEvents: number;
  /** Bytes of payloads waiting per sync. */
  syncBytes: number;
  /** Bytes of payloads waiting per environment (a body sent to several syncs counts once). */
  environmentBytes: number;
  /** Payloads up to this size travel in the entity's signal; larger ones stay in the queue. */
  inlineBytes: number;
}

export const DEFAULT_INBOUND_QUEUE_LIMITS: InboundQueueLimits = {
  syncEvents: 100,
  syncBytes: 64 * 1024 * 1024,
  environmentBytes: 512 * 1024 * 1024,
  inlineBytes: 4 * 1024,
};

/** When a full queue is worth trying again: it drains as runs end, one webhook per run. */
const FULL_RETRY_AFTER_SECONDS = 60;

export interface QueueScope {
  environmentId: string;
  integrationId: string;
}

export interface QueueTarget {
  connectionId: string;
  syncName: string;
}

export interface QueuedEntry extends QueueTarget {
  /** The entry's id, handed to the entity (QueuedWebhook.queueId). */
  id: string;
}

export interface EnqueueResult {
  entries: QueuedEntry[];
  /** The payload's size as stored (its JSON). */
  bytes: number;
  /** False when the payload stays in the queue and the run loads it. */
  inline: boolean;
}

export function createInboundWebhookQueue({
  db,
  encryptor,
  limits = DEFAULT_INBOUND_QUEUE_LIMITS,
}: {
  db: Pool;
  encryptor: Encryptor;
  limits?: InboundQueueLimits;
}) {
  /** Removes the bodies among `bodyIds` no entry refers to any more, and takes their bytes off the usage. */
  async function dropUnreferencedBodies(client: Pick<Pool, 'query'>, bodyIds: string[]): Promise<void> {
    if (bodyIds.length === 0) return;
    await client.query(
      `WITH gone AS (
         DELETE FROM inbound_webhook_bodies b
         WHERE b.id = ANY($1::uuid[])
           AND NOT EXISTS (SELECT 1 FROM inbound_webhook_queue q WHERE q.body_id = b.id)
         RETURNING environment_id, bytes)
       UPDATE inbound_webhook_usage u SET bytes = u.bytes - s.bytes
       FROM (SELECT environment_id, sum(bytes) AS bytes FROM gone GROUP BY environment_id) s
       WHERE u.environment_id = s.environment_id`,
      [bodyIds],
    );
  }

  return {
    limits,

    /**
     * Queues `payload` for each of `targets` (syncs of connections of the scope's integration), all or
     * none: 429 `webhook_queue_full` when one of them, or the environment, has no room.
     */
    async enqueue(scope: QueueScope, targets: QueueTarget[], payload: unknown): Promise<EnqueueResult> {
      const json = JSON.stringify(payload ?? null);
      const bytes = Buffer.byteLength(json, 'utf8');
      const inline = bytes <= limits.inlineBytes;
      if (targets.length === 0) return { entries: [], bytes, inline };
      return inTransaction(db, async (client) => {
        // Taken first: this row's lock orders every enqueue of the environment, across API processes.
        const usage = await client.query<{ bytes: string }>(
          `INSERT INTO inbound_webhook_usage (environment_id, bytes) VALUES ($1, $2)
           ON CONFLICT (environment_id) DO UPDATE SET bytes = inbound_webhook_usage.bytes + EXCLUDED.bytes
           RETURNING bytes`,
          [scope.environmentId, bytes],
        );
        const environmentBytes = Number(usage.rows[0]?.bytes ?? 0);
        if (environmentBytes > limits.environmentBytes) {
          throw full(
            `the environment's queued webhooks would hold ${mib(environmentBytes)}, over its bound of ${mib(limits.environmentBytes)} (WEBHOOK_QUEUE_ENVIRONMENT_BYTES)`,
          );
        }
        const waiting = await client.query<{ connection_id: string; sync_name: string; events: string; bytes: string }>(
          `SELECT connection_id, sync_name, count(*) AS events, coalesce(sum(bytes), 0) AS bytes
           FROM inbound_webhook_queue
           WHERE environment_id = $1 AND integration_id = $2
             AND (connection_id, sync_name) IN (SELECT * FROM unnest($3::text[], $4::text[]))
           GROUP BY connection_id, sync_name`,
          [
            scope.environmentId,
            scope.integrationId,
            targets.map((t) => t.connectionId),
            targets.map((t) => t.syncName),
          ],
        );
        for (const row of waiting.rows) {
          const where = `sync ${row.sync_name} of connection ${row.connection_id}`;
          if (Number(row.events) + 1 > limits.syncEvents) {
            throw full(`${where} has ${row.events} webhooks waiting, its bound (resume or trigger it to drain them)`);
          }
          if (Number(row.bytes) + bytes > limits.syncBytes) {
            throw full(
              `${where} would hold ${mib(Number(row.bytes) + bytes)} of webhooks, over its bound of ${mib(limits.syncBytes)} (WEBHOOK_QUEUE_SYNC_BYTES)`,
            );
          }
        }
        const bodyId = randomUUID();
        await client.query(
          'INSERT INTO inbound_webhook_bodies (id, environment_id, bytes, body) VALUES ($1, $2, $3, $4)',
          [bodyId, scope.environmentId, bytes, inline ? null : encryptor.encrypt(json, 'inbound_webhook')],
        );
        const entries = targets.map((target) => ({ ...target, id: randomUUID() }));
        await client.query(
          `INSERT INTO inbound_webhook_queue (id, body_id, environment_id, integration_id, connection_id, sync_name, bytes)
           SELECT id, $2, $3, $4, connection_id, sync_name, $5
           FROM unnest($1::uuid[], $6::text[], $7::text[]) AS t (id, connection_id, sync_name)`,
          [
            entries.map((e) => e.id),
            bodyId,
            scope.environmentId,
            scope.integrationId,
            bytes,
            entries.map((e) => e.connectionId),
            entries.map((e) => e.syncName),
          ],
        );
        return { entries, bytes, inline };
      });
    },

    /**
     * The payload of a queued entry, for the sync's run: 410-like `webhook_expired` (a run's failure)
     * when the entry is gone (its sync was erased, or it waited past the retention).
     */
    async load(scope: QueueScope & QueueTarget, id: string): Promise<unknown> {
      const { rows } = await db.query<{ body: string | null }>(
        `SELECT b.body FROM inbound_webhook_queue q JOIN inbound_webhook_bodies b ON b.id = q.body_id
         WHERE q.id = $1 AND q.environment_id = $2 AND q.integration_id = $3 AND q.connection_id = $4 AND q.sync_name = $5`,
        [id, scope.environmentId, scope.integrationId, scope.connectionId, scope.syncName],
      );
      const row = rows[0];
      if (!row || row.body === null) {
        throw new ServiceError(
          'webhook_expired',
          `the queued webhook ${id} of sync ${scope.syncName} is no longer queued (its sync was stopped, or it waited past RETENTION_QUEUED_WEBHOOKS)`,
        );
      }
      return encryptor.decryptJson(row.body, 'inbound_webhook');
    },

    /** The run that handled the entry has ended: removes it (and its body with its last entry). Idempotent. */
    async complete(scope: QueueScope & QueueTarget, id: string): Promise<void> {
      await inTransaction(db, async (client) => {
        // The body's lock orders the completions of one webhook's entries, so its last one sees no other.
        const { rows } = await client.query<{ body_id: string }>(
          `SELECT b.id AS body_id FROM inbound_webhook_bodies b JOIN inbound_webhook_queue q ON q.body_id = b.id
           WHERE q.id = $1 AND q.environment_id = $2 AND q.integration_id = $3 AND q.connection_id = $4 AND q.sync_name = $5
           FOR UPDATE OF b`,
          [id, scope.environmentId, scope.integrationId, scope.connectionId, scope.syncName],
        );
        const bodyId = rows[0]?.body_id;
        if (bodyId === undefined) return;
        await client.query('DELETE FROM inbound_webhook_queue WHERE id = $1', [id]);
        await dropUnreferencedBodies(client, [bodyId]);
      });
    },

    /** Removes every entry of the connection's sync (or of all its syncs): its entity was stopped. */
    async erase(scope: QueueScope & { connectionId: string; syncName?: string | undefined }): Promise<number> {
      return inTransaction(db, async (client) => {
        const { rows } = await client.query<{ body_id: string }>(
          `DELETE FROM inbound_webhook_queue
           WHERE environment_id = $1 AND integration_id = $2 AND connection_id = $3 AND ($4::text IS NULL OR sync_name = $4)
           RETURNING body_id`,
          [scope.environmentId, scope.integrationId, scope.connectionId, scope.syncName ?? null],
        );
        await dropUnreferencedBodies(client, [...new Set(rows.map((row) => row.body_id))]);
        return rows.length;
      });
    },

    /**
     * Removes the webhooks received before `cutoff` that still wait (retention: RETENTION_QUEUED_WEBHOOKS),
     * in one transaction; the entries removed.
     */
    async expireBefore(cutoff: Date): Promise<number> {
      return inTransaction(db, async (client) => {
        const old = await client.query<{ id: string }>(
          'SELECT id FROM inbound_webhook_bodies WHERE received_at < $1 FOR UPDATE',
          [cutoff],
        );
        const bodyIds = old.rows.map((row) => row.id);
        const removed = await client.query('DELETE FROM inbound_webhook_queue WHERE body_id = ANY($1::uuid[])', [
          bodyIds,
        ]);
        await dropUnreferencedBodies(client, bodyIds);
        return removed.rowCount ?? 0;
      });
    },

    /** Bytes and entries waiting in the environment (the dashboard, tests). */
    async usage(environmentId: string): Promise<{ bytes: number; entries: number; bodies: number }> {
      const { rows } = await db.query<{ bytes: string | null; entries: string; bodies: string }>(
        `SELECT (SELECT bytes FROM inbound_webhook_usage WHERE environment_id = $1) AS bytes,
                (SELECT count(*) FROM inbound_webhook_queue WHERE environment_id = $1) AS entries,
                (SELECT count(*) FROM inbound_webhook_bodies WHERE environment_id = $1) AS bodies`,
        [environmentId],
      );
      const row = rows[0];
      return { bytes: Number(row?.bytes ?? 0), entries: Number(row?.entries ?? 0), bodies: Number(row?.bodies ?? 0) };
    },
  };
}

export type InboundWebhookQueue = ReturnType<typeof createInboundWebhookQueue>;

function full(message: string): ServiceError {
  return new ServiceError('webhook_queue_full', `webhook refused: ${message}; retry in ${FULL_RETRY_AFTER_SECONDS} s`, {
    retryable: true,
    retryAfterSeconds: FULL_RETRY_AFTER_SECONDS,
  });
}

function mib(bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}
