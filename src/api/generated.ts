/**
 * The generated endpoints of a deployment (SPEC.md "Generated endpoints", docs/api.md "Generated
 * endpoints"): each sync `endpoint` returns the records of its model with the query of GET /records,
 * each action `endpoint` runs its action with the input from the JSON body (POST, PUT, PATCH) or the
 * query (GET, DELETE), path parameters (`:id` or `{id}`) merged in.
 *
 * Which endpoint answers:
 * 1. Built-in routes always win; a generated endpoint that a built-in route would shadow is refused at
 *    deploy (`checkGeneratedEndpoints`).
 * 2. The `Provider-Config-Key` header selects the integration, so integrations may share a method and path.
 * 3. Within one integration a method and path belongs to one thing: the outputs of syncs may share it
 *    only when they return the same model (the records of a model are one set per connection); any
 *    other sharing is refused at deploy.
 * 4. A literal segment is more specific than a parameter: `GET /issues/open` answers before `GET /issues/:id`.
 */
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { ModelConfig, ServiceConfig, TypeExpr } from './../config/types.js';
import type { Pool } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import type { ApiDeps } from './deps.js';
import type { ExtraOperation } from './openapi.js';
import type { AuthenticatedEnvironment } from './route.js';
import { connectionHeaders, invalidRequest, parse, type ValidationProblem } from './server.js';
import { triggerAction } from './routes/postActionTrigger.js';
import { readRecords, recordsPageQuery } from './routes/shared.js';

/** Every route the API declares besides the generated ones; `*` is any method. Kept in step with createApiRoutes by a test. */
export const BUILTIN_ENDPOINTS: readonly { method: string; path: string }[] = [
  { method: 'GET', path: '/records' },
  { method: 'POST', path: '/action/trigger' },
  { method: 'POST', path: '/sync/trigger' },
  { method: 'POST', path: '/sync/pause' },
  { method: 'POST', path: '/sync/start' },
  { method: 'GET', path: '/sync/status' },
  { method: 'GET', path: '/sync/runs' },
  { method: 'GET', path: '/connections' },
  { method: 'POST', path: '/connections' },
  { method: 'GET', path: '/connections/:connection_id' },
  { method: 'PATCH', path: '/connections/:connection_id' },
  { method: 'DELETE', path: '/connections/:connection_id' },
  { method: 'POST', path: '/connections/metadata' },
  { method: 'PATCH', path: '/connections/metadata' },
  { method: '*', path: '/proxy/*path' },
  { method: 'GET', path: '/integrations' },
  { method: 'POST', path: '/integrations' },
  { method: 'GET', path: '/integrations/:id' },
  { method: 'PATCH', path: '/integrations/:id' },
  { method: 'DELETE', path: '/integrations/:id' },
  { method: 'GET', path: '/environment-variables' },
  { method: 'POST', path: '/environment-variables' },
  { method: 'DELETE', path: '/environment-variables/:name' },
  { method: 'GET', path: '/logs' },
  { method: 'GET', path: '/health' },
  { method: 'GET', path: '/openapi.json' },
  { method: 'GET', path: '/reference' },
  { method: 'POST', path: '/webhook/:environment/:integration' },
  { method: 'GET', path: '/webhook-settings' },
  { method: 'PUT', path: '/webhook-settings' },
  { method: 'GET', path: '/webhook-deliveries' },
  { method: 'POST', path: '/deploy/preview' },
  { method: 'POST', path: '/deploy' },
  { method: 'GET', path: '/deployments' },
  { method: 'GET', path: '/deployments/:version' },
  { method: 'GET', path: '/deployments/:version/request' },
  { method: 'POST', path: '/deployments/:version/redeploy' },
  { method: 'GET', path: '/oauth/connect/:integration' },
  { method: 'GET', path: '/oauth/callback' },
  // The dashboard's router: its pages, files and small routes.
  { method: '*', path: '/dashboard' },
  { method: '*', path: '/dashboard/*path' },
];

