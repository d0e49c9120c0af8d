/**
 * docker-compose.yml, checked as far as a machine without a Docker engine allows (issue 19): it parses;
 * every image is pinned to an exact version; the service's command and environment are what the service
 * reads (src/settings.ts and the other environment reads of src/), and they parse as its settings do at
 * start; the addresses and credentials it names are those of the Postgres and Temporal services beside
 * it; and the Temporal dev server's command is accepted by the Temporal CLI of the same version.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { z } from 'zod';
import { loadEncryptor } from '../src/connections/encryption.js';
import { findTemporalCli, TEMPORAL_CLI_VERSION } from '../src/devstack/temporal.js';
import { loadSettings, settingsSchema } from '../src/settings.js';
import { EXACT_TAG, interpolate, REPO, tagOf, variablesTheServiceReads } from './helpers/hostingFiles.js';

const stringList = z.array(z.string());
const service = z.object({
  image: z.string(),
  command: z.union([z.string(), stringList]).optional(),
  working_dir: z.string().optional(),
  environment: z.record(z.string(), z.string()).optional(),
  ports: stringList.optional(),
  volumes: stringList.optional(),
  depends_on: z.record(z.string(), z.object({ condition: z.string() })).optional(),
  healthcheck: z.object({ test: stringList }).passthrough().optional(),
});
const composeSchema = z.object({
  services: z.object({ postgres: service, temporal: service, service }).strict(),
  volumes: z.record(z.string(), z.null()),
});

const compose = composeSchema.parse(parse(readFileSync(join(REPO, 'docker-compose.yml'), 'utf8')));
const { postgres, temporal, service: app } = compose.services;

describe('docker-compose.yml', () => {
  it('pins every image to an exact version', () => {
    for (const [name, { image }] of Object.entries(compose.services)) {
      expect([name, tagOf(image)]).toEqual([name, expect.stringMatching(EXACT_TAG)]);
    }
    // The Temporal image is the CLI release `npm start` runs (src/devstack/temporal.ts).
    expect(tagOf(temporal.image)).toBe(TEMPORAL_CLI_VERSION);
    // The Node image satisfies package.json's engines (>= 20.16).
    const engines = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { engines: { node: string } })
      .engines.node;
    const [wantMajor = 0, wantMinor = 0] = (/>=\s*(\d+)\.(\d+)/.exec(engines) ?? []).slice(1).map(Number);
    const [major = 0, minor = 0] = tagOf(app.image).split(/[.-]/).map(Number);
    expect(major > wantMajor || (major === wantMajor && minor >= wantMinor)).toBe(true);
  });

  it('gives the service only variables it reads, and they parse as its settings at start', () => {
    const environment = app.environment ?? {};
    const read = variablesTheServiceReads();
    expect(Object.keys(environment).filter((name) => !read.has(name))).toEqual([]);

    const vars = { SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
    const env = Object.fromEntries(
      Object.entries(environment).map(([name, value]) => [name, interpolate(value, vars)]),
    );
    const settings = loadSettings(env);
    // Both servers given: production mode, so the encryption key is required, and the compose file requires it.
    expect(settings.DATABASE_URL).toBeDefined();
    expect(settings.TEMPORAL_ADDRESS).toBeDefined();
    expect(() => interpolate(environment['SERVICE_ENCRYPTION_KEY'] ?? '', {})).toThrow(
      /compose needs SERVICE_ENCRYPTION_KEY/,
    );
    expect(() => loadEncryptor({ env })).not.toThrow();
    // Reachable through the port mapping.
    expect(settings.HOST).toBe('0.0.0.0');
    expect(app.ports?.map((port) => port.split(':').at(-1))).toEqual([String(settings.PORT)]);
  });

  it('points the service at the Postgres and Temporal services beside it, with their credentials', () => {
    const vars = { SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64') };
    const env = Object.fromEntries(
      Object.entries(app.environment ?? {}).map(([name, value]) => [name, interpolate(value, vars)]),
    );
    const settings = loadSettings(env);
    const database = new URL(settings.DATABASE_URL ?? '');
    const pg = postgres.environment ?? {};
    expect([database.hostname, database.port || '5432']).toEqual(['postgres', '5432']);
    expect([database.username, database.password, database.pathname.slice(1)]).toEqual([
      pg['POSTGRES_USER'],
      pg['POSTGRES_PASSWORD'],
      pg['POSTGRES_DB'],
    ]);
    expect(postgres.healthcheck?.test.join(' ')).toContain(`-U ${pg['POSTGRES_USER']} -d ${pg['POSTGRES_DB']}`);
    expect(app.depends_on?.['postgres']?.condition).toBe('service_healthy');

    const command = typeof temporal.command === 'string' ? temporal.command.split(' ') : (temporal.command ?? []);
    const flag = (name: string): string | undefined =>
      command.find((part) => part.startsWith(`--${name}=`))?.slice(name.length + 3);
    const grpcPort = flag('port') ?? '7233';
    expect(settings.TEMPORAL_ADDRESS).toBe(`temporal:${grpcPort}`);
    expect(flag('ip')).toBe('0.0.0.0');
    expect(['default', flag('namespace')]).toContain(settings.TEMPORAL_NAMESPACE);
    // The Web UI is the gRPC port + 1000 (start-dev's default).
    expect(temporal.ports?.map((port) => port.split(':').at(-1))).toEqual([grpcPort, String(Number(grpcPort) + 1000)]);
  });

  it('runs the service as `npm start` after `npm install` from the lock file, with its data folder on a volume', () => {
    const command = typeof app.command === 'string' ? app.command : (app.command ?? []).join(' ');
    expect(command).toMatch(/npm install\b.*--no-save.*&& exec npm start$/);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['start']).toBe('tsx src/main.ts');
    expect(existsSync(join(REPO, 'package-lock.json'))).toBe(true);
    const workdir = app.working_dir ?? '';
    expect(app.volumes).toContain(`.:${workdir}`);
    const dataDir = settingsSchema.shape.SERVICE_DATA_DIR.parse(undefined);
    expect(app.volumes?.some((volume) => volume.endsWith(`:${workdir}/${relative('.', dataDir)}`))).toBe(true);
    for (const volume of [...(app.volumes ?? []), ...(postgres.volumes ?? []), ...(temporal.volumes ?? [])]) {
      const [source = ''] = volume.split(':');
      if (!source.startsWith('.')) expect(Object.keys(compose.volumes)).toContain(source);
    }
  });

  it("starts a Temporal dev server whose command the Temporal CLI of the image's version accepts", async () => {
    const { path } = await findTemporalCli();
    if (path === undefined)
      throw new Error('no Temporal CLI on this machine (README: npm start builds one; .ci/run installs it)');
    const version = spawnSync(path, ['--version'], { encoding: 'utf8' }).stdout;
    expect(version).toMatch(/^temporal version (0\.0\.0-DEV|\d+\.\d+\.\d+)/);
    // The image's entrypoint is `temporal`: its command is the CLI's arguments. With --help the CLI
    // checks every flag (an unknown one is an error) and starts nothing.
    const args = typeof temporal.command === 'string' ? temporal.command.split(' ') : (temporal.command ?? []);
    const checked = spawnSync(path, [...args, '--help'], { encoding: 'utf8', timeout: 30_000 });
    expect(checked.stderr).not.toMatch(/unknown (flag|command)|invalid argument/i);
    expect(checked.status).toBe(0);
    expect(checked.stdout).toContain('temporal server start-dev');
  });
});
