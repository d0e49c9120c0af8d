/**
 * The stores and services the API and the worker share, built once over one database and one Temporal
 * client: what a composition root (src/main.ts, a test, a benchmark) needs to call `createApi` and
 * `createActivities`.
 *
 * @example
 * const service = composeService({ db, encryptor, temporal, taskQueue, callbackUrl });
 * const app = createApi(service.api);
 * const activities = createActivities({ db, runtime: service.runtime });
 */
import type { Client, ConnectionLike } from '@temporalio/client';
import type { ActivityDeps } from '../../activities/index.js';
import { createConnections, type CreateConnectionsOptions } from '../connections/index.js';
import type { Encryptor } from '../connections/encryption.js';
import type { Pool } from '../db/pool.js';
import { databaseCheck, temporalCheck } from '../health.js';
import { createDeployments } from '../deploy/deployments.js';
import { createPostgresDeploymentStore } from '../deploy/store.js';
import { createPostgresRecordStore } from '../records/postgresRecordStore.js';
import { createPostgresLogStore } from '../runtime/logStore.js';
import { createRunHistory } from '../runtime/runHistory.js';
import { createPostgresScriptStore } from '../runtime/scriptStore.js';
import { createSyncControl } from '../temporal/syncControl.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { SyncFrequencyStore } from '../connections/syncFrequencyStore.js';
import type { ConnectionSavedEvent, NeedsReauthEvent } from '../connections/connectionService.js';
import type { ApiDeps } from './deps.js';
import { ensureConnectionSyncs } from '../syncs/selection.js';
import { webhookDeployWarnings } from './webhooks/inbound.js';
import { createConnectionEvents } from '../webhooks/connectionEvents.js';
import { createWebhookSettingsStore } from '../webhooks/settings.js';

export interface ComposeServiceOptions {
  db: Pool;
  encryptor: Encryptor;
  /** A client with the runtime's data converter (createDataConverter). */
  temporal: Client;
  taskQueue: string;
  /** Absolute URL of GET /oauth/callback. */
  callbackUrl: string;
  /** The service's public URL; by default the callback URL without `/oauth/callback`. */
  publicUrl?: string;
  catalog?: CreateConnectionsOptions['catalog'];
  log?: (message: string) => void;
  /** The connection GET /readyz checks Temporal on (checksConnection); the client's own by default. */
  temporalChecks?: ConnectionLike;
}

export function composeService(options: ComposeServiceOptions) {
  const { db, encryptor, temporal } = options;
  // Late-bound: deployments needs the connections, and a saved connection needs the deployment's syncs.
  let onConnectionSaved: (event: ConnectionSavedEvent) => Promise<void> = async () => undefined;
  let onNeedsReauth: (event: NeedsReauthEvent) => Promise<void> = async () => undefined;
  const connections = createConnections({
    db,
    encryptor,
    callbackUrl: options.callbackUrl,
    onConnectionSaved: (event) => onConnectionSaved(event),
    onNeedsReauth: (event) => onNeedsReauth(event),
    ...(options.catalog ? { catalog: options.catalog } : {}),
    ...(options.log ? { log: options.log } : {}),
  });
  const records = createPostgresRecordStore({ db });
  // A script's svc.log lines are stored without its connection's credential values.
  const logs = createPostgresLogStore({ db, secretsOf: (scope) => connections.service.credentialSecrets(scope) });
  const runHistory = createRunHistory({ db });
  const scripts = createPostgresScriptStore({ db });
  const frequencies = new SyncFrequencyStore(db);
  const syncs = createSyncControl({
    client: temporal,
    taskQueue: options.taskQueue,
    frequencyOf: (ref) => frequencies.get(ref),
  });
  const webhookSettings = createWebhookSettingsStore({ db, encryptor });
  const connectionIds = async (environmentId: string, integrationId: string) =>
    (await connections.service.listConnections(environmentId, { integrationId })).map((c) => c.connection_id);
  const deploymentStore = createPostgresDeploymentStore(db);
  const deployments = createDeployments({
    store: deploymentStore,
    scripts,
    records,
    temporal,
    applyTaskQueue: actionTaskQueue(options.taskQueue),
    connectionIds,
    warnings: async (environmentId, config) =>
      webhookDeployWarnings(
        await connections.environments.get(environmentId),
        config,
        async (integrationId) => (await webhookSettings.inboundView(environmentId, integrationId))?.has_secret ?? false,
      ),
  });
  const events = createConnectionEvents({
    db,
    settings: webhookSettings,
    temporal,
    taskQueue: options.taskQueue,
    describe: async (scope) => {
      const status = await connections.service.getConnectionStatus(scope).catch(() => undefined);
      return status && { provider: status.provider, authMode: status.auth_mode };
    },
    ...(options.log ? { log: options.log } : {}),
  });
  onConnectionSaved = async (event) => {
    // The application hears of the connection even when starting its syncs fails (that failure is reported).
    await events.connectionSaved(event);
    await ensureConnectionSyncs({ deployments, syncs }, event.scope);
  };
  onNeedsReauth = (event) => events.needsReauth(event);
  const api: ApiDeps = {
    db,
    environments: connections.environments,
    connections: connections.service,
    integrations: connections.integrations,
    variables: connections.variables,
    records,
    logs,
    runHistory,
    syncs,
    temporal,
    deployments,
    encryptor,
    oauthFlow: connections.oauthFlow,
    readiness: { database: databaseCheck(db), temporal: temporalCheck(options.temporalChecks ?? temporal.connection) },
    publicUrl: (options.publicUrl ?? options.callbackUrl.replace(/\/oauth\/callback$/, '')).replace(/\/+$/, ''),
  };
  const runtime: NonNullable<ActivityDeps['runtime']> = {
    records,
    connections: connections.service,
    environmentVariables: connections.variables,
    scripts,
    logs,
    temporal,
    encryptor,
    resolveAction: ({ environmentId, integrationId, actionName }) =>
      deployments.actionDefinition(environmentId, integrationId, actionName).catch(() => null),
    // The apply workflow's activities (activities/deploy.ts).
    deploy: { deployments: deploymentStore, records, syncs, connectionIds },
  };
  return { api, runtime, connections, deployments, records, scripts, logs, runHistory, syncs, events };
}

export type ComposedService = ReturnType<typeof composeService>;
