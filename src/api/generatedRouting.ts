/**
 * Which deployed endpoint a request names: the routing table of each environment's current deployment
 * (src/api/generated.ts answers the requests). Apart from the API's dependencies, so that they can hold
 * one routing per API instance.
 */
import { compileEndpointPath, declaredEndpoints, type DeclaredEndpoint } from '../config/generatedEndpoints.js';
import type { ServiceConfig } from '../config/types.js';
import type { Deployments } from '../deploy/deployments.js';

export interface RoutedEndpoint extends DeclaredEndpoint {
  regex: RegExp;
  names: string[];
  params: number;
}

export interface RoutingTable {
  version: number;
  /** By integration, most specific first. */
  byIntegration: Map<string, RoutedEndpoint[]>;
  config: ServiceConfig;
}

function buildTable(version: number, config: ServiceConfig): RoutingTable {
  const byIntegration = new Map<string, RoutedEndpoint[]>();
  for (const endpoint of declaredEndpoints(config)) {
    const list = byIntegration.get(endpoint.integrationId) ?? [];
    list.push({ ...endpoint, ...compileEndpointPath(endpoint.path) });
    byIntegration.set(endpoint.integrationId, list);
  }
  // Stable sort: fewer parameters first, declaration order otherwise.
  for (const list of byIntegration.values()) list.sort((a, b) => a.params - b.params);
  return { version, byIntegration, config };
}

export function match(list: readonly RoutedEndpoint[] | undefined, method: string, path: string) {
  for (const endpoint of list ?? []) {
    if (endpoint.method !== method) continue;
    const found = endpoint.regex.exec(path);
    if (!found) continue;
    const params: Record<string, string> = {};
    endpoint.names.forEach((name, index) => {
      params[name] = decodeURIComponent(found[index + 1] ?? '');
    });
    return { endpoint, params };
  }
  return undefined;
}

const MAX_CACHED_TABLES = 200;

/**
 * The routing tables of environments' current deployments. Each request reads the current version
 * number (one indexed query); the table is rebuilt only when the version changes, so a deploy takes
 * effect on the next request of every API process.
 */
export function createGeneratedRouting(deps: {
  deployments: Pick<Deployments, 'currentVersion' | 'current' | 'superseded'>;
}) {
  const tables = new Map<string, RoutingTable>();

  async function table(environmentId: string): Promise<RoutingTable | null> {
    const version = await deps.deployments.currentVersion(environmentId);
    if (version === null) return null;
    const cached = tables.get(environmentId);
    if (cached?.version === version) return cached;
    const deployment = await deps.deployments.current(environmentId);
    if (!deployment) return null;
    const built = buildTable(deployment.version, deployment.config);
    if (tables.size >= MAX_CACHED_TABLES) tables.delete(tables.keys().next().value ?? '');
    tables.set(environmentId, built);
    return built;
  }

  /** Output models of the deployed syncs of an integration. */
  async function syncModels(environmentId: string, integrationId: string): Promise<string[]> {
    const current = await table(environmentId);
    const integration = current?.config.integrations.find((candidate) => candidate.id === integrationId);
    return [...new Set(integration?.syncs.flatMap((sync) => sync.outputs.map((output) => output.model)) ?? [])];
  }

  /** Who declared this method and path in one of the last superseded deployments, for a clear error. */
  async function removedEndpoint(environmentId: string, integrationId: string, method: string, path: string) {
    const rows = await deps.deployments.superseded(environmentId, 5);
    for (const row of rows) {
      const found = match(buildTable(row.version, row.config).byIntegration.get(integrationId), method, path);
      if (found) return { ...found.endpoint, version: row.version };
    }
    return undefined;
  }

  return { table, syncModels, removedEndpoint };
}

export type GeneratedRouting = ReturnType<typeof createGeneratedRouting>;
