/**
 * The whole API over the real stack for one test file: its own database and task queue, the real
 * connections, records, logs, deployments and sync control, a worker with the real runtime
 * activities, the API on 127.0.0.1, a fake external API on 127.0.0.1, and two environments with
 * their own keys.
 */
import { randomBytes } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';

import type { Client } from '@temporalio/client';
import type { ApiDeps } from '../../src/api/index.js';
import type { DeployRequest } from '../../src/deploy/deployments.js';
import { createClient, ServiceApiError, type ConnectionRef, type ServiceClient } from '../../src/client/index.js';
import { Encryptor } from '../../src/connections/encryption.js';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import type { Pool } from '../../src/db/pool.js';
import { createService, type Service, type ServiceOverrides } from '../../src/service.js';
import { loadSettings } from '../../src/settings.js';
import { stack, uniqueName } from './stack.js';
import { createDatabase, type TestDatabase } from './db.js';
import { listenOnLoopback } from './loopback.js';
import { deployRequest, INTEGRATION, PROVIDER } from './fixtures.js';
import { deferCleanup, givenOrStarted, startOwned } from './cleanup.js';
import { rejection } from '../helpers/rejection.js';
import { apiKeyProvider, createFakeUpstream, type FakeUpstream } from './upstream.js';

export interface ApiHarness {
  pool: Pool;
  /** The connection string of the file's database (a second pool: another "process"). */
  dbUrl: string;
  baseUrl: string;
  fake: FakeUpstream;
  deps: ApiDeps;
  /** Environment A's client, environment B's client, and one without a key. */
  api: ServiceClient;
  apiB: ServiceClient;
  anonymous: ServiceClient;
  envA: { id: string; name: string; secretKey: string };
  envB: { id: string; name: string; secretKey: string };
  deploy(environmentId: string, request: DeployRequest, allowDestructive?: boolean): Promise<void>;
  logs: string[];
  /** The service admin key the API was given (SERVICE_ADMIN_KEY), and a client with it. */
  adminKey: string;
  admin: ServiceClient;
  /** The service, for tests that reach below the API (its parts: the connection service, say). */
  service: Service;
  /** The worker's task queue, and a Temporal client with the service's data converter. */
  taskQueue: string;
  temporal: Client;
}

export interface ApiHarnessOptions {
  /** The file's database (test/kit's `db`); one of its own, dropped at stop, when omitted. */
  database?: TestDatabase;
  /** The fake external API the fixture integration's provider points at; one of its own when omitted. */
  upstream?: FakeUpstream;
  rateLimit?: ApiDeps['rateLimit'];
  bodyLimit?: string;
  proxy?: ApiDeps['proxy'];
  /** More catalog entries (an OAuth provider, say), beside the fake API's. */
  providers?: Record<string, unknown>;
  /** The MCP sessions of the API (POST /mcp), for tests of their bounds. */
  mcpSessions?: ApiDeps['mcpSessions'];
  /** Passed to createService. */
  overrides?: ServiceOverrides;
  /** More environment variables for the service's settings (src/settings.ts). */
  settings?: Record<string, string>;
}

/** The API harness (createApiHarness), stopped when the test file ends. */
export async function startApiHarness(options: ApiHarnessOptions = {}): Promise<ApiHarness> {
  const harness = await createApiHarness(options);
  deferCleanup(harness.stop);
  return harness;
}

/**
 * The whole API over the real stack; `stop` closes the server, stops the service and closes or drops
 * what the harness started itself (not a database or fake API it was given).
 */
export const createApiHarness = (
  options: ApiHarnessOptions = {},
): Promise<ApiHarness & { stop: () => Promise<void> }> => startOwned((owned) => composeApiHarness(options, owned));

