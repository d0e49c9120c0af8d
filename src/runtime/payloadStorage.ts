import { createHash } from 'node:crypto';
import { ExternalStorage, StorageDriverClaim, type Payload, type StorageDriver } from '@temporalio/common';
import type { Pool } from '../db/pool.js';

/**
 * Temporal external storage (the claim check) in Postgres: a payload above the threshold (a large HTTP
 * response, a large batch) is written to payload_blobs and Temporal's history keeps only its hash.
 * Both the worker and every client that reads run results must use the same data converter.
 */

/** Payloads above this size leave the history. 128 KiB keeps a run of 10,000 steps far below 50 MiB. */
export const EXTERNAL_PAYLOAD_THRESHOLD = 128 * 1024;

const DRIVER_NAME = 'postgres';

function payloadHash(payload: Payload): string {
  const hash = createHash('sha256');
  for (const key of Object.keys(payload.metadata ?? {}).sort()) {
    hash
      .update(key)
      .update('\0')
      .update(payload.metadata?.[key] ?? new Uint8Array())
      .update('\0');
  }
  hash.update(payload.data ?? new Uint8Array());
  return hash.digest('hex');
}

export function createPostgresStorageDriver({ db }: { db: Pool }): StorageDriver {
  return {
    name: DRIVER_NAME,
    type: 'integration-service.postgres',
    async store(_context, payloads) {
      const claims: StorageDriverClaim[] = [];
      for (const payload of payloads) {
        const hash = payloadHash(payload);
        const metadata = Object.fromEntries(
          Object.entries(payload.metadata ?? {}).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
        );
        // Content-addressed: the same payload stored twice (a replayed step) is one row.
        await db.query(
          'INSERT INTO payload_blobs (hash, metadata, data) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING',
          [hash, JSON.stringify(metadata), Buffer.from(payload.data ?? new Uint8Array())],
        );
        claims.push(new StorageDriverClaim({ hash }));
      }
      return claims;
    },
    async retrieve(_context, claims) {
      const hashes = claims.map((claim) => claim.claimData['hash'] ?? '');
      const result = await db.query<{ hash: string; metadata: Record<string, string>; data: Buffer }>(
        'SELECT hash, metadata, data FROM payload_blobs WHERE hash = ANY($1::text[])',
        [hashes],
      );
      const byHash = new Map(result.rows.map((row) => [row.hash, row]));
      return hashes.map((hash) => {
        const row = byHash.get(hash);
        if (!row) throw new Error(`external payload ${hash} is missing from payload_blobs`);
        return {
          metadata: Object.fromEntries(
            Object.entries(row.metadata).map(([key, value]) => [key, new Uint8Array(Buffer.from(value, 'base64'))]),
          ),
          data: new Uint8Array(row.data),
        };
      });
    },
  };
}

/** The data converter of the worker and of every client that starts runs or reads their results. */
export function createDataConverter({ db, threshold = EXTERNAL_PAYLOAD_THRESHOLD }: { db: Pool; threshold?: number }) {
  return {
    externalStorage: new ExternalStorage({
      drivers: [createPostgresStorageDriver({ db })],
      payloadSizeThreshold: threshold,
    }),
  };
}
