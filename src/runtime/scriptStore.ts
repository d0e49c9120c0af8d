import { createHash } from 'node:crypto';
import type { Pool } from '../db/pool.js';
import { ServiceError } from '../errors.js';

/** The deployed script bundles, addressed by content hash (table script_bundles). */
export interface ScriptStore {
  /** Stores a bundle (idempotent) and returns its hash. */
  put(code: string): Promise<string>;
  /** The bundle with this hash; throws `script_not_found` when there is none. */
  get(hash: string): Promise<string>;
}

/** SHA-256 of the bundle's code, hex: the key a deployment records and a run fetches by. */
export function scriptHash(code: string): string {
  return createHash('sha256').update(code, 'utf8').digest('hex');
}

export function createPostgresScriptStore({ db }: { db: Pool }): ScriptStore {
  return {
    async put(code) {
      const hash = scriptHash(code);
      await db.query(
        'INSERT INTO script_bundles (hash, code, size_bytes) VALUES ($1, $2, $3) ON CONFLICT (hash) DO NOTHING',
        [hash, code, Buffer.byteLength(code, 'utf8')],
      );
      return hash;
    },
    async get(hash) {
      const result = await db.query<{ code: string }>('SELECT code FROM script_bundles WHERE hash = $1', [hash]);
      const row = result.rows[0];
      if (!row) {
        throw new ServiceError('script_not_found', `no deployed script bundle has hash ${hash}`, { status: 404 });
      }
      return row.code;
    },
  };
}
