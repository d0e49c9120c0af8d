import { createHash } from 'node:crypto';
import type { Pool } from '../db/pool.js';
import { holdingsOfTables } from '../db/environmentHoldings.js';
import { ServiceError } from '../errors.js';

/** The deployed script bundles, addressed by content hash (table script_bundles). */
export interface ScriptStore {
  /** Stores a bundle deployed to an environment (idempotent) and returns its hash. */
  put(code: string, environmentId: string): Promise<string>;
  /**
   * The bundle with this hash, if it was deployed to this environment; throws `script_not_found`
   * otherwise (a run loads only its own environment's code).
   */
  get(hash: string, environmentId: string): Promise<string>;
}

/** SHA-256 of the bundle's code, hex: the key a deployment records and a run fetches by. */
export function scriptHash(code: string): string {
  return createHash('sha256').update(code, 'utf8').digest('hex');
}

export function createPostgresScriptStore({ db }: { db: Pool }): ScriptStore {
  return {
    async put(code, environmentId) {
      const hash = scriptHash(code);
      await db.query(
        `WITH bundle AS (
           INSERT INTO script_bundles (hash, code, size_bytes) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING
         )
         INSERT INTO script_bundle_environments (hash, environment_id) VALUES ($1, $4) ON CONFLICT DO NOTHING`,
        [hash, code, Buffer.byteLength(code, 'utf8'), environmentId],
      );
      return hash;
    },
    async get(hash, environmentId) {
      const result = await db.query<{ code: string }>(
        `SELECT b.code FROM script_bundles b
         JOIN script_bundle_environments e ON e.hash = b.hash AND e.environment_id = $2
         WHERE b.hash = $1`,
        [hash, environmentId],
      );
      const row = result.rows[0];
      if (!row) {
        throw new ServiceError(
          'script_not_found',
          `no script bundle with hash ${hash} was deployed to this environment`,
        );
      }
      return row.code;
    },
  };
}

/** An environment's links to stored bundles go with it (the bundles themselves are shared by content hash) (src/db/environmentHoldings.ts). */
export const scriptEnvironmentHoldings = holdingsOfTables('script_bundle_environments');