export interface EndpointProblem {
  code: 'generated_endpoint_conflict' | 'generated_endpoint_shadows_builtin';
  message: string;
  /** Where in service.yaml: `integrations.<id>.syncs|actions.<name>.endpoint[.<n>]`. */
  path: (string | number)[];
}

interface Declared {
  method: string;
  path: string;
  integrationId: string;
  kind: 'sync' | 'action';
  name: string;
  /** The sync output's model, or the action's output model. */
  model: string;
  /** The action's input model. */
  input: string | null;
  where: (string | number)[];
}

function declaredEndpoints(config: ServiceConfig): Declared[] {
  const out: Declared[] = [];
  for (const integration of config.integrations) {
    for (const sync of integration.syncs) {
      sync.outputs.forEach((output, index) => {
        out.push({
          method: output.endpoint.method,
          path: output.endpoint.path,
          integrationId: integration.id,
          kind: 'sync',
          name: sync.name,
          model: output.model,
          input: null,
          where: [
            'integrations',
            integration.id,
            'syncs',
            sync.name,
            'endpoint',
            ...(sync.outputs.length > 1 ? [index] : []),
          ],
        });
      });
    }
    for (const action of integration.actions) {
      out.push({
        method: action.endpoint.method,
        path: action.endpoint.path,
        integrationId: integration.id,
        kind: 'action',
        name: action.name,
        model: action.output,
        input: action.input,
        where: ['integrations', integration.id, 'actions', action.name, 'endpoint'],
      });
    }
  }
  return out;
}

const PARAM = /^(?::([A-Za-z0-9_]+)|\{([A-Za-z0-9_]+)\})$/;

function segments(path: string): string[] {
  return path.split('/').filter((segment) => segment !== '');
}

/** A generated path as a matcher: `:id` and `{id}` match one segment; a trailing slash is optional. */
function compile(path: string): { regex: RegExp; names: string[]; params: number } {
  const names: string[] = [];
  const source = segments(path)
    .map((segment) => {
      const match = PARAM.exec(segment);
      if (match) {
        names.push(match[1] ?? match[2] ?? '');
        return '/([^/]+)';
      }
      return `/${segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`;
    })
    .join('');
  return { regex: new RegExp(`^${source || ''}/?$`), names, params: names.length };
}

/** An Express path of a built-in route as a matcher (`:name` one segment, `*name` the rest). */
function compileBuiltin(path: string): RegExp {
  const source = path
    .split('/')
    .filter((segment) => segment !== '')
    .map((segment) =>
      segment.startsWith(':')
        ? '/[^/]+'
        : segment.startsWith('*')
          ? '/.+'
          : `/${segment.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`,
    )
    .join('');
  return new RegExp(`^${source}/?$`);
}

/** A concrete path the pattern matches: parameters become a sample value. */
function sample(path: string): string {
  return `/${segments(path)
    .map((segment) =>
      PARAM.test(segment) || segment.startsWith(':') ? 'x1' : segment.startsWith('*') ? 'x1/x2' : segment,
    )
    .join('/')}`;
}

/** Shape of a path for conflict checks: parameters of any name are the same. */
function shape(path: string): string {
  return `/${segments(path)
    .map((segment) => (PARAM.test(segment) ? ':' : segment))
    .join('/')}`;
}

/**
 * The problems of a deployment's generated endpoints: shadowed by a built-in route, or sharing a
 * method and path within one integration for different things. Deploy calls this and refuses the
 * deploy when the list is not empty.
 */
