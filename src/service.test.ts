/**
 * What createService refuses before it connects to anything: a service without a Temporal server or a
 * database fails with `invalid_settings` naming the variable (test/kit/api.ts and
 * test/start.test.ts run the whole service through it on the real stack).
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Encryptor } from './connections/encryption.js';
import { createPool } from './db/pool.js';
import { createService } from './service.js';
import { loadSettings } from './settings.js';

describe('createService', () => {
  it('refuses settings without TEMPORAL_ADDRESS, naming it', async () => {
    await expect(createService(loadSettings({ DATABASE_URL: 'postgres://127.0.0.1:1/x' }))).rejects.toMatchObject({
      code: 'invalid_settings',
      message: expect.stringContaining('TEMPORAL_ADDRESS'),
    });
  });

  it('refuses settings without DATABASE_URL unless a pool is given, naming it', async () => {
    await expect(createService(loadSettings({ TEMPORAL_ADDRESS: '127.0.0.1:1' }))).rejects.toMatchObject({
      code: 'invalid_settings',
      message: expect.stringContaining('DATABASE_URL'),
    });
  });

  it('fails naming Temporal when it is unreachable, and leaves a pool it was given open', async () => {
    // Nothing listens on port 1 of loopback: the connection is refused at once.
    const pool = createPool({ url: 'postgres://127.0.0.1:1/none' });
    await expect(
      createService(loadSettings({ TEMPORAL_ADDRESS: '127.0.0.1:1' }), {
        db: pool,
        encryptor: new Encryptor([randomBytes(32)]),
        connectTimeoutMs: 2000,
      }),
    ).rejects.toMatchObject({ code: 'temporal_unreachable', message: expect.stringContaining('127.0.0.1:1') });
    expect(pool.ended).toBe(false);
    await pool.end();
  });
});
