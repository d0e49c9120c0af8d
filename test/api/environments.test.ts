/**
 * Managing environments on the real stack (docs/api.md "Environments"): the service admin key creates,
 * lists, renames and deletes environments and rotates their keys, through the API and the CLI; no
 * environment's secret key reaches those routes, and the admin key reaches no environment's data.
 */
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it } from 'vitest';
import { createApi } from '../../src/api/index.js';
import { runCliCaptured, type CliOutcome } from '../helpers/cli.js';
import { createClient } from '../../src/client/index.js';
import { deployRequest, INTEGRATION, PROVIDER } from '../kit/fixtures.js';
import { apiFailure, connectionOf, deployWithConnection, startApiHarness, type ApiHarness } from '../kit/api.js';
import { environmentRows } from '../helpers/environmentRows.js';
import { deferCleanup } from '../kit/cleanup.js';

let h: ApiHarness;

const failure = apiFailure;

const cli = (args: string[], env: Record<string, string | undefined>): Promise<CliOutcome> =>
  runCliCaptured(args, { cwd: process.cwd(), env: { SERVICE_URL: h.baseUrl, ...env } });

const rowsOf = (environmentId: string) => environmentRows(h.pool, environmentId);

beforeAll(async () => {
  h = await startApiHarness();
  await deployWithConnection(h, 'key-a');
});

describe('environments through the API', () => {
  it('creates, lists, renames and rotates with the admin key; the new key works and the old one stops', async () => {
    const created = await h.admin.environments.create('staging');
    expect(created.environment.name).toBe('staging');
    expect(created.secret_key).toMatch(/^sk_/);
    const staging = createClient({ baseUrl: h.baseUrl, secretKey: created.secret_key });
    expect(await staging.environmentVariables.list()).toEqual([]);

    const names = (await h.admin.environments.list()).environments.map((e) => e.name);
    expect(names).toEqual(['env-a', 'env-b', 'staging']);
    // The list carries no secret key, nor its hash.
    expect(JSON.stringify(await h.admin.environments.list())).not.toContain(created.secret_key);
    expect(JSON.stringify(await h.admin.environments.list())).not.toMatch(/sk_|secret/);

    expect(await failure(h.admin.environments.create('staging'))).toEqual({ status: 409, code: 'environment_exists' });
    expect(await failure(h.admin.environments.create('Bad Name'))).toEqual({
      status: 400,
      code: 'invalid_environment_name',
    });

    const renamed = await h.admin.environments.rename(created.environment.id, 'preprod');
    expect(renamed.environment).toMatchObject({ id: created.environment.id, name: 'preprod' });
    expect(renamed.warnings.join(' ')).toContain('/webhook/preprod/');
    expect(await failure(h.admin.environments.rename(created.environment.id, 'env-a'))).toEqual({
      status: 409,
      code: 'environment_exists',
    });
    // The key survives a rename.
    await staging.environmentVariables.set({ variables: [{ name: 'A', value: '1' }] });

    const rotated = await h.admin.environments.rotateKey(created.environment.id);
    expect(rotated.secret_key).not.toBe(created.secret_key);
    expect(await failure(staging.environmentVariables.list())).toEqual({ status: 401, code: 'invalid_secret_key' });
    const fresh = createClient({ baseUrl: h.baseUrl, secretKey: rotated.secret_key });
    expect(await fresh.environmentVariables.list()).toEqual([{ name: 'A', value: '1' }]);

    expect(await failure(h.admin.environments.rotateKey('no-such-env'))).toEqual({
      status: 404,
      code: 'unknown_environment',
    });
  });

  it('refuses every environment route to an environment’s own key, and the admin key reaches no environment’s data', async () => {
    const before = await h.admin.environments.list();
    const target = before.environments.find((e) => e.name === 'env-b')!;
    for (const client of [h.api, h.apiB]) {
      const calls = [
        () => client.environments.list(),
        () => client.environments.create('sneaky'),
        () => client.environments.rename(target.id, 'renamed-by-a'),
        () => client.environments.delete(target.id),
        () => client.environments.rotateKey(target.id),
      ];
      for (const call of calls) expect(await failure(call())).toEqual({ status: 403, code: 'admin_key_required' });
    }
    // Nothing changed: same environments, B's key still works, nothing named 'sneaky'.
    expect(await h.admin.environments.list()).toEqual(before);
    expect(await h.apiB.environmentVariables.list()).toEqual([]);
    // A forged or absent key gets 401.
    const forged = createClient({ baseUrl: h.baseUrl, secretKey: `${h.adminKey}x` });
    expect(await failure(forged.environments.list())).toEqual({ status: 401, code: 'invalid_admin_key' });
    expect(await failure(h.anonymous.environments.list())).toEqual({ status: 401, code: 'missing_authorization' });

    // The admin key is no environment's key: data routes and the dashboard's refuse it.
    expect(await failure(h.admin.connections.list())).toEqual({ status: 401, code: 'invalid_secret_key' });
    expect(await failure(h.admin.records.list({ ...connectionOf('c1'), model: 'Issue' }))).toEqual({
      status: 401,
      code: 'invalid_secret_key',
    });
    expect(await failure(h.admin.environmentVariables.list())).toEqual({ status: 401, code: 'invalid_secret_key' });
    expect(await failure(h.admin.integrations.list())).toEqual({ status: 401, code: 'invalid_secret_key' });
    const dashboard = await h.admin.raw('GET', '/dashboard/environment');
    expect(dashboard.status).toBe(401);
  });

  it('is off without SERVICE_ADMIN_KEY', async () => {
    const app = createApi({ ...h.deps, adminKey: undefined });
    const server = app.listen(0, '127.0.0.1');
    await new Promise((resolve) => server.once('listening', resolve));
    deferCleanup(() => new Promise((resolve) => server.close(resolve)));
    const baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const key of [h.adminKey, h.envA.secretKey]) {
      const client = createClient({ baseUrl, secretKey: key });
      expect(await failure(client.environments.list())).toEqual({ status: 403, code: 'admin_key_not_configured' });
    }
  });

  it('refuses to delete an environment with connections, then deletes it with everything it holds', async () => {
    const { environment, secret_key } = await h.admin.environments.create('doomed');
    const doomed = createClient({ baseUrl: h.baseUrl, secretKey: secret_key });
    await doomed.integrations.create({
      unique_key: INTEGRATION,
      provider: PROVIDER,
    });
    await h.deploy(environment.id, deployRequest());
    await doomed.environmentVariables.set({ variables: [{ name: 'TOKEN', value: 'variable-secret-value' }] });
    await doomed.webhooks.setSettings({ url: 'https://example.com/hooks' });
    await doomed.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 'd1',
      credentials: { type: 'API_KEY', apiKey: 'doomed-api-key' },
    });

    expect(await failure(h.admin.environments.delete(environment.id))).toEqual({
      status: 409,
      code: 'environment_not_empty',
    });
    // Refused means untouched.
    expect((await doomed.connections.list()).connections.map((c) => c.connection_id)).toEqual(['d1']);
    expect(await doomed.environmentVariables.list()).toEqual([{ name: 'TOKEN', value: 'variable-secret-value' }]);

    await doomed.connections.delete(connectionOf('d1'));
    // A scope whose records are still being erased (the records module's holdings) holds the delete back.
    const scope = await h.pool.query<{ scope_id: string }>(
      `INSERT INTO record_scopes (environment_id, integration_id, connection_id, model) VALUES ($1, 'gone', 'gone', 'M')
       RETURNING scope_id`,
      [environment.id],
    );
    expect(await failure(h.admin.environments.delete(environment.id))).toEqual({
      status: 409,
      code: 'environment_not_empty',
    });
    await h.pool.query('DELETE FROM record_scopes WHERE scope_id = $1', [scope.rows[0]!.scope_id]);
    const deleted = await h.admin.environments.delete(environment.id);
    expect(deleted).toMatchObject({ deleted: true, environment: { id: environment.id, name: 'doomed' } });
    expect(await rowsOf(environment.id)).toEqual({});
    expect(await failure(doomed.environmentVariables.list())).toEqual({ status: 401, code: 'invalid_secret_key' });
    expect(await failure(h.admin.environments.delete(environment.id))).toEqual({
      status: 404,
      code: 'unknown_environment',
    });
    // The other environments and their data are untouched.
    expect((await h.api.connections.list()).connections.map((c) => c.connection_id)).toEqual(['c1']);
  });
});

