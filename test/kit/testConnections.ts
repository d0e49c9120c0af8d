/**
 * A connection service and environment variables for runtime tests that do not need the real
 * connections area (no OAuth, no encryption): plain data, no vitest imports, so the worker child
 * process of the crash test can use it too.
 */
import { createHash } from 'node:crypto';
import { Encryptor } from '../../src/connections/encryption.js';
import { createConnections } from '../../src/connections/index.js';
import { loadProviderCatalog } from '../../src/connections/providers/catalog.js';
import type { ConnectionScope, ConnectionService, EnvironmentVariableStore } from '../../src/connections/types.js';
import { ServiceError } from '../../src/errors.js';
import type { Client } from '@temporalio/client';
import type { ActionResolver } from '../../activities/index.js';
import type { Pool } from '../../src/db/pool.js';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import type { ActionDefinition } from '../../src/runtime/definitions.js';
import { createPostgresLogStore } from '../../src/runtime/logStore.js';
import type { ConnectionRecord, EnvironmentVariable, Pagination } from '../../src/runtime/public.js';
import type { IntegrationDescription } from '../../src/runtime/svcTypes.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';

export const ENVIRONMENT = 'test';
export const INTEGRATION = 'fake-api';

/**
 * A connection service with one API-key connection per id, the key
 * sent as a bearer token, the base URL from `baseUrlOverride` or the integration's catalog entry.
 */
export class TestConnections implements ConnectionService {
  readonly metadata = new Map<string, Record<string, unknown>>();
  /** The default pagination of the integration's provider (svc.paginate's defaults), per test. */
  pagination: Pagination | undefined;
  constructor(
    private readonly catalog: { baseUrl?: string | undefined } = {},
    private readonly apiKey = 'secret-key',
  ) {}
  setBaseUrl(baseUrl: string): void {
    this.catalog.baseUrl = baseUrl;
  }
  getConnection(scope: ConnectionScope): Promise<ConnectionRecord> {
    return Promise.resolve({
      id: 1,
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
      provider_config_key: scope.integrationId,
      connection_id: scope.connectionId,
      credentials: { type: 'API_KEY', apiKey: this.apiKey },
      connection_config: {},
      account_id: 1,
      metadata: this.metadata.get(scope.connectionId) ?? {},
    });
  }
  authorizeRequest(
    _scope: ConnectionScope,
    request: {
      method: string;
      endpoint: string;
      baseUrlOverride?: string | undefined;
      headers: Record<string, string>;
      params: Record<string, string | number>;
    },
  ) {
    const base = request.baseUrlOverride ?? this.catalog.baseUrl;
    if (!/^https?:\/\//.test(request.endpoint) && !base) {
      return Promise.reject(
        new ServiceError(
          'missing_base_url',
          `integration ${INTEGRATION} has no base URL in the catalog; pass baseUrlOverride`,
        ),
      );
    }
    const url = new URL(
      /^https?:\/\//.test(request.endpoint)
        ? request.endpoint
        : `${base!.replace(/\/$/, '')}/${request.endpoint.replace(/^\//, '')}`,
    );
    for (const [key, value] of Object.entries(request.params)) url.searchParams.set(key, String(value));
    return Promise.resolve({
      method: request.method,
      url: url.toString(),
      headers: { ...request.headers, authorization: `Bearer ${this.apiKey}` },
    });
  }
  getMetadata(scope: ConnectionScope) {
    return Promise.resolve(this.metadata.get(scope.connectionId) ?? {});
  }
  setMetadata(scope: ConnectionScope, metadata: Record<string, unknown>) {
    this.metadata.set(scope.connectionId, { ...metadata });
    return Promise.resolve();
  }
  describeIntegration(scope: Omit<ConnectionScope, 'connectionId'>): Promise<IntegrationDescription> {
    return Promise.resolve({
      integration: {
        unique_key: scope.integrationId,
        provider: 'fake-api',
        display_name: 'Fake API',
        created_at: '2026-01-01T00:00:00.000Z',
        updated_at: '2026-01-01T00:00:00.000Z',
        webhook_url: `http://127.0.0.1:3003/webhook/${scope.environmentId}/${scope.integrationId}`,
      },
      ...(this.pagination ? { pagination: this.pagination } : {}),
    });
  }
  updateMetadata(scope: ConnectionScope, metadata: Record<string, unknown>) {
    this.metadata.set(scope.connectionId, { ...(this.metadata.get(scope.connectionId) ?? {}), ...metadata });
    return Promise.resolve();
  }
}

export class TestEnvironmentVariables implements EnvironmentVariableStore {
  constructor(readonly variables: EnvironmentVariable[] = []) {}
  list(): Promise<EnvironmentVariable[]> {
    return Promise.resolve(this.variables);
  }
}

/** The runtime's dependencies over one test database. */
export function runtimeDeps(
  pool: Pool,
  connections: ConnectionService,
  actions: Map<string, ActionDefinition>,
  temporal: Client,
) {
  const resolveAction: ActionResolver = ({ actionName }) => Promise.resolve(actions.get(actionName) ?? null);
  return {
    records: createPostgresRecordStore({ db: pool }),
    connections,
    environmentVariables: new TestEnvironmentVariables([{ name: 'REGION', value: 'eu' }]),
    scripts: createPostgresScriptStore({ db: pool }),
    logs: createPostgresLogStore({ db: pool }),
    resolveAction,
    temporal,
    encryptor: testEncryptor(),
  };
}

/**
 * One key for every worker process of a test, as a deployment shares SERVICE_ENCRYPTION_KEY: a worker
 * that takes a run over reads what the dead one wrote to the step ledger.
 */
export function testEncryptor(): Encryptor {
  return new Encryptor([createHash('sha256').update('integration-service test key').digest()]);
}

/** The catalog entry of the fake API (INTEGRATION): an API key sent as a bearer token, `baseUrl` its base URL. */
export function fakeApiCatalog(baseUrl: string) {
  return loadProviderCatalog({
    extra: {
      [INTEGRATION]: {
        display_name: 'Fake API',
        auth_mode: 'API_KEY',
        api_key: { in: 'header', name: 'Authorization', format: 'Bearer ${apiKey}' },
        base_url: baseUrl,
      },
    },
  });
}

/**
 * The real connection service on `db` (as a worker process with WORKER_CONNECTIONS=postgres reads it):
 * an environment ENVIRONMENT, the fake API's integration, and one connection with an API key.
 */
export async function importFakeApiConnection(
  db: Pool,
  apiUrl: string,
  connection: { environmentName: string; connectionId: string; apiKey: string },
): Promise<void> {
  const { service, environments, integrations } = createConnections({
    db,
    encryptor: testEncryptor(),
    callbackUrl: 'http://127.0.0.1/oauth/callback',
    catalog: fakeApiCatalog(apiUrl),
  });
  await environments.create({ name: connection.environmentName, id: ENVIRONMENT });
  await integrations.upsert(ENVIRONMENT, { id: INTEGRATION, provider: INTEGRATION });
  await service.importConnection({
    environmentId: ENVIRONMENT,
    integrationId: INTEGRATION,
    connectionId: connection.connectionId,
    credentials: { type: 'API_KEY', apiKey: connection.apiKey },
  });
}
