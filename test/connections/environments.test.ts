/** Environments with their keys, and environment variables encrypted at rest. */
import { describe, expect } from 'vitest';
import { connectionsTest } from '../kit/index.js';
import { useLogScan } from './helpers/logScan.js';

const logScan = useLogScan();

/** The connections area over the file's database; `variableEnvs`: two environments for the variables. */
const it = connectionsTest.extend<{ variableEnvs: { envA: string; envB: string } }>({
  variableEnvs: [
    async ({ connections }, use) =>
      use({
        envA: (await connections.environments.create({ name: 'a' })).environment.id,
        envB: (await connections.environments.create({ name: 'b' })).environment.id,
      }),
    { scope: 'file' },
  ],
});

describe('environments and their keys', () => {
  it('shows the secret key once, stores only its hash, and finds the environment by it', async ({
    connections: h,
    db,
  }) => {
    const { environment, secretKey } = await h.environments.create({ name: 'production' });
    logScan.secret(secretKey);
    expect(secretKey).toMatch(/^sk_[A-Za-z0-9_-]{43}$/);
    expect(environment.publicKey).toMatch(/^pk_/);
    const stored = await db.pool.query<{ row: string }>('SELECT row_to_json(e)::text AS row FROM environments e');
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

  it('refuses a duplicate or malformed name', async ({ connections: h }) => {
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
  it('sets, lists (decrypted, by name), replaces and deletes; values are encrypted at rest', async ({
    connections: h,
    db,
    variableEnvs: { envA, envB },
  }) => {
    logScan.secret('variable-value-abcdef', 'replaced-value-123456');
    await h.variables.set(envA, { name: 'WEBHOOK_SECRET', value: 'variable-value-abcdef' });
    await h.variables.set(envA, { name: 'API_URL', value: 'https://x.example' });
    await h.variables.set(envB, { name: 'ONLY_B', value: 'b' });
    expect(await h.variables.list(envA)).toEqual([
      { name: 'API_URL', value: 'https://x.example' },
      { name: 'WEBHOOK_SECRET', value: 'variable-value-abcdef' },
    ]);
    const stored = await db.pool.query<{ row: string }>(
      'SELECT row_to_json(v)::text AS row FROM environment_variables v',
    );
    expect(stored.rows.map((r) => r.row).join()).not.toContain('variable-value-abcdef');

    await h.variables.set(envA, { name: 'WEBHOOK_SECRET', value: 'replaced-value-123456' });
    expect((await h.variables.list(envA)).find((v) => v.name === 'WEBHOOK_SECRET')?.value).toBe(
      'replaced-value-123456',
    );
    expect(await h.variables.delete(envA, 'API_URL')).toBe(true);
    expect(await h.variables.delete(envA, 'API_URL')).toBe(false);
    expect(await h.variables.list(envB)).toEqual([{ name: 'ONLY_B', value: 'b' }]);
  });

  it('refuses bad names, oversized values and unknown environments without touching what is stored', async ({
    connections: h,
    variableEnvs: { envA, envB },
  }) => {
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
