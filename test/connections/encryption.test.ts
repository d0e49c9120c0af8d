/**
 * Encryption at rest and key rotation: AES-256-GCM round trips, tampering and misplaced ciphertexts
 * refused, keys from the environment, and the documented rotation procedure on a real database.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect } from 'vitest';
import { Encryptor, keyId, loadEncryptor } from '../../src/connections/encryption.js';
import { reencryptAll } from '../../src/connections/reencrypt.js';
import { test as it } from '../kit/index.js';
import { startHarness } from '../kit/connections.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();

describe('Encryptor', () => {
  const encryptor = new Encryptor([randomBytes(32)]);

  it('round-trips and never produces the same ciphertext twice', () => {
    const a = encryptor.encrypt('s3cret value ✓', 'environment_variable');
    const b = encryptor.encrypt('s3cret value ✓', 'environment_variable');
    expect(a).not.toBe(b);
    expect(a).not.toContain('s3cret');
    expect(a.split('.')).toHaveLength(5);
    expect(encryptor.decrypt(a, 'environment_variable')).toBe('s3cret value ✓');
  });

  it('refuses a tampered ciphertext, one made for another purpose, and one of an unknown key', () => {
    const sealed = encryptor.encrypt('value', 'connection_credentials');
    const parts = sealed.split('.');
    const data = Buffer.from(parts[4]!, 'base64url');
    data[0] = data[0]! ^ 1;
    const tampered = [...parts.slice(0, 4), data.toString('base64url')].join('.');
    expect(() => encryptor.decrypt(tampered, 'connection_credentials')).toThrow(/failed authentication/);
    expect(() => encryptor.decrypt(sealed, 'environment_variable')).toThrow(/failed authentication/);
    const other = new Encryptor([randomBytes(32)]);
    expect(() => other.decrypt(sealed, 'connection_credentials')).toThrow(/not among the configured keys/);
    expect(() => encryptor.decrypt('plain text', 'connection_credentials')).toThrow(/ciphertext format/);
  });

  it('refuses keys that are not 32 bytes', () => {
    expect(() => new Encryptor([randomBytes(16)])).toThrow(/exactly 32/);
    expect(() => loadEncryptor({ env: { SERVICE_ENCRYPTION_KEY: 'c2hvcnQ=' } })).toThrow(
      /SERVICE_ENCRYPTION_KEY must be/,
    );
    expect(() =>
      loadEncryptor({
        env: { SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64'), SERVICE_ENCRYPTION_KEYS: 'nope!' },
      }),
    ).toThrow(/SERVICE_ENCRYPTION_KEYS entry #1/);
  });

  it('needs a key from the environment, except in local mode where one is generated into the data dir', () => {
    expect(() => loadEncryptor({ env: {} })).toThrow(/SERVICE_ENCRYPTION_KEY is not set/);
    const key = randomBytes(32);
    expect(loadEncryptor({ env: { SERVICE_ENCRYPTION_KEY: key.toString('base64') } }).currentKeyId).toBe(keyId(key));

    const file = join(mkdtempSync(join(tmpdir(), 'keys-')), 'data', 'encryption.key');
    const first = loadEncryptor({ env: {}, generatedKeyFile: file });
    expect(existsSync(file)).toBe(true);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(Buffer.from(readFileSync(file, 'utf8').trim(), 'base64')).toHaveLength(32);
    const second = loadEncryptor({ env: {}, generatedKeyFile: file });
    expect(second.currentKeyId).toBe(first.currentKeyId);
  });
});

describe('rotating the encryption key', () => {
  it('re-encrypts every stored secret under the new key; the old key can then be dropped', async ({ db }) => {
    const { pool } = db;
    const oldKey = randomBytes(32);
    const newKey = randomBytes(32);
    const oldEnv = { SERVICE_ENCRYPTION_KEY: oldKey.toString('base64') };

    // Data written under the old key: a connection, an integration's client secret, a variable.
    const before = await startHarness({ db: pool, encryptor: loadEncryptor({ env: oldEnv }) });
    const environmentId = (await before.environments.create({ name: 'prod' })).environment.id;
    await before.integrations.upsert(environmentId, {
      id: 'gh',
      provider: 'github',
      oauth_client_id: 'id',
      oauth_client_secret: 'gh-client-secret-9876',
    });
    await before.variables.set(environmentId, { name: 'API_TOKEN', value: 'variable-secret-5432' });
    for (let i = 0; i < 5; i++) {
      await before.service.importConnection({
        environmentId,
        integrationId: 'gh',
        connectionId: `user-${i}`,
        credentials: { type: 'OAUTH2', access_token: `gho_rotation_${i}_abcdef` },
      });
    }
    logScan.secret('gh-client-secret-9876', 'variable-secret-5432', 'gho_rotation_0_abcdef');

    // Step 1: deploy with the new key current and the old one for decrypting.
    const rotating = loadEncryptor({
      env: { SERVICE_ENCRYPTION_KEY: newKey.toString('base64'), SERVICE_ENCRYPTION_KEYS: oldKey.toString('base64') },
    });
    const during = await startHarness({ db: pool, encryptor: rotating });
    const scope = { environmentId, integrationId: 'gh', connectionId: 'user-3' };
    expect((await during.service.getConnection(scope)).credentials).toMatchObject({
      access_token: 'gho_rotation_3_abcdef',
    });

    // Step 2: re-encrypt (small batches, to cross batch boundaries).
    const result = await reencryptAll(pool, rotating, { batchSize: 2 });
    expect(result.rewritten).toEqual({ connections: 5, integrations: 1, environment_variables: 1, oauth_sessions: 0 });
    expect(result.currentKeyId).toBe(keyId(newKey));
    expect((await reencryptAll(pool, rotating)).rewritten['connections']).toBe(0);
    const keyIds = await pool.query<{ id: string }>(
      `SELECT split_part(credentials_encrypted, '.', 2) AS id FROM connections
       UNION SELECT split_part(oauth_client_secret_encrypted, '.', 2) FROM integrations
       UNION SELECT split_part(value_encrypted, '.', 2) FROM environment_variables`,
    );
    expect(keyIds.rows).toEqual([{ id: keyId(newKey) }]);

    // Step 3: the new key alone reads everything; the old key alone reads nothing.
    const after = await startHarness({ db: pool, encryptor: new Encryptor([newKey]) });
    expect((await after.service.getConnection(scope)).credentials).toMatchObject({
      access_token: 'gho_rotation_3_abcdef',
    });
    expect(await after.variables.list(environmentId)).toEqual([{ name: 'API_TOKEN', value: 'variable-secret-5432' }]);
    expect((await after.integrations.resolve(environmentId, 'gh')).clientSecret).toBe('gh-client-secret-9876');
    const stale = await startHarness({ db: pool, encryptor: new Encryptor([oldKey]) });
    await expect(stale.service.getConnection(scope)).rejects.toMatchObject({ code: 'decryption_failed' });
  });
});