export function checkGeneratedEndpoints(
  config: ServiceConfig,
  builtins: readonly { method: string; path: string }[] = BUILTIN_ENDPOINTS,
): EndpointProblem[] {
  const problems: EndpointProblem[] = [];
  const declared = declaredEndpoints(config);
  for (const endpoint of declared) {
    const generated = compile(endpoint.path).regex;
    const shadow = builtins.find(
      (builtin) =>
        (builtin.method === '*' || builtin.method === endpoint.method) &&
        (compileBuiltin(builtin.path).test(sample(endpoint.path)) || generated.test(sample(builtin.path))),
    );
    if (shadow) {
      problems.push({
        code: 'generated_endpoint_shadows_builtin',
        message: `${endpoint.kind} '${endpoint.name}' of integration '${endpoint.integrationId}' declares endpoint ${endpoint.method} ${endpoint.path}, which the built-in route ${shadow.method === '*' ? 'ALL' : shadow.method} ${shadow.path} answers; choose another path`,
        path: endpoint.where,
      });
    }
  }
  const byKey = new Map<string, Declared>();
  for (const endpoint of declared) {
    const key = `${endpoint.integrationId} ${endpoint.method} ${shape(endpoint.path)}`;
    const first = byKey.get(key);
    if (!first) {
      byKey.set(key, endpoint);
      continue;
    }
    const sameRecords = first.kind === 'sync' && endpoint.kind === 'sync' && first.model === endpoint.model;
    if (sameRecords) continue;
    problems.push({
      code: 'generated_endpoint_conflict',
      message: `${endpoint.kind} '${endpoint.name}' of integration '${endpoint.integrationId}' declares endpoint ${endpoint.method} ${endpoint.path}, already declared by ${first.kind} '${first.name}'${first.kind === 'sync' ? ` (model ${first.model})` : ''}; within an integration a method and path can only be shared by syncs returning the same model`,
      path: endpoint.where,
    });
  }
  return problems;
}

interface RoutedEndpoint extends Declared {
  regex: RegExp;
  names: string[];
  params: number;
}

interface RoutingTable {
  version: number;
  /** By integration, most specific first. */
  byIntegration: Map<string, RoutedEndpoint[]>;
  config: ServiceConfig;
}

function buildTable(version: number, config: ServiceConfig): RoutingTable {
  const byIntegration = new Map<string, RoutedEndpoint[]>();
  for (const endpoint of declaredEndpoints(config)) {
    const list = byIntegration.get(endpoint.integrationId) ?? [];
    list.push({ ...endpoint, ...compile(endpoint.path) });
    byIntegration.set(endpoint.integrationId, list);
  }
  // Stable sort: fewer parameters first, declaration order otherwise.
  for (const list of byIntegration.values()) list.sort((a, b) => a.params - b.params);
  return { version, byIntegration, config };
}

