/**
 * `DATABASE_URL=… SERVICE_ENCRYPTION_KEY=<new> SERVICE_ENCRYPTION_KEYS=<old> npx tsx src/connections/rotateEncryptionKey.ts`
 *
 * Re-encrypts every stored secret with SERVICE_ENCRYPTION_KEY; see docs/connections.md "Rotating the
 * encryption key". Prints counts and key ids only, never a key or a secret.
 */
import { createPool } from '../db/pool.js';
import { isServiceError } from '../errors.js';
import { loadEncryptor } from './encryption.js';
import { reencryptAll } from './reencrypt.js';

async function main(): Promise<void> {
  // A command of its own (like the CLI): its input is its environment.
  const url = process.env['DATABASE_URL'];
  if (!url) throw new Error('DATABASE_URL is not set: point it at the service database');
  const encryptor = loadEncryptor({ env: process.env });
  const db = createPool({ url, max: 2, applicationName: 'rotate-encryption-key' });
  try {
    const result = await reencryptAll(db, encryptor);
    for (const [table, count] of Object.entries(result.rewritten)) console.log(`${table}: ${count} re-encrypted`);
    console.log(
      `every secret is now under key ${result.currentKeyId}; old keys may be removed from SERVICE_ENCRYPTION_KEYS`,
    );
  } finally {
    await db.end();
  }
}

main().catch((error: unknown) => {
  console.error(`error: ${isServiceError(error) || error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
});
