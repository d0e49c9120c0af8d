/** Environments with their keys, and environment variables encrypted at rest. */
import { beforeAll, describe, expect, it } from 'vitest';
import { useDatabase } from '../helpers/stack.js';
import type { Pool } from '../../src/db/pool.js';
import { startHarness, type Harness } from './helpers/harness.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();

describe('environments and their keys', () => {
  let h: Harness;
  let db: Pool;

  beforeAll(async () => {
    db = (await useDatabase()).pool;
    h = await startHarness({ db });
  });

  it('shows the secret key once, stores only its hash, and finds the environment by it', async () => {
    const { environment, secretKey } = await h.environments.create({ name: 'production' });
    logScan.secret(secretKey);
    expect(secretKey).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(environment.publicKey).toMatch(/^pk_/);
    const stored = await db.query<{ row: string }>('SELECT row_to_json(e)::text AS row FROM environments e');
    expect(stored.rows[0]!.row).not.toContain(secretKey);
    expect(stored.rows[0]!.row).not.toContain(secretKey.slice(3));

    expect((await h.environments.findBySecretKey(secretKey))?.id).toBe(environment.id);
    expect(await h.environments.findBySecretKey(`${secretKey}x`)).toBeUndefined();
    expect(await h.environments.findBySecretKey('')).toBeUndefined();
    expect(await h.environments.findBySecretKey(environment.publicKey)).toBeUndefined();
    expect((await h.environments.findByPublicKey(environment.publicKey))?.name).toBe('production');

    const rotated = await h.environments.rotateSecretKey(environment.id);
    logScan.secret(rotated);
    expect(await h.environments.findBySecretKey(secretKey)).toBeUndefined();
    expect((await h.environments.findBySecretKey(rotated))?.id).toBe(environment.id);
  });

  it('refuses a duplicate or malformed name', async () => {
    await h.environments.create({ name: 'staging' });
    await expect(h.environments.create({ name: 'staging' })).rejects.toMatchObject({
      code: 'environment_exists',
      status: 409,
    });
    await expect(h.environments.create({ name: 'Bad Name' })).rejects.toMatchObject({
      code: 'invalid_environment_name',
    });
    await expect(h.environments.get('nope')).rejects.toMatchObject({ code: 'unknown_environment', status: 404 });
    expect((await h.environments.list()).map((e) => e.name)).toEqual(['production', 'staging']);
  });
});

describe('environment variables', () => {
  let h: Harness;
  let db: Pool;
  let envA: string;
  let envB: string;

  beforeAll(async () => {
    db = (await useDatabase()).pool;
    h = await startHarness({ db });
    envA = (await h.environments.create({ name: 'a' })).environment.id;
    envB = (await h.environments.create({ name: 'b' })).environment.id;
  });

  it('sets, lists (decrypted, by name), replaces and deletes; values are encrypted at rest', async () => {
    logScan.secret('variable-value-abcdef', 'replaced-value-123456');
    await h.variables.set(envA, { name: 'WEBHOOK_SECRET', value: 'variable-value-abcdef' });
    await h.variables.set(envA, { name: 'API_URL', value: 'https://x.example' });
    await h.variables.set(envB, { name: 'ONLY_B', value: 'b' });
    expect(await h.variables.list(envA)).toEqual([
      { name: 'API_URL', value: 'https://x.example' },
      { name: 'WEBHOOK_SECRET', value: 'variable-value-abcdef' },
    ]);
    const stored = await db.query<{ row: string }>('SELECT row_to_json(v)::text AS row FROM environment_variables v');
    expect(stored.rows.map((r) => r.row).join()).not.toContain('variable-value-abcdef');

    await h.variables.set(envA, { name: 'WEBHOOK_SECRET', value: 'replaced-value-123456' });
    expect((await h.variables.list(envA)).find((v) => v.name === 'WEBHOOK_SECRET')?.value).toBe(
      'replaced-value-123456',
    );
    expect(await h.variables.delete(envA, 'API_URL')).toBe(true);
    expect(await h.variables.delete(envA, 'API_URL')).toBe(false);
    expect(await h.variables.list(envB)).toEqual([{ name: 'ONLY_B', value: 'b' }]);
  });

  it('refuses bad names, oversized values and unknown environments without touching what is stored', async () => {
    await expect(h.variables.set(envA, { name: '1BAD', value: 'x' })).rejects.toMatchObject({
      code: 'invalid_environment_variable',
    });
    await expect(h.variables.set(envA, { name: 'BIG', value: 'x'.repeat(70_000) })).rejects.toMatchObject({
      code: 'invalid_environment_variable',
    });
    await expect(h.variables.set('missing-env', { name: 'OK', value: 'x' })).rejects.toMatchObject({
      code: 'unknown_environment',
    });
    await expect(
      h.variables.replaceAll(envB, [
        { name: 'NEW', value: '1' },
        { name: 'bad name', value: '2' },
      ]),
    ).rejects.toMatchObject({ code: 'invalid_environment_variable' });
    expect(await h.variables.list(envB)).toEqual([{ name: 'ONLY_B', value: 'b' }]);
    await h.variables.replaceAll(envB, [{ name: 'NEW', value: '1' }]);
    expect(await h.variables.list(envB)).toEqual([{ name: 'NEW', value: '1' }]);
  });
});
