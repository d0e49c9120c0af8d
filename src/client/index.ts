/**
 * A typed Node client for the REST API (fetch-based, no dependencies). Request and response types
 * come from the routes' own zod schemas (type-only imports: nothing of the server is loaded).
 *
 * @example
 * const api = createClient({ baseUrl: 'http://127.0.0.1:3003', secretKey: process.env.SERVICE_SECRET_KEY! });
 * const connection = { connectionId: 'user-42', providerConfigKey: 'github' };
 * const page = await api.records.list({ ...connection, model: 'Issue', limit: 100 });
 */
import type { z } from 'zod';
import type { recordsQuery } from '../api/routes/records/getRecords.js';
import type { actionTriggerBody } from '../api/routes/actions/postActionTrigger.js';
import type { syncTriggerBody } from '../api/routes/syncs/postSyncTrigger.js';
import type { metadataBody, recordsPageSchema, syncActionResult, syncSelectionBody } from '../api/routes/shared.js';
import type { syncStatusQuery, syncStatusSchema } from '../api/routes/syncs/getSyncStatus.js';
import type { syncRunsQuery, syncRunsSchema } from '../api/routes/syncs/getSyncRuns.js';
import type { syncCheckpointQuery, syncCheckpointSchema } from '../api/routes/syncs/getSyncCheckpoint.js';
import type { runHistorySchema } from '../api/routes/syncs/getRunHistory.js';
import type { connectionRecordSchema, connectionSummarySchema } from '../api/routes/connections/connectionView.js';
import type { connectionsQuery } from '../api/routes/connections/getConnections.js';
import type { importConnectionBody } from '../api/routes/connections/postConnections.js';
import type {
  authorizeRequestBody,
  authorizedRequestSchema,
} from '../api/routes/connections/postConnectionAuthorize.js';
import type { patchConnectionBody } from '../api/routes/connections/patchConnection.js';
import type {
  createIntegrationBody,
  integrationSchema,
  patchIntegrationBody,
} from '../api/routes/integrations/integrationView.js';
import type { connectFieldsAnswer } from '../api/routes/integrations/getIntegrationConnectFields.js';
import type { connectSessionBody, connectSessionSchema } from '../api/routes/connections/postConnectSessions.js';
import type { environmentSettingsSchema } from '../api/routes/environments/getEnvironmentSettings.js';
import type { patchEnvironmentSettingsBody } from '../api/routes/environments/patchEnvironmentSettings.js';
import type { EnvironmentView } from '../api/routes/environments/environmentView.js';
import type { syncFrequencyBody, syncFrequencySchema } from '../api/routes/syncs/putSyncConnectionFrequency.js';
import type { environmentVariableSchema } from '../api/routes/environmentVariables/getEnvironmentVariables.js';
import type { setVariablesBody } from '../api/routes/environmentVariables/postEnvironmentVariables.js';
import type { logLineSchema, logsQuery } from '../api/routes/logs/getLogs.js';
import type { putWebhookSettingsBody } from '../api/routes/webhooks/putWebhookSettings.js';
import type { webhookSettingsSchema } from '../api/routes/webhooks/getWebhookSettings.js';
import type { webhookDeliveriesQuery } from '../api/routes/webhooks/getWebhookDeliveries.js';
import type { WebhookDelivery } from '../webhooks/deliveries.js';
import type { DeployPlan, DeployRequest } from '../deploy/deployments.js';

/** Connection-scoped calls act for one connection of one integration. */
export interface ConnectionRef {
  connectionId: string;
  providerConfigKey: string;
}

export type RecordsPage = z.output<typeof recordsPageSchema>;
export type RecordsQuery = Omit<
  z.input<typeof recordsQuery>,
  'modified_after' | 'modifiedAfter' | 'delta' | 'ids' | 'limit'