function match(list: readonly RoutedEndpoint[] | undefined, method: string, path: string) {
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
export function createGeneratedRouting(deps: Pick<ApiDeps, 'db' | 'deployments'>) {
  const tables = new Map<string, RoutingTable>();

  async function currentVersion(db: Pool, environmentId: string): Promise<number | null> {
    const { rows } = await db.query<{ version: number }>(
      `SELECT version FROM deployments WHERE environment_id = $1 AND status IN ('applying', 'active')`,
      [environmentId],
    );
    return rows[0]?.version ?? null;
  }

  async function table(environmentId: string): Promise<RoutingTable | null> {
    const version = await currentVersion(deps.db, environmentId);
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
    const { rows } = await deps.db.query<{ version: number; config: ServiceConfig }>(
      `SELECT version, config FROM deployments WHERE environment_id = $1 AND status = 'superseded' ORDER BY version DESC LIMIT 5`,
      [environmentId],
    );
    for (const row of rows) {
      const found = match(buildTable(row.version, row.config).byIntegration.get(integrationId), method, path);
      if (found) return { ...found.endpoint, version: row.version };
    }
    return undefined;
  }

  return { table, syncModels, removedEndpoint };
}

export type GeneratedRouting = ReturnType<typeof createGeneratedRouting>;

/** The fallback of createServer: answers requests that match a generated endpoint of the caller's environment. */
export function createGeneratedFallback(deps: ApiDeps, routing: GeneratedRouting) {
  return async (req: Request, res: Response, environment: AuthenticatedEnvironment): Promise<boolean> => {
    const method = req.method.toUpperCase();
    const current = await routing.table(environment.id);
    const integrationId = req.header('provider-config-key');
    if (!current) return false;
    if (integrationId === undefined) {
      const anywhere = [...current.byIntegration.values()].some((list) => match(list, method, req.path));
      if (anywhere) connectionHeaders(req, environment);
      return false;
    }
    const found = match(current.byIntegration.get(integrationId), method, req.path);
    if (!found) {
      const removed = await routing.removedEndpoint(environment.id, integrationId, method, req.path);
      if (!removed) return false;
      throw new ServiceError(
        removed.kind === 'action' ? 'action_not_found' : 'sync_endpoint_removed',
        `${method} ${req.path} was the endpoint of ${removed.kind} '${removed.name}' of integration '${integrationId}', removed by the deploy after version ${removed.version}`,
        { status: 404 },
      );
    }
    const scope = connectionHeaders(req, environment);
    const { endpoint, params } = found;
    if (endpoint.kind === 'sync') {
      const problems: ValidationProblem[] = [];
      const query = parse(recordsPageQuery, req.query, 'query', problems);
      if (problems.length > 0) throw invalidRequest(problems);
      res.status(200).json(await readRecords(deps, scope, endpoint.model, query));
      return true;
    }
    await triggerAction(deps, res, scope, endpoint.name, actionInput(req, method, params));
    return true;
  };
}

/** The input of a generated action endpoint: the JSON body (POST, PUT, PATCH) or the query (GET, DELETE), with the path parameters. */
function actionInput(req: Request, method: string, params: Record<string, string>): unknown {
  const fromBody = method === 'POST' || method === 'PUT' || method === 'PATCH';
  const base: unknown = fromBody ? req.body : { ...(req.query as Record<string, unknown>) };
  if (Object.keys(params).length === 0) return base;
  if (base === undefined) return { ...params };
  if (typeof base !== 'object' || base === null || Array.isArray(base)) {
    throw new ServiceError(
      'invalid_request',
      'This endpoint has path parameters, so its JSON body must be an object they can be merged into.',
      {
        status: 400,
      },
    );
  }
  return { ...(base as Record<string, unknown>), ...params };
}

// ---- OpenAPI ----------------------------------------------------------------------------------

type JsonSchema = Record<string, unknown>;

function typeSchema(type: TypeExpr): JsonSchema {
  switch (type.kind) {
    case 'primitive':
      switch (type.name) {
        case 'Date':
          return { type: 'string', format: 'date-time' };
        case 'object':
          return { type: 'object' };
        case 'unknown':
        case 'any':
        case 'undefined':
          return {};
        default:
          return { type: type.name };
      }
    case 'literal':
      return { const: type.value };
    case 'model':
      return { $ref: `#/components/schemas/${type.name}` };
    case 'array':
      return { type: 'array', items: typeSchema(type.element) };
    case 'union':
      return { anyOf: type.members.map(typeSchema) };
    case 'object':
      return objectSchema(type.fields, type.stringIndex);
  }
}

function objectSchema(fields: ModelConfig['fields'], stringIndex: TypeExpr | null): JsonSchema {
  return {
    type: 'object',
    properties: Object.fromEntries(fields.map((field) => [field.name, typeSchema(field.type)])),
    required: fields.filter((field) => !field.optional).map((field) => field.name),
    ...(stringIndex ? { additionalProperties: typeSchema(stringIndex) } : {}),
  };
}

/** The models of a deployment as OpenAPI component schemas. */
export function modelSchemas(config: ServiceConfig): Record<string, JsonSchema> {
  return Object.fromEntries(config.models.map((model) => [model.name, objectSchema(model.fields, model.stringIndex)]));
}

const queryParameters = (schema: z.ZodType): JsonSchema[] => {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as {
    properties?: Record<string, JsonSchema>;
  };
  return Object.entries(json.properties ?? {}).map(([name, property]) => ({
    name,
    in: 'query',
    required: false,
    ...(typeof property['description'] === 'string' ? { description: property['description'] } : {}),
    schema: property,
  }));
};

const HEADERS = [
  { name: 'Connection-Id', in: 'header', required: true, schema: { type: 'string' } },
  {
    name: 'Provider-Config-Key',
    in: 'header',
    required: true,
    schema: { type: 'string' },
    description: 'Selects the integration.',
  },
];

/** The generated endpoints of a deployment as OpenAPI operations; integrations sharing a path share one operation. */
export function generatedOperations(config: ServiceConfig): ExtraOperation[] {
  const groups = new Map<string, Declared[]>();
  for (const endpoint of declaredEndpoints(config)) {
    const key = `${endpoint.method} ${shape(endpoint.path)}`;
    groups.set(key, [...(groups.get(key) ?? []), endpoint]);
  }
  const operations: ExtraOperation[] = [];
  for (const group of groups.values()) {
    const first = group[0]!;
    const pathNames = compile(first.path).names;
    const openApiPath = `/${segments(first.path)
      .map((segment) => {
        const match = PARAM.exec(segment);
        return match ? `{${match[1] ?? match[2]}}` : segment;
      })
      .join('/')}`;
    const lines = group.map(
      (endpoint) =>
        `- \`Provider-Config-Key: ${endpoint.integrationId}\`: ${endpoint.kind} \`${endpoint.name}\` (${endpoint.kind === 'sync' ? `records of ${endpoint.model}` : `input ${endpoint.input ?? 'none'}, output ${endpoint.model}`})`,
    );
    const isSync = first.kind === 'sync';
    const bodyMethod = ['POST', 'PUT', 'PATCH'].includes(first.method);
    const refs = [...new Set(group.map((endpoint) => endpoint.model))].map((model) => ({
      $ref: `#/components/schemas/${model}`,
    }));
    const inputRef = first.input ? { $ref: `#/components/schemas/${first.input}` } : {};
    operations.push({
      method: first.method,
      path: openApiPath,
      operation: {
        operationId: `generated${first.method}${openApiPath.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
        summary: isSync
          ? `Records of ${[...new Set(group.map((e) => e.model))].join(' / ')}`
          : `Run action ${group.map((e) => e.name).join(' / ')}`,
        description: `Generated from the deployed service.yaml.\n\n${lines.join('\n')}`,
        tags: ['generated'],
        parameters: [
          ...pathNames.map((name) => ({ name, in: 'path', required: true, schema: { type: 'string' } })),
          ...(isSync ? queryParameters(recordsPageQuery) : []),
          ...HEADERS,
        ],
        ...(!isSync && bodyMethod
          ? { requestBody: { required: false, content: { 'application/json': { schema: inputRef } } } }
          : {}),
        responses: {
          200: {
            description: isSync ? 'One page of records' : 'The output of the action',
            content: {
              'application/json': {
                schema: isSync
                  ? {
                      type: 'object',
                      properties: {
                        records: { type: 'array', items: refs.length === 1 ? refs[0] : { anyOf: refs } },
                        next_cursor: { type: ['string', 'null'] },
                      },
                    }
                  : refs.length === 1
                    ? refs[0]
                    : { anyOf: refs },
              },
            },
          },
          ...(isSync
            ? {}
            : {
                422: {
                  description: 'The script threw ActionError: `{ error_type: "action_script_failure", payload }`',
                },
              }),
          default: {
            description: 'Error',
            content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
          },
        },
        security: [{ secretKey: [] }],
      },
    });
  }
  return operations;
}

const routings = new WeakMap<object, GeneratedRouting>();
/** One routing (and its cache of tables) per API instance. */
export function routingOf(deps: Pick<ApiDeps, 'db' | 'deployments'>): GeneratedRouting {
  let routing = routings.get(deps);
  if (!routing) {
    routing = createGeneratedRouting(deps);
    routings.set(deps, routing);
  }
  return routing;
}