async function composeApiHarness(options: ApiHarnessOptions, owned: Array<() => Promise<void>>): Promise<ApiHarness> {
  const { pool, url: dbUrl } = await givenOrStarted(options.database, createDatabase, (db) => db.drop(), owned);
  const fake = await givenOrStarted(
    options.upstream,
    () => createFakeUpstream(),
    (fake) => fake.close(),
    owned,
  );
  // Listening before the service is composed, so that connect links and the OAuth callback point here.
  const server = createHttpServer();
  const { url: baseUrl, close: closeServer } = await listenOnLoopback(server);
  owned.push(closeServer);
  const { temporalAddress, temporalNamespace, workflowBundlePath } = stack();
  const taskQueue = uniqueName('tq');
  const logs: string[] = [];
  const adminKey = `admin_${randomBytes(24).toString('base64url')}`;
  const settings = loadSettings({
    DATABASE_URL: dbUrl,
    TEMPORAL_ADDRESS: temporalAddress,
    TEMPORAL_NAMESPACE: temporalNamespace,
    TEMPORAL_TASK_QUEUE: taskQueue,
    SERVICE_PUBLIC_URL: baseUrl,
    SERVICE_ADMIN_KEY: adminKey,
    // The test run's folder of thread marks (test/globalSetup.ts).
    SERVICE_THREAD_MARKS_DIR: process.env['SERVICE_THREAD_MARKS_DIR'],
    ...options.settings,
  });
  const service = await createService(settings, {
    db: pool,
    encryptor: new Encryptor([randomBytes(32)]),
    catalog: loadProviderCatalog({
      extra: {
        [PROVIDER]: apiKeyProvider(fake.url),
        ...options.providers,
      },
    }),
    log: () => undefined,
    server,
    workflowBundle: { codePath: workflowBundlePath },
    // The tests that need them start the token refresher and the maintenance themselves.
    backgroundJobs: false,
    connectTimeoutMs: 3000,
    apiDeps: {
      proxy: { retryInitialMs: 20, retryMaximumMs: 200, timeoutMs: 5000, ...options.proxy },
      ...(options.rateLimit ? { rateLimit: options.rateLimit } : {}),
      ...(options.bodyLimit ? { bodyLimit: options.bodyLimit } : {}),
      ...(options.mcpSessions ? { mcpSessions: options.mcpSessions } : {}),
      logger: {
        info: (message, fields) => logs.push(JSON.stringify({ message, ...fields })),
        error: (message, fields) => logs.push(JSON.stringify({ message, ...fields })),
      },
    },
    ...options.overrides,
  });
  const { connections, deployments } = service.parts;
  // The server closes before the service stops (as before), then the database and fake API go.
  owned.splice(owned.indexOf(closeServer), 1);
  owned.push(() => service.stop(), closeServer);
  await service.start();

  const a = await connections.environments.create({ name: 'env-a' });
  const b = await connections.environments.create({ name: 'env-b' });
  const envA = { id: a.environment.id, name: a.environment.name, secretKey: a.secretKey };
  const envB = { id: b.environment.id, name: b.environment.name, secretKey: b.secretKey };
  return {
    pool,
    dbUrl,
    baseUrl,
    fake,
    deps: service.api,
    api: createClient({ baseUrl, secretKey: envA.secretKey }),
    apiB: createClient({ baseUrl, secretKey: envB.secretKey }),
    anonymous: createClient({ baseUrl }),
    envA,
    envB,
    async deploy(environmentId, request, allowDestructive = false) {
      await deployments.apply(environmentId, request, { allowDestructive });
    },
    logs,
    adminKey,
    admin: createClient({ baseUrl, secretKey: adminKey }),
    service,
    taskQueue,
    temporal: service.temporal,
  };
}

export const connectionOf = (connectionId: string): ConnectionRef => ({ connectionId, providerConfigKey: INTEGRATION });

/** A script of the fixture integration (test/kit/fixtures.ts INTEGRATION), for deployScripts. */
export type FixtureScript = Omit<DeployRequest['scripts'][number], 'integration'>;

/** What a test deploys: its service.yaml and the scripts of the fixture integration; the fixture deployment's when omitted. */
export interface FixtureDeployment {
  yaml?: string;
  scripts?: FixtureScript[];
}

/** Environment A has the fixture integration and `deployment` deployed (the fixture deployment by default). */
export async function deployScripts(h: ApiHarness, deployment: FixtureDeployment = {}): Promise<void> {
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.deploy(
    h.envA.id,
    deployRequest({
      ...(deployment.yaml !== undefined ? { yaml: deployment.yaml } : {}),
      ...(deployment.scripts
        ? { scripts: deployment.scripts.map((script) => ({ integration: INTEGRATION, ...script })) }
        : {}),
    }),
  );
}

/**
 * The usual starting point of a test: environment A has the fixture integration, `deployment` (the
 * fixture deployment, test/kit/fixtures.ts, by default) and one connection with an API key. Gives the
 * headers that name the connection (`connection-id`, `provider-config-key`).
 */
export async function deployWithConnection(
  h: ApiHarness,
  apiKey: string,
  connectionId = 'c1',
  deployment: FixtureDeployment = {},
): Promise<{ 'connection-id': string; 'provider-config-key': string }> {
  await deployScripts(h, deployment);
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: connectionId,
    credentials: { type: 'API_KEY', apiKey },
  });
  return { 'connection-id': connectionId, 'provider-config-key': INTEGRATION };
}

/** The API error a call fails with (status, code, message, per-field errors); fails the test when the call succeeds. */
export const apiError = (
  call: Promise<unknown>,
): Promise<{ status: number; code: string; message: string; errors: unknown }> =>
  rejection(call, (error) =>
    error instanceof ServiceApiError
      ? { status: error.status, code: error.code, message: error.message, errors: error.errors }
      : undefined,
  );

/** The status and code of the API error a call fails with (apiError). */
export async function apiFailure(call: Promise<unknown>): Promise<{ status: number; code: string }> {
  const { status, code } = await apiError(call);
  return { status, code };
}

/** A catalog entry `fake-oauth` (OAuth 2) whose endpoints are under `origin`: for startApiHarness's providers. */
export function fakeOAuthProvider(origin: string): Record<string, unknown> {
  return {
    'fake-oauth': {
      display_name: 'Fake OAuth 2',
      auth_mode: 'OAUTH2',
      authorization_url: `${origin}/authorize`,
      token_url: `${origin}/token`,
      base_url: `${origin}/api`,
    },
  };
}