> & {
  modified_after?: string | Date;
  ids?: string[];
  limit?: number;
};
export type SyncStatus = z.output<typeof syncStatusSchema>['syncs'][number];
export type SyncRun = z.output<typeof syncRunsSchema>['runs'][number];
/** A run's Temporal history, payloads decoded (GET /runs/:run_id/history). */
export type RunHistory = z.output<typeof runHistorySchema>;
export type ConnectionSummary = z.output<typeof connectionSummarySchema>;
export type ConnectionRecord = z.output<typeof connectionRecordSchema>;
export type AuthorizedRequest = z.output<typeof authorizedRequestSchema>;
export type Integration = z.output<typeof integrationSchema>;
export type EnvironmentVariable = z.output<typeof environmentVariableSchema>;
export type LogLine = z.output<typeof logLineSchema>;
export type ConnectSession = z.output<typeof connectSessionSchema>;
export type EnvironmentSettings = z.output<typeof environmentSettingsSchema>;
export type { EnvironmentView };
export type { WebhookDelivery };

/** `{ error_type: 'action_script_failure', payload }`: what an action answers when its script throws ActionError. */
export interface ActionFailure {
  error_type: 'action_script_failure';
  payload: unknown;
}
export type SyncActionResult = z.output<typeof syncActionResult>;
export type MetadataAnswer = Pick<z.output<typeof metadataBody>, 'connection_id' | 'provider_config_key' | 'metadata'>;
export type ActionResult<T> = { ok: true; output: T } | { ok: false; failure: ActionFailure };

/** An error answer of the API: its status, stable code, message and details. */
export class ServiceApiError extends Error {
  override readonly name = 'ServiceApiError';
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly errors: unknown,
    readonly requestId: string | null,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

export interface ClientOptions {
  baseUrl: string;
  secretKey?: string | undefined;
  fetch?: typeof fetch;
}

type Query = Record<string, string | number | boolean | string[] | Date | Record<string, string> | undefined>;

export interface RawResponse {
  status: number;
  headers: Headers;
  body: Buffer;
  /** The body parsed as JSON (undefined when it is not JSON). */
  json: unknown;
}

export function createClient(options: ClientOptions) {
  const doFetch = options.fetch ?? fetch;
  const base = options.baseUrl.replace(/\/+$/, '');

  function url(path: string, query: Query = {}): string {
    const search = new URLSearchParams();
    for (const [name, value] of Object.entries(query)) {
      if (value === undefined) continue;
      if (Array.isArray(value)) search.set(name, value.join(','));
      else if (value instanceof Date) search.set(name, value.toISOString());
      // `tags[key]=value`: how the API reads an object in the query.
      else if (typeof value === 'object')
        for (const [key, item] of Object.entries(value)) search.set(`${name}[${key}]`, item);
      else search.set(name, String(value));
    }
    const text = search.toString();
    return `${base}${path}${text ? `?${text}` : ''}`;
  }

  async function raw(
    method: string,
    path: string,
    init: { query?: Query; body?: unknown; connection?: ConnectionRef; headers?: Record<string, string> } = {},
  ): Promise<RawResponse> {
    const headers: Record<string, string> = { ...init.headers };
    if (options.secretKey !== undefined) headers['authorization'] = `Bearer ${options.secretKey}`;
    if (init.connection) {
      headers['connection-id'] = init.connection.connectionId;
      headers['provider-config-key'] = init.connection.providerConfigKey;
    }
    let body: string | Buffer | undefined;
    if (Buffer.isBuffer(init.body) || typeof init.body === 'string') body = init.body;
    else if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers['content-type'] ??= 'application/json';
    }
    const response = await doFetch(url(path, init.query), { method, headers, ...(body === undefined ? {} : { body }) });
    const bytes = Buffer.from(await response.arrayBuffer());
    let json: unknown;
    if ((response.headers.get('content-type') ?? '').includes('json') && bytes.length > 0) {
      try {
        json = JSON.parse(bytes.toString('utf8'));
      } catch {
        json = undefined;
      }
    }
    return { status: response.status, headers: response.headers, body: bytes, json };
  }

  function fail(response: RawResponse): never {
    const error = (response.json as { error?: { code?: string; message?: string; errors?: unknown } } | undefined)
      ?.error;
    throw new ServiceApiError(
      response.status,
      error?.code ?? 'http_error',
      error?.message ?? response.body.toString('utf8').slice(0, 300),
      error?.errors,
      response.headers.get('x-request-id'),
    );
  }

