/**
 * Key rotation, step 2 of docs/connections.md "Rotating the encryption key": re-encrypts every stored
 * secret that the current key did not make. Safe while the service runs (each row is locked while it
 * is rewritten, and a row already rewritten is skipped) and safe to run again after an interruption.
 */
import { inTransaction, type Pool } from '../db/pool.js';
import type { EncryptionPurpose, Encryptor } from './encryption.js';

interface EncryptedColumn {
  table: string;
  /** Columns that identify a row. */
  key: string[];
  column: string;
  purpose: EncryptionPurpose;
}

const ENCRYPTED_COLUMNS: readonly EncryptedColumn[] = [
  { table: 'connections', key: ['id'], column: 'credentials_encrypted', purpose: 'connection_credentials' },
  {
    table: 'integrations',
    key: ['environment_id', 'id'],
    column: 'oauth_client_secret_encrypted',
    purpose: 'integration_client_secret',
  },
  {
    table: 'environment_variables',
    key: ['environment_id', 'name'],
    column: 'value_encrypted',
    purpose: 'environment_variable',
  },
  { table: 'oauth_sessions', key: ['state_hash'], column: 'secret_encrypted', purpose: 'oauth_session_secret' },
];

export interface ReencryptResult {
  /** Rows rewritten with the current key, per table. */
  rewritten: Record<string, number>;
  currentKeyId: string;
}

export async function reencryptAll(
  db: Pool,
  encryptor: Encryptor,
  options: { batchSize?: number } = {},
): Promise<ReencryptResult> {
  const batchSize = options.batchSize ?? 200;
  const current = encryptor.currentKeyId;
  const rewritten: Record<string, number> = {};
  for (const { table, key, column, purpose } of ENCRYPTED_COLUMNS) {
    rewritten[table] = 0;
    const keyList = key.join(', ');
    for (;;) {
      // The key id is the second dot-separated field of the ciphertext: select only rows another key made.
      const count = await inTransaction(db, async (client) => {
        const { rows } = await client.query<Record<string, unknown>>(
          `SELECT ${keyList}, ${column} AS value FROM ${table}
           WHERE ${column} IS NOT NULL AND split_part(${column}, '.', 2) <> $1
           LIMIT $2 FOR UPDATE SKIP LOCKED`,
          [current, batchSize],
        );
        for (const row of rows) {
          const value = encryptor.encrypt(encryptor.decrypt(String(row['value']), purpose), purpose);
          const where = key.map((name, index) => `${name} = $${index + 2}`).join(' AND ');
          await client.query(`UPDATE ${table} SET ${column} = $1 WHERE ${where}`, [
            value,
            ...key.map((name) => row[name]),
          ]);
        }
        return rows.length;
      });
      rewritten[table] += count;
      if (count < batchSize) break;
    }
  }
  return { rewritten, currentKeyId: current };
}
