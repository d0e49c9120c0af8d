/**
 * Which (connection, sync) pairs an operation applies to: the deployed syncs named in a selection
 * (or all of them with `*`) and the connections meant, and the start of every deployed sync of a
 * new connection. Used by the /sync/* routes and by the composition root's connection hook, so it
 * lives outside the API.
 */
import type { ConnectionManager } from '../connections/types.js';
import type { IntegrationStore } from '../connections/integrationStore.js';
import type { ConnectionScope } from '../connections/types.js';
import type { Deployments } from '../deploy/deployments.js';
import { isServiceError, ServiceError } from '../errors.js';
import type { SyncDefinition } from '../runtime/definitions.js';
import type { SyncControl, SyncRef } from '../temporal/syncControl.js';

export interface SyncSelectionDeps {
  integrations: Pick<IntegrationStore, 'get'>;
  deployments: Pick<Deployments, 'syncDefinitions'>;
  connections: Pick<ConnectionManager, 'getMetadata' | 'listConnections'>;
}

/** A selection as the /sync/* routes take it: `syncs` is a list of names, or `['*']` for every sync. */
export interface SyncSelection {
  provider_config_key: string;
  connection_id?: string | undefined;
  syncs: string[];
}

/** What an operation over a selection touched: one entry per (connection, sync). */
export interface SelectedSyncsResult {
  success: true;
  syncs: { connection_id: string; name: string }[];
}

/** The deployed syncs named (or all with `*`) and the connections meant; every name must exist. */
export async function selectSyncs(
  deps: SyncSelectionDeps,
  environmentId: string,
  selection: SyncSelection,
): Promise<{ definitions: SyncDefinition[]; connectionIds: string[] }> {
  const integrationId = selection.provider_config_key;
  await deps.integrations.get(environmentId, integrationId);
  const deployed = await deps.deployments.syncDefinitions(environmentId, integrationId);
  let definitions = deployed;
  if (!selection.syncs.includes('*')) {
    const unknown = selection.syncs.filter((name) => !deployed.some((definition) => definition.syncName === name));
    if (unknown.length > 0) {
      throw new ServiceError(
        'unknown_sync',
        `integration '${integrationId}' has no deployed sync ${unknown.map((name) => `'${name}'`).join(', ')}; deployed: ${deployed.map((d) => d.syncName).join(', ') || 'none'}`,
      );
    }
    definitions = deployed.filter((definition) => selection.syncs.includes(definition.syncName));
  }
  let connectionIds: string[];
  if (selection.connection_id !== undefined) {
    // 404 `unknown_connection` unless the connection exists in the caller's environment.
    await deps.connections.getMetadata({ environmentId, integrationId, connectionId: selection.connection_id });
    connectionIds = [selection.connection_id];
  } else {
    connectionIds = (await deps.connections.listConnections(environmentId, { integrationId })).map(
      (c) => c.connection_id,
    );
  }
  return { definitions, connectionIds };
}

/** Starts (or hands the current definition to) every deployed sync of a connection: idempotent. */
export async function ensureConnectionSyncs(
  deps: { deployments: Pick<Deployments, 'syncDefinitions'>; syncs: Pick<SyncControl, 'ensureSync'> },
  scope: ConnectionScope,
): Promise<string[]> {
  const definitions = await deps.deployments.syncDefinitions(scope.environmentId, scope.integrationId);
  for (const definition of definitions) await deps.syncs.ensureSync(definition, scope.connectionId);
  return definitions.map((definition) => definition.syncName);
}

/**
 * Applies a sync control operation to every selected (connection, sync); `missing` handles a sync whose
 * entity workflow does not exist for that connection yet.
 */
export async function forEachSelectedSync(
  deps: SyncSelectionDeps,
  environmentId: string,
  selection: SyncSelection,
  operation: {
    existing: (ref: SyncRef) => Promise<void>;
    missing: (definition: SyncDefinition, connectionId: string) => Promise<void>;
  },
): Promise<SelectedSyncsResult> {
  const { definitions, connectionIds } = await selectSyncs(deps, environmentId, selection);
  const touched: { connection_id: string; name: string }[] = [];
  for (const connectionId of connectionIds) {
    for (const definition of definitions) {
      try {
        await operation.existing({ ...definition, connectionId });
      } catch (error) {
        if (!isServiceError(error) || error.code !== 'sync_not_found') throw error;
        await operation.missing(definition, connectionId);
      }
      touched.push({ connection_id: connectionId, name: definition.syncName });
    }
  }
  return { success: true, syncs: touched };
}
