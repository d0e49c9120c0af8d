/**
 * `service dryrun <sync|action> <connection-id>`: runs a local (not deployed) script with a real
 * connection of an environment and prints its requests, logs and the records it would save, each
 * checked against its model. The connection is read through the API with the environment's secret key
 * (GET /connections/:id); each request gets the connection's credentials from
 * POST /connections/:id/authorize, exactly as a deployed run's request, and is sent from here. Nothing
 * is written to the records cache or the connection. `--save-responses <dir>` records every exchange
 * as a fixture for `service test`.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import { createClient, ServiceApiError, type ConnectionRecord, type ServiceClient } from '../client/index.js';
import type { ConnectionService, RequestToAuthorize } from '../connections/types.js';
import { REDACTED, redactValue, secretForms } from '../runtime/redaction.js';
import { RelayedError, ServiceError } from '../errors.js';
import { sendRequest } from '../runtime/http.js';
import { responseOf } from '../runtime/httpAnswer.js';
import type { ServiceConfig } from '../config/types.js';
import type { ConnectionRecord as RuntimeConnectionRecord } from '../runtime/public.js';
import type { CliIo } from './io.js';
import { resolveTarget } from './deploy.js';
import { scriptKey, type LocalBackend, type LocalRunResult } from './localRun.js';
import { catalogPagination, loadLocalBuild, printRunResult, startLocalTemporal, writeFixture } from './localTools.js';

export interface DryrunOptions {
  root: string;
  env: string | undefined;
  name: string;
  connectionId: string;
  integration: string | undefined;
  input: string | undefined;
  lastSyncDate: string | undefined;
  metadata: string | undefined;
  saveResponses: string | undefined;
  model: string | undefined;
}

/** Every credential value of a connection record, in the forms it can be echoed in. */
function connectionSecrets(record: ConnectionRecord): string[] {
  const values: string[] = [];
  const walk = (value: unknown, key: string): void => {
    if (typeof value === 'string' && key !== 'type' && key !== 'expires_at') values.push(value);
    else if (typeof value === 'object' && value !== null) {
      for (const [name, inner] of Object.entries(value)) walk(inner, name);
    }
  };
  walk(record.credentials, 'credentials');
  return secretForms(values);
}

/** A JSON value from the command line: the text itself, or `@file` to read it from a file. */
export async function jsonArgument(value: string, option: string, cwd: string): Promise<unknown> {
  const text = value.startsWith('@') ? await readFile(resolve(cwd, value.slice(1)), 'utf8') : value;
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ServiceError('invalid_argument', `${option} is not JSON: ${(error as Error).message}`);
  }
}

/** The API as the connection service of a local run: authorization and the connection record. */
function apiConnections(
  api: ServiceClient,
  ref: { connectionId: string; providerConfigKey: string },
  secrets: string[],
) {
  const translate = (error: unknown): never => {
    if (error instanceof ServiceApiError) {
      throw new RelayedError(error.code, error.message, { status: error.status, retryable: error.status >= 500 });
    }
    throw error;
  };
  const service: ConnectionService = {
    // The API's answer is the connection record a run's svc.getConnection returns (SPEC.md).
    getConnection: (_scope, options) =>
      api.connections
        .get(ref, { force_refresh: options?.forceRefresh ?? false, refresh_token: options?.refreshToken ?? false })
        .then((record) => record as unknown as RuntimeConnectionRecord, translate),
    async authorizeRequest(_scope, request: RequestToAuthorize) {
      const answer = await api.connections
        .authorizeRequest(ref, {
          method: request.method.toUpperCase() as 'GET',
          endpoint: request.endpoint,
          params: request.params,
          headers: request.headers,
          ...(request.baseUrlOverride === undefined ? {} : { base_url_override: request.baseUrlOverride }),
          ...(request.formParams === undefined ? {} : { form_params: request.formParams }),
        })
        .catch(translate);
      return { ...answer, secrets };
    },
    getMetadata: () => api.connections.get(ref).then((record) => record.metadata, translate),
    // The integration as the service describes it; the default pagination from this package's catalog.
    describeIntegration: () =>
      api.integrations.get(ref.providerConfigKey, ['webhook']).then(({ data }) => {
        const pagination = catalogPagination(data.provider);
        return {
          integration: {
            unique_key: data.unique_key,
            provider: data.provider,
            display_name: data.display_name,
            created_at: data.created_at,
            updated_at: data.updated_at,
            ...(data.webhook_url === undefined ? {} : { webhook_url: data.webhook_url }),
          },
          ...(pagination ? { pagination } : {}),
        };
      }, translate),
    setMetadata: () => Promise.reject(new Error('a dry run does not write metadata')),
    updateMetadata: () => Promise.reject(new Error('a dry run does not write metadata')),
  };
  return service;
}

/** Which integration a script name belongs to: the one given, or the only one that has it. */
export function findScript(
  config: ServiceConfig,
  name: string,
  integration: string | undefined,
): { integration: string; kind: 'sync' | 'action' } | string {
  const found = config.integrations.flatMap((candidate) => [
    ...candidate.syncs
      .filter((sync) => sync.name === name)
      .map(() => ({ integration: candidate.id, kind: 'sync' as const })),
    ...candidate.actions
      .filter((action) => action.name === name)
      .map(() => ({ integration: candidate.id, kind: 'action' as const })),
  ]);
  const matching = integration === undefined ? found : found.filter((item) => item.integration === integration);
  if (matching.length === 1 && matching[0]) return matching[0];
  if (matching.length === 0) {
    return `no sync or action '${name}'${integration === undefined ? '' : ` in integration '${integration}'`} in service.yaml`;
  }
  return `'${name}' is a script of ${matching.map((item) => `${item.integration} (${item.kind})`).join(', ')}: say which with --integration`;
}