  async function call<T>(method: string, path: string, init: Parameters<typeof raw>[2] = {}): Promise<T> {
    const response = await raw(method, path, init);
    if (response.status < 200 || response.status >= 300) fail(response);
    return response.json as T;
  }

  async function action<T>(response: RawResponse): Promise<ActionResult<T>> {
    if (response.status === 200) return { ok: true, output: response.json as T };
    const body = response.json as Partial<ActionFailure> | undefined;
    if (body?.error_type === 'action_script_failure')
      return { ok: false, failure: { error_type: body.error_type, payload: body.payload } };
    return fail(response);
  }

  const encode = encodeURIComponent;

  return {
    /** The low-level call: any method and path, the answer as received (for generated endpoints and tests). */
    raw,
    /** The low-level call that throws ServiceApiError on an error answer and returns the JSON body. */
    call,
    health: () => call<{ status: 'ok'; database: 'ok' }>('GET', '/health'),
    /** Liveness: the API process answers. */
    livez: () => call<{ status: 'ok' }>('GET', '/livez'),
    /**
     * Readiness: Postgres and Temporal answer. Resolves with the report either way (503 is an answer
     * here, not an error): `ready` false names the checks that are `down`.
     */
    readyz: async (): Promise<{ ready: boolean; checks: Record<string, 'ok' | 'down'> }> => {
      const response = await raw('GET', '/readyz');
      const body = response.json as { checks?: Record<string, 'ok' | 'down'> } | undefined;
      if (response.status !== 200 && response.status !== 503) return fail(response);
      return { ready: response.status === 200, checks: body?.checks ?? {} };
    },
    openapi: () => call<Record<string, unknown>>('GET', '/openapi.json'),

    records: {
      list: ({ connectionId, providerConfigKey, ...query }: RecordsQuery & ConnectionRef) =>
        call<RecordsPage>('GET', '/records', { query, connection: { connectionId, providerConfigKey } }),
    },

    actions: {
      /** Runs an action; an ActionError of the script comes back as `{ ok: false, failure }`. */
      trigger: async <T = unknown>(connection: ConnectionRef, body: z.input<typeof actionTriggerBody>) =>
        action<T>(await raw('POST', '/action/trigger', { body, connection })),
    },

    syncs: {
      /** Runs syncs now; `opts: { reset: true }` for a full resync (`emptyCache: true` erases the records first). */
      trigger: (body: z.input<typeof syncTriggerBody>) => call<SyncActionResult>('POST', '/sync/trigger', { body }),
      pause: (body: z.input<typeof syncSelectionBody>) => call<SyncActionResult>('POST', '/sync/pause', { body }),
      start: (body: z.input<typeof syncSelectionBody>) => call<SyncActionResult>('POST', '/sync/start', { body }),
      /** How often one sync runs for one connection (overriding `runs`); `frequency: null` clears it. */
      setConnectionFrequency: (body: z.input<typeof syncFrequencyBody>) =>
        call<z.output<typeof syncFrequencySchema>>('PUT', '/sync/update-connection-frequency', { body }),
      status: (query: Omit<z.input<typeof syncStatusQuery>, 'syncs'> & { syncs: string[] | '*' }) =>
        call<{ syncs: SyncStatus[] }>('GET', '/sync/status', {
          query: { ...query, syncs: query.syncs === '*' ? '*' : query.syncs },
        }),
      /** The checkpoint a sync's script saved for one connection (GET /sync/checkpoint). */
      checkpoint: (query: z.input<typeof syncCheckpointQuery>) =>
        call<z.output<typeof syncCheckpointSchema>>('GET', '/sync/checkpoint', { query: query }),
      /** Resets it: the sync's next run starts from the beginning (DELETE /sync/checkpoint). */
      resetCheckpoint: (query: z.input<typeof syncCheckpointQuery>) =>
        call<{ deleted: boolean }>('DELETE', '/sync/checkpoint', { query: query }),
      /** Recent runs, newest first (GET /sync/runs). */
      runs: (query: z.input<typeof syncRunsQuery>) =>
        call<{ runs: SyncRun[] }>('GET', '/sync/runs', { query: query as Query }),
    },

    runs: {
      /** A sync or action run's history with every payload decoded: what `service replay` replays. */
      history: (runId: string) => call<RunHistory>('GET', `/runs/${encode(runId)}/history`),
    },

    connections: {
      list: (query: z.input<typeof connectionsQuery> = {}) =>
        call<{ connections: ConnectionSummary[] }>('GET', '/connections', { query: query as Query }),
      get: (connection: ConnectionRef, flags: { force_refresh?: boolean; refresh_token?: boolean } = {}) =>
        call<ConnectionRecord>('GET', `/connections/${encode(connection.connectionId)}`, {
          query: { provider_config_key: connection.providerConfigKey, ...flags },
        }),
      /** A request with the connection's credentials injected as a script's request gets them (for `service dryrun`). */
      authorizeRequest: (connection: ConnectionRef, body: z.input<typeof authorizeRequestBody>) =>
        call<AuthorizedRequest>('POST', `/connections/${encode(connection.connectionId)}/authorize`, {
          query: { provider_config_key: connection.providerConfigKey },
          body,
        }),
      import: (body: z.input<typeof importConnectionBody>) => call<ConnectionRecord>('POST', '/connections', { body }),
      /** Replaces the tags (or sets the deprecated end user's). */
      update: (connection: ConnectionRef, body: z.input<typeof patchConnectionBody>) =>
        call<{ success: true }>('PATCH', `/connections/${encode(connection.connectionId)}`, {
          query: { provider_config_key: connection.providerConfigKey },
          body,
        }),
      delete: (connection: ConnectionRef) =>
        call<{ success: true; deleted: true; syncs_stopped: number; records_erased: number }>(
          'DELETE',
          `/connections/${encode(connection.connectionId)}`,
          {
            query: { provider_config_key: connection.providerConfigKey },
          },
        ),
      /** Replaces the metadata of one connection, or of several (all or none); answers the request as applied. */
      setMetadata: (body: z.input<typeof metadataBody>) =>
        call<MetadataAnswer>('POST', '/connections/metadata', { body }),
      /** Merges into the metadata of one connection, or of several (all or none). */
      updateMetadata: (body: z.input<typeof metadataBody>) =>
        call<MetadataAnswer>('PATCH', '/connections/metadata', { body }),
      /** A single-use, short-lived connect link for one end user and one connection id. */
      createConnectSession: (body: z.input<typeof connectSessionBody>) =>
        call<ConnectSession>('POST', '/connect/sessions', { body }),
    },

    environment: {
      getSettings: () => call<EnvironmentSettings>('GET', '/environment-settings'),
      updateSettings: (body: z.input<typeof patchEnvironmentSettingsBody>) =>
        call<EnvironmentSettings>('PATCH', '/environment-settings', { body }),
    },

    /**
     * Managing environments: these calls need a client made with the service admin key
     * (`createClient({ baseUrl, secretKey: SERVICE_ADMIN_KEY })`), not an environment's secret key.
     */
    environments: {
      list: () => call<{ environments: EnvironmentView[] }>('GET', '/environments'),
      /** The new environment and its secret key, shown this once. */
      create: (name: string) =>
        call<{ environment: EnvironmentView; secret_key: string }>('POST', '/environments', { body: { name } }),
      rename: (id: string, name: string) =>
        call<{ environment: EnvironmentView; warnings: string[] }>('PATCH', `/environments/${encode(id)}`, {
          body: { name },
        }),
      /** Refused (409 `environment_not_empty`) while the environment has connections. */
      delete: (id: string) =>
        call<{ deleted: true; environment: EnvironmentView; removed: Record<string, number> }>(
          'DELETE',
          `/environments/${encode(id)}`,
        ),
      /** A new secret key, shown this once; the old one stops working at once. */
      rotateKey: (id: string) =>
        call<{ environment: EnvironmentView; secret_key: string }>('POST', `/environments/${encode(id)}/rotate-key`),
    },

    /** ALL /proxy/*: the external API's answer as received. */
    proxy: (
      connection: ConnectionRef,
      request: {
        method: string;
        path: string;
        query?: Query;
        body?: unknown;
        headers?: Record<string, string>;
        retries?: number;
        retryOn?: number[];
        baseUrlOverride?: string;
      },
    ) =>
      raw(request.method, `/proxy/${request.path.replace(/^\/+/, '')}`, {
        connection,
        ...(request.query ? { query: request.query } : {}),
        body: request.body,
        headers: {
          ...request.headers,
          ...(request.retries === undefined ? {} : { retries: String(request.retries) }),
          ...(request.retryOn === undefined ? {} : { 'retry-on': request.retryOn.join(',') }),
          ...(request.baseUrlOverride === undefined ? {} : { 'base-url-override': request.baseUrlOverride }),
        },
      }),

    integrations: {
      list: () => call<{ data: Integration[] }>('GET', '/integrations'),
      /** `include`: `webhook` adds `webhook_url`, `credentials` the OAuth client (never its secret). */
      get: (id: string, include: ('webhook' | 'credentials')[] = []) =>
        call<{ data: Integration }>('GET', `/integrations/${encode(id)}`, {
          query: include.length === 0 ? {} : { include },
        }),
      create: (body: z.input<typeof createIntegrationBody>) =>
        call<{ data: Integration }>('POST', '/integrations', { body }),
      update: (id: string, body: z.input<typeof patchIntegrationBody>) =>
        call<{ data: Integration }>('PATCH', `/integrations/${encode(id)}`, { body }),
      delete: (id: string, options: { delete_connections?: boolean } = {}) =>
        call<{ success: true; deleted: true }>('DELETE', `/integrations/${encode(id)}`, { query: options }),
      /** What connecting asks for: the credential fields of the auth mode and the provider's settings. */
      connectFields: (id: string) =>
        call<z.output<typeof connectFieldsAnswer>>('GET', `/integrations/${encode(id)}/connect-fields`),
    },

    environmentVariables: {
      list: () => call<EnvironmentVariable[]>('GET', '/environment-variables'),
      set: (body: z.input<typeof setVariablesBody>) =>
        call<{ variables: EnvironmentVariable[] }>('POST', '/environment-variables', { body }),
      delete: (name: string) => call<{ deleted: true }>('DELETE', `/environment-variables/${encode(name)}`),
    },

    logs: {
      search: (query: Partial<z.input<typeof logsQuery>> = {}) =>
        call<{ logs: LogLine[]; next_before: string | null }>('GET', '/logs', { query: query as Query }),
    },

    webhooks: {
      getSettings: () => call<z.output<typeof webhookSettingsSchema>>('GET', '/webhook-settings'),
      setSettings: (body: z.input<typeof putWebhookSettingsBody>) =>
        call<{ url: string | null; generated_secret?: string }>('PUT', '/webhook-settings', { body }),
      deliveries: (query: Partial<z.input<typeof webhookDeliveriesQuery>> = {}) =>
        call<{ deliveries: WebhookDelivery[]; next_before: string | null }>('GET', '/webhook-deliveries', {
          query: query as Query,
        }),
    },

    deploy: {
      preview: (body: DeployRequest) => call<DeployPlan>('POST', '/deploy/preview', { body }),
      apply: (body: DeployRequest, options: { allow_destructive?: boolean } = {}) =>
        call<{ version: number; changes: unknown[]; warnings: string[] }>('POST', '/deploy', { body, query: options }),
    },

    /** A generated endpoint of the deployment: records of a sync endpoint, or an action's result. */
    generated: {
      records: (connection: ConnectionRef, method: string, path: string, query: Omit<RecordsQuery, 'model'> = {}) =>
        call<RecordsPage>(method, path, { connection, query: query }),
      action: async <T = unknown>(
        connection: ConnectionRef,
        method: string,
        path: string,
        input?: Record<string, unknown>,
      ) => {
        const inBody = ['POST', 'PUT', 'PATCH'].includes(method.toUpperCase());
        return action<T>(
          await raw(method, path, { connection, ...(inBody ? { body: input } : { query: (input ?? {}) as Query }) }),
        );
      },
    },
  };
}

export type ServiceClient = ReturnType<typeof createClient>;
