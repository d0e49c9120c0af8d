/**
 * The signatures of accepted inbound webhooks, each kept for the time tolerance of its timestamp, so
 * that a captured request replayed within that window is refused (`webhook_replayed`). Owns the table
 * `inbound_webhook_signatures` (its rows go with their environment by foreign key).
 */
import type { Pool } from '../db/pool.js';

export function createInboundSignatureStore({ db }: { db: Pool }) {
  return {
    /**
     * Records the signature's digest until `signedAtSeconds + toleranceSeconds`; false when it is
     * already recorded (a replay). Expired digests are dropped first.
     */
    async record(environmentId: string, digest: string, signedAtSeconds: number, toleranceSeconds: number) {
      await db.query('DELETE FROM inbound_webhook_signatures WHERE expires_at < now()');
      const recorded = await db.query(
        `INSERT INTO inbound_webhook_signatures (environment_id, signature_hash, expires_at)
         VALUES ($1, $2, to_timestamp($3) + make_interval(secs => $4)) ON CONFLICT DO NOTHING`,
        [environmentId, digest, signedAtSeconds, toleranceSeconds],
      );
      return recorded.rowCount !== 0;
    },

    /** Forgets a recorded digest: its delivery failed, and the sender's retry is not a replay. */
    async forget(environmentId: string, digest: string): Promise<void> {
      await db.query('DELETE FROM inbound_webhook_signatures WHERE environment_id = $1 AND signature_hash = $2', [
        environmentId,
        digest,
      ]);
    },
  };
}

export type InboundSignatureStore = ReturnType<typeof createInboundSignatureStore>;