export async function dryrun(options: DryrunOptions, io: CliIo): Promise<number> {
  const target = resolveTarget(options, io);
  if (typeof target === 'string') {
    io.err(`service dryrun: ${target}\n`);
    return 1;
  }
  const build = await loadLocalBuild(options.root, io);
  if (build === null) return 1;
  const script = findScript(build.config, options.name, options.integration);
  if (typeof script === 'string') {
    io.err(`service dryrun: ${script}\n`);
    return 1;
  }
  if (options.lastSyncDate !== undefined && Number.isNaN(Date.parse(options.lastSyncDate))) {
    io.err(
      `service dryrun: --last-sync-date '${options.lastSyncDate}' is not a date (ISO 8601, as 2026-11-20T00:00:00Z)\n`,
    );
    return 2;
  }
  const input = options.input === undefined ? undefined : await jsonArgument(options.input, '--input', io.cwd);
  const metadataOverride =
    options.metadata === undefined ? undefined : await jsonArgument(options.metadata, '--metadata', io.cwd);
  if (
    metadataOverride !== undefined &&
    (typeof metadataOverride !== 'object' || metadataOverride === null || Array.isArray(metadataOverride))
  ) {
    io.err('service dryrun: --metadata must be a JSON object\n');
    return 2;
  }

  const api = createClient({ baseUrl: target.url, secretKey: target.secretKey });
  const ref = { connectionId: options.connectionId, providerConfigKey: script.integration };
  let connection: ConnectionRecord;
  try {
    connection = await api.connections.get(ref);
  } catch (error) {
    if (error instanceof ServiceApiError) {
      io.err(`service dryrun: connection '${options.connectionId}' of ${script.integration}: ${error.message}\n`);
      return 1;
    }
    if (error instanceof TypeError && /fetch failed/.test(error.message)) {
      io.err(`service dryrun: cannot reach the service at ${target.url}. Start it (npm start) or set SERVICE_URL.\n`);
      return 1;
    }
    throw error;
  }
  const secrets = connectionSecrets(connection);
  const connections = apiConnections(api, ref, secrets);
  const scope = { environmentId: 'local', integrationId: script.integration, connectionId: options.connectionId };
  const backend: LocalBackend = {
    // A local run's exchanges are saved as fixtures with the body parsed, as before (one user, no worker).
    httpRequest: async (request) => responseOf(await sendRequest(connections, scope, request)),
    getConnection: (flags) => connections.getConnection(scope, flags),
    getMetadata: async () =>
      (metadataOverride as Record<string, unknown> | undefined) ?? (await connections.getMetadata(scope)),
    getIntegration: () => connections.describeIntegration(scope),
    getEnvironmentVariables: () =>
      api.environmentVariables.list().catch((error: unknown) => {
        if (error instanceof ServiceApiError)
          throw new RelayedError(error.code, error.message, { status: error.status });
        throw error;
      }),
  };

  io.out(
    `dry run of ${script.integration}/${scriptKey(script.kind, options.name)} for connection ${options.connectionId} (${target.url}); nothing is saved\n`,
  );
  const temporal = await startLocalTemporal(io);
  let result: LocalRunResult;
  try {
    const { runLocally } = await import('./localRun.js');
    const started = Date.now();
    const timer = setInterval(() => io.out(`  … running for ${Math.round((Date.now() - started) / 1000)} s\n`), 10_000);
    try {
      result = await runLocally({
        config: build.config,
        integration: script.integration,
        kind: script.kind,
        name: options.name,
        bundles: build.bundles(script.integration),
        connectionId: options.connectionId,
        backend,
        lastSyncDate: options.lastSyncDate,
        input,
        temporal: temporal.server,
        workflowBundle: temporal.workflowBundle,
        onEvent: (event) => io.out(`${event.text}\n`),
      });
    } finally {
      clearInterval(timer);
    }
  } finally {
    await temporal.stop();
  }
  printRunResult(result, io, { model: options.model });
  if (options.saveResponses !== undefined) {
    const file = await writeFixture(options.saveResponses, {
      integration: script.integration,
      kind: script.kind,
      name: options.name,
      connectionId: options.connectionId,
      lastSyncDate: options.lastSyncDate ?? null,
      input: input ?? null,
      metadata: redactValue(await backend.getMetadata(), secrets),
      connection: redactValue({ ...connection, credentials: redactCredentials(connection.credentials) }, secrets),
      environmentVariables: (await backend.getEnvironmentVariables().catch(() => [])).map((variable) => ({
        name: variable.name,
        value: REDACTED,
      })),
      integrationDescription: await backend.getIntegration(),
      exchanges: result.exchanges.map((exchange) => redactValue(exchange, secrets)),
    });
    io.out(`saved ${result.exchanges.length} exchange(s) to ${file}; 'service test --update' records its snapshot\n`);
  }
  return result.ok && result.invalid.length === 0 ? 0 : 1;
}

function redactCredentials(credentials: unknown): unknown {
  if (typeof credentials !== 'object' || credentials === null) return credentials;
  return Object.fromEntries(
    Object.entries(credentials).map(([key, value]) => [key, key === 'type' || key === 'expires_at' ? value : REDACTED]),
  );
}