describe('service environments (CLI)', () => {
  it('lists, creates, rotates, renames and deletes through the API with SERVICE_ADMIN_KEY', async () => {
    const admin = { SERVICE_ADMIN_KEY: h.adminKey };
    const created = await cli(['environments', 'create', 'cli-env', '--json'], admin);
    expect(created.err).toBe('');
    expect(created.code).toBe(0);
    const { environment, secret_key } = JSON.parse(created.out) as { environment: { id: string }; secret_key: string };
    expect(secret_key).toMatch(/^sk_/);

    const list = await cli(['environments', 'list'], admin);
    expect(list.code).toBe(0);
    expect(list.out).toMatch(/^NAME\s+ID\s+PUBLIC KEY\s+CREATED/);
    expect(list.out).toContain(`cli-env  ${environment.id}`);

    const rotated = await cli(['environments', 'rotate-key', 'cli-env'], admin);
    expect(rotated.code).toBe(0);
    const newKey = /new secret key of cli-env: (sk_\S+)/.exec(rotated.out)?.[1];
    expect(newKey).toBeDefined();
    expect(
      await failure(createClient({ baseUrl: h.baseUrl, secretKey: secret_key }).environmentVariables.list()),
    ).toEqual({
      status: 401,
      code: 'invalid_secret_key',
    });

    const renamed = await cli(['environments', 'rename', environment.id, 'cli-env-2'], admin);
    expect(renamed.code).toBe(0);
    expect(renamed.out).toContain('renamed environment cli-env to cli-env-2');

    const unconfirmed = await cli(['environments', 'delete', 'cli-env-2'], admin);
    expect(unconfirmed.code).toBe(2);
    expect(unconfirmed.err).toContain('--yes');
    const deleted = await cli(['environments', 'delete', 'cli-env-2', '--yes'], admin);
    expect(deleted).toMatchObject({ code: 0, err: '' });
    expect((await h.admin.environments.list()).environments.map((e) => e.name)).not.toContain('cli-env-2');

    // An environment's key is refused, with the reason; so is no key.
    const withEnvKey = await cli(['environments', 'list'], { SERVICE_ADMIN_KEY: h.envA.secretKey });
    expect(withEnvKey.code).toBe(1);
    expect(withEnvKey.err).toContain('admin_key_required');
    const without = await cli(['environments', 'list'], {});
    expect(without.code).toBe(2);
    expect(without.err).toContain('SERVICE_ADMIN_KEY');
    const unknown = await cli(['environments', 'rotate-key', 'nope'], admin);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toContain("no environment has the id or name 'nope'");
    const help = await cli(['environments', '--help'], {});
    expect(help.code).toBe(0);
    expect(help.out).toContain('Examples:');
  });
});
