/**
 * Every built-in route of the REST API (ARCHITECTURE.md "REST API", docs/api.md), one file per
 * endpoint, and the fallback that answers the generated endpoints of the current deployment.
 */
import { createDeployRoutes } from './deployVersions.js';
import type { ApiDeps } from '../deps.js';
import { createGeneratedFallback } from '../generated.js';
import type { AnyRoute } from '../route.js';
import { postConnectionAuthorizeRoute } from './postConnectionAuthorize.js';
import { proxyRoutes } from './allProxy.js';
import { deleteConnectionRoute } from './deleteConnection.js';
import { deleteEnvironmentVariableRoute } from './deleteEnvironmentVariable.js';
import { deleteIntegrationRoute } from './deleteIntegration.js';
import { getEnvironmentSettingsRoute, patchEnvironmentSettingsRoute } from './environmentSettings.js';
import { environmentRoutes } from './environments.js';
import { getConnectionRoute } from './getConnection.js';
import { getConnectionsRoute } from './getConnections.js';
import { getEnvironmentVariablesRoute } from './getEnvironmentVariables.js';
import { getHealthRoute } from './getHealth.js';
import { getLivezRoute } from './getLivez.js';
import { getReadyzRoute } from './getReadyz.js';
import { getIntegrationRoute } from './getIntegration.js';
import { getIntegrationConnectFieldsRoute } from './getIntegrationConnectFields.js';
import { getIntegrationsRoute } from './getIntegrations.js';
import { getLogsRoute } from './getLogs.js';
import { getOpenApiRoute } from './getOpenApi.js';
import { getRecordsRoute } from './getRecords.js';
import { getReferenceRoute } from './getReference.js';
import { getRunHistoryRoute } from './getRunHistory.js';
import { getSyncRunsRoute } from './getSyncRuns.js';
import { getSyncStatusRoute } from './getSyncStatus.js';
import { getWebhookDeliveriesRoute } from './getWebhookDeliveries.js';
import { getWebhookSettingsRoute } from './getWebhookSettings.js';
import { patchConnectionRoute } from './patchConnection.js';
import { patchConnectionsMetadataRoute } from './patchConnectionsMetadata.js';
import { patchIntegrationRoute } from './patchIntegration.js';
import { mcpRoutes } from './mcp.js';
import { postActionTriggerRoute } from './postActionTrigger.js';
import { postConnectSessionsRoute } from './postConnectSessions.js';
import { postConnectionsRoute } from './postConnections.js';
import { postConnectionsMetadataRoute } from './postConnectionsMetadata.js';
import { postDeployRoute } from './postDeploy.js';
import { postDeployPreviewRoute } from './postDeployPreview.js';
import { postEnvironmentVariablesRoute } from './postEnvironmentVariables.js';
import { postIntegrationsRoute } from './postIntegrations.js';
import { postSyncPauseRoute } from './postSyncPause.js';
import { postSyncStartRoute } from './postSyncStart.js';
import { postSyncTriggerRoute } from './postSyncTrigger.js';
import { putSyncConnectionFrequencyRoute } from './putSyncConnectionFrequency.js';
import { postWebhookRoute } from './postWebhook.js';
import { putWebhookSettingsRoute } from './putWebhookSettings.js';

export function createApiRoutes(deps: ApiDeps): AnyRoute[] {
  const routes: AnyRoute[] = [];
  const all = () => routes;
  routes.push(
    getHealthRoute(deps),
    getLivezRoute(),
    getReadyzRoute(deps),
    getOpenApiRoute(deps, all),
    getReferenceRoute(deps, all),
    getRecordsRoute(deps),
    postActionTriggerRoute(deps),
    ...mcpRoutes(deps),
    postSyncTriggerRoute(deps),
    postSyncPauseRoute(deps),
    postSyncStartRoute(deps),
    getSyncStatusRoute(deps),
    putSyncConnectionFrequencyRoute(deps),
    getSyncRunsRoute(deps),
    getRunHistoryRoute(deps),
    getConnectionsRoute(deps),
    postConnectionsRoute(deps),
    // Before /connections/:connection_id: PATCH /connections/metadata would match it too.
    postConnectionsMetadataRoute(deps),
    patchConnectionsMetadataRoute(deps),
    getConnectionRoute(deps),
    postConnectionAuthorizeRoute(deps),
    patchConnectionRoute(deps),
    deleteConnectionRoute(deps),
    postConnectSessionsRoute(deps),
    ...proxyRoutes(deps),
    getIntegrationsRoute(deps),
    postIntegrationsRoute(deps),
    getIntegrationRoute(deps),
    getIntegrationConnectFieldsRoute(deps),
    patchIntegrationRoute(deps),
    deleteIntegrationRoute(deps),
    getEnvironmentVariablesRoute(deps),
    postEnvironmentVariablesRoute(deps),
    deleteEnvironmentVariableRoute(deps),
    getEnvironmentSettingsRoute(deps),
    patchEnvironmentSettingsRoute(deps),
    ...environmentRoutes(deps),
    getLogsRoute(deps),
    postWebhookRoute(deps),
    getWebhookSettingsRoute(deps),
    putWebhookSettingsRoute(deps),
    getWebhookDeliveriesRoute(deps),
    postDeployPreviewRoute(deps),
    postDeployRoute(deps),
    ...createDeployRoutes(deps),
  );
  return routes;
}

/** The fallback of createServer that answers the generated endpoints. */
export function createGeneratedEndpointFallback(deps: ApiDeps) {
  return createGeneratedFallback(deps, deps.generated);
}
