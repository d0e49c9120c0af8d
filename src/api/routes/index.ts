/**
 * Every built-in route of the REST API (ARCHITECTURE.md "REST API", docs/api.md), a folder per
 * resource and a file per endpoint, and the fallback that answers the generated endpoints of the current deployment.
 */
import { getDeploymentsRoute } from './deploy/getDeployments.js';
import { getDeploymentRoute } from './deploy/getDeployment.js';
import { getDeploymentRequestRoute } from './deploy/getDeploymentRequest.js';
import { postDeploymentRedeployRoute } from './deploy/postDeploymentRedeploy.js';
import type { ApiDeps } from '../deps.js';
import { createGeneratedFallback } from '../generated.js';
import type { AnyRoute } from '../route.js';
import { postConnectionAuthorizeRoute } from './connections/postConnectionAuthorize.js';
import { proxyRoutes } from './proxy/allProxy.js';
import { deleteConnectionRoute } from './connections/deleteConnection.js';
import { deleteEnvironmentVariableRoute } from './environmentVariables/deleteEnvironmentVariable.js';
import { deleteIntegrationRoute } from './integrations/deleteIntegration.js';
import { getEnvironmentSettingsRoute } from './environments/getEnvironmentSettings.js';
import { patchEnvironmentSettingsRoute } from './environments/patchEnvironmentSettings.js';
import { getEnvironmentsRoute } from './environments/getEnvironments.js';
import { postEnvironmentsRoute } from './environments/postEnvironments.js';
import { patchEnvironmentRoute } from './environments/patchEnvironment.js';
import { deleteEnvironmentRoute } from './environments/deleteEnvironment.js';
import { postEnvironmentRotateKeyRoute } from './environments/postEnvironmentRotateKey.js';
import { getConnectionRoute } from './connections/getConnection.js';
import { getConnectionsRoute } from './connections/getConnections.js';
import { getEnvironmentVariablesRoute } from './environmentVariables/getEnvironmentVariables.js';
import { getHealthRoute } from './service/getHealth.js';
import { getLivezRoute } from './service/getLivez.js';
import { getReadyzRoute } from './service/getReadyz.js';
import { getIntegrationRoute } from './integrations/getIntegration.js';
import { getIntegrationConnectFieldsRoute } from './integrations/getIntegrationConnectFields.js';
import { getIntegrationsRoute } from './integrations/getIntegrations.js';
import { getLogsRoute } from './logs/getLogs.js';
import { getOpenApiRoute } from './service/getOpenApi.js';
import { getRecordsRoute } from './records/getRecords.js';
import { getReferenceRoute } from './service/getReference.js';
import { getRunHistoryRoute } from './syncs/getRunHistory.js';
import { getSyncRunsRoute } from './syncs/getSyncRuns.js';
import { getSyncCheckpointRoute } from './syncs/getSyncCheckpoint.js';
import { deleteSyncCheckpointRoute } from './syncs/deleteSyncCheckpoint.js';
import { getSyncStatusRoute } from './syncs/getSyncStatus.js';
import { getWebhookDeliveriesRoute } from './webhooks/getWebhookDeliveries.js';
import { getWebhookSettingsRoute } from './webhooks/getWebhookSettings.js';
import { patchConnectionRoute } from './connections/patchConnection.js';
import { patchConnectionsMetadataRoute } from './connections/patchConnectionsMetadata.js';
import { patchIntegrationRoute } from './integrations/patchIntegration.js';
import { createMcpEndpoint } from './mcp/mcpEndpoint.js';
import { postMcpRoute } from './mcp/postMcp.js';
import { getMcpRoute } from './mcp/getMcp.js';
import { deleteMcpRoute } from './mcp/deleteMcp.js';
import { postActionTriggerRoute } from './actions/postActionTrigger.js';
import { postConnectSessionsRoute } from './connections/postConnectSessions.js';
import { postConnectionsRoute } from './connections/postConnections.js';
import { postConnectionsMetadataRoute } from './connections/postConnectionsMetadata.js';
import { postDeployRoute } from './deploy/postDeploy.js';
import { postDeployPreviewRoute } from './deploy/postDeployPreview.js';
import { postEnvironmentVariablesRoute } from './environmentVariables/postEnvironmentVariables.js';
import { postIntegrationsRoute } from './integrations/postIntegrations.js';
import { postSyncPauseRoute } from './syncs/postSyncPause.js';
import { postSyncStartRoute } from './syncs/postSyncStart.js';
import { postSyncTriggerRoute } from './syncs/postSyncTrigger.js';
import { putSyncConnectionFrequencyRoute } from './syncs/putSyncConnectionFrequency.js';
import { postWebhookRoute } from './webhooks/postWebhook.js';
import { putWebhookSettingsRoute } from './webhooks/putWebhookSettings.js';

export function createApiRoutes(deps: ApiDeps): AnyRoute[] {
  const routes: AnyRoute[] = [];
  const all = () => routes;
  const mcp = createMcpEndpoint(deps);
  routes.push(
    getHealthRoute(deps),
    getLivezRoute(),
    getReadyzRoute(deps),
    getOpenApiRoute(deps, all),
    getReferenceRoute(deps, all),
    getRecordsRoute(deps),
    postActionTriggerRoute(deps),
    postMcpRoute(mcp),
    getMcpRoute(mcp),
    deleteMcpRoute(mcp),
    postSyncTriggerRoute(deps),
    postSyncPauseRoute(deps),
    postSyncStartRoute(deps),
    getSyncStatusRoute(deps),
    putSyncConnectionFrequencyRoute(deps),
    getSyncRunsRoute(deps),
    getSyncCheckpointRoute(deps),
    deleteSyncCheckpointRoute(deps),
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
    getEnvironmentsRoute(deps),
    postEnvironmentsRoute(deps),
    patchEnvironmentRoute(deps),
    deleteEnvironmentRoute(deps),
    postEnvironmentRotateKeyRoute(deps),
    getLogsRoute(deps),
    postWebhookRoute(deps),
    getWebhookSettingsRoute(deps),
    putWebhookSettingsRoute(deps),
    getWebhookDeliveriesRoute(deps),
    postDeployPreviewRoute(deps),
    postDeployRoute(deps),
    getDeploymentsRoute(deps),
    getDeploymentRoute(deps),
    getDeploymentRequestRoute(deps),
    postDeploymentRedeployRoute(deps),
  );
  return routes;
}

/** The fallback of createServer that answers the generated endpoints. */
export function createGeneratedEndpointFallback(deps: ApiDeps) {
  return createGeneratedFallback(deps, deps.generated);
}
