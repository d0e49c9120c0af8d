/**
 * `service deploy` as a user runs it: a project made by `service init`, compiled and deployed to the
 * real service (API, worker, Temporal, Postgres) through the CLI's own code path.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCliCaptured, type CliOutcome } from '../helpers/cli.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';

let h: ApiHarness;
let root: string;

const cli = (
  args: string[],
  options: { interactive?: boolean; env?: Record<string, string> } = {},
): Promise<CliOutcome> =>
  runCliCaptured(args, {
    cwd: root,
    env: { SERVICE_URL: h.baseUrl, SERVICE_SECRET_KEY: h.envA.secretKey, ...options.env },
    interactive: options.interactive ?? false,
  });

beforeAll(async () => {
  h = await startApiHarness();
  root = mkdtempSync(join(tmpdir(), 'service-deploy-'));
  // The example project of `service init` declares a GitHub integration.
  await h.api.integrations.create({
    unique_key: 'github',
    provider: 'github',
    credentials: { type: 'OAUTH2', client_id: 'id', client_secret: 'secret' },
  });
  expect((await cli(['init'])).code).toBe(0);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('service deploy (the CLI)', () => {
  it('--dry-run compiles, shows every change and deploys nothing', async () => {
    const result = await cli(['deploy', '--dry-run']);
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/changes against nothing deployed yet \(would become version 1\)/);
    expect(result.out).toMatch(/\+ sync github\/issues/);
    expect(result.out).toMatch(/\+ action github\/create-issue/);
    expect(result.out).toMatch(/dry run: nothing was deployed/);
    expect((await h.api.call<{ deployments: unknown[] }>('GET', '/deployments')).deployments).toEqual([]);
  });

  it('deploys without a terminal when nothing is destructive, and says which version', async () => {
    const result = await cli(['deploy']);
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/deployed version 1\./);
    const again = await cli(['deploy']);
    expect(again.out).toMatch(/no changes against version 1/);
    expect(again.out).toMatch(/nothing to deploy/);
  });

  it('refuses a destructive deploy without a terminal unless --allow-destructive, changing nothing', async () => {
    const file = join(root, 'service-integrations/service.yaml');
    const yaml = readFileSync(file, 'utf8');
    // Remove the action: its trigger would fail from then on.
    writeFileSync(file, yaml.replace(/\n {4}actions:[\s\S]*?(?=\nmodels:)/, ''));
    rmSync(join(root, 'service-integrations/github/actions'), { recursive: true, force: true });
    const refused = await cli(['deploy']);
    expect(refused.code).toBe(1);
    expect(refused.out).toMatch(/- action github\/create-issue: any request that triggers it fails/);
    expect(refused.err).toMatch(/no terminal to confirm it; pass --allow-destructive/);
    expect((await h.api.call<{ deployments: unknown[] }>('GET', '/deployments')).deployments).toHaveLength(1);

    const allowed = await cli(['deploy', '--allow-destructive']);
    expect(allowed.code).toBe(0);
    expect(allowed.out).toMatch(/deployed version 2\./);
  });

  it('re-deploys an earlier version', async () => {
    const result = await cli(['deploy', '--redeploy', '1', '--yes']);
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/\+ action github\/create-issue/);
    expect(result.out).toMatch(/deployed version 3\./);
  });

  it('says what to set when there is no key, and when the service cannot be reached', async () => {
    const noKey = await cli(['deploy', '--env', 'prod'], { env: { SERVICE_SECRET_KEY: '' } });
    expect(noKey.code).toBe(1);
    expect(noKey.err).toMatch(/set SERVICE_SECRET_KEY_PROD/);
    const down = await cli(['deploy', '--dry-run'], { env: { SERVICE_URL: 'http://127.0.0.1:9' } });
    expect(down.code).toBe(1);
    expect(down.err).toMatch(/cannot reach the service at http:\/\/127\.0\.0\.1:9/);
  });
});
