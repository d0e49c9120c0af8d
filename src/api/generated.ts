/**
 * The generated endpoints of a deployment (SPEC.md "Generated endpoints", docs/api.md "Generated
 * endpoints"): each sync `endpoint` returns the records of its model with the query of GET /records,
 * each action `endpoint` runs its action with the input from the JSON body (POST, PUT, PATCH) or the
 * query (GET, DELETE), path parameters (`:id` or `{id}`) merged in.
 *
 * Which endpoint answers:
 * 1. Built-in routes always win; a generated endpoint that a built-in route would shadow is a problem
 *    of the configuration (src/config/generatedEndpoints.ts), reported by `service validate` and deploy.
 * 2. The `Provider-Config-Key` header selects the integration, so integrations may share a method and path.
 * 3. Within one integration a method and path belongs to one thing: the outputs of syncs may share it
 *    only when they return the same model (the records of a model are one set per connection); any
 *    other sharing is a problem of the configuration, likewise.
 * 4. A literal segment is more specific than a parameter: `GET /issues/open` answers before `GET /issues/:id`.
 */
import type { Request, Response } from 'express';
import { z } from 'zod';
import {
  compileEndpointPath,
  declaredEndpoints,
  ENDPOINT_PARAM,
  endpointSegments,
  endpointShape,
  type DeclaredEndpoint,
} from '../config/generatedEndpoints.js';
import type { ModelConfig, ServiceConfig, TypeExpr } from '../config/types.js';
import { ServiceError } from '../errors.js';
import type { ApiDeps } from './deps.js';
import { match, type GeneratedRouting } from './generatedRouting.js';
import type { ExtraOperation } from './openapi.js';
import type { AuthenticatedEnvironment } from './route.js';
import { connectionHeaders, invalidRequest, parse, ROUTE_TEMPLATE, type ValidationProblem } from './server.js';
import { triggerAction } from './routes/actions/postActionTrigger.js';
import { recordsPageQuery, sendRecords } from './routes/shared.js';

/** The fallback of createServer: answers requests that match a generated endpoint of the caller's environment. */
export function createGeneratedFallback(deps: ApiDeps, routing: GeneratedRouting) {
  return async (
    req: Request,
    res: Response,
    environment: AuthenticatedEnvironment,
    _requestId: string,
    readBody: () => Promise<void>,
  ): Promise<boolean> => {
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
      );
    }
    const scope = connectionHeaders(req, environment);
    const { endpoint, params } = found;
    // The declared template (`GET /issues/{id}`) labels its metrics, not the path with its ids.
    res.locals[ROUTE_TEMPLATE] = `generated ${endpoint.path}`;
    if (endpoint.kind === 'sync') {
      const problems: ValidationProblem[] = [];
      const query = parse(recordsPageQuery, req.query, 'query', problems);
      if (problems.length > 0) throw invalidRequest(problems);
      await sendRecords(deps, res, scope, endpoint.model, query);
      return true;
    }
    // The body is parsed only now, for an endpoint of the caller's that takes one.
    if (method === 'POST' || method === 'PUT' || method === 'PATCH') await readBody();
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
    );
  }
  return { ...(base as Record<string, unknown>), ...params };
}

// ---- OpenAPI ----------------------------------------------------------------------------------

type JsonSchema = Record<string, unknown>;

/** The JSON Schema of a type expression, models as `$ref`s to `#/components/schemas/<name>` (modelSchemas). */
export function typeSchema(type: TypeExpr): JsonSchema {
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

/** Distinct schemas, first occurrence first (outputs that share an endpoint may share a model). */
function uniqueSchemas(schemas: readonly JsonSchema[]): JsonSchema[] {
  const seen = new Set<string>();
  return schemas.filter((schema) => {
    const key = JSON.stringify(schema);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
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
  const groups = new Map<string, DeclaredEndpoint[]>();
  for (const endpoint of declaredEndpoints(config)) {
    const key = `${endpoint.method} ${endpointShape(endpoint.path)}`;
    groups.set(key, [...(groups.get(key) ?? []), endpoint]);
  }
  const operations: ExtraOperation[] = [];
  for (const group of groups.values()) {
    const first = group[0]!;
    const pathNames = compileEndpointPath(first.path).names;
    const openApiPath = `/${endpointSegments(first.path)
      .map((segment) => {
        const match = ENDPOINT_PARAM.exec(segment);
        return match ? `{${match[1] ?? match[2]}}` : segment;
      })
      .join('/')}`;
    const lines = group.map(
      (endpoint) =>
        `- \`Provider-Config-Key: ${endpoint.integrationId}\`: ${endpoint.kind} \`${endpoint.name}\` (${endpoint.kind === 'sync' ? `records of ${endpoint.model}` : `input ${endpoint.input ?? 'none'}, output ${endpoint.model}`})`,
    );
    const isSync = first.kind === 'sync';
    const bodyMethod = ['POST', 'PUT', 'PATCH'].includes(first.method);
    const refs = uniqueSchemas(group.map((endpoint) => typeSchema(endpoint.outputType)));
    const inputRef = first.inputType === null ? {} : typeSchema(first.inputType);
    const tags = [...new Set(group.flatMap((endpoint) => (endpoint.group === undefined ? [] : [endpoint.group])))];
    operations.push({
      method: first.method,
      path: openApiPath,
      operation: {
        operationId: `generated${first.method}${openApiPath.replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
        summary: isSync
          ? `Records of ${[...new Set(group.map((e) => e.model))].join(' / ')}`
          : `Run action ${group.map((e) => e.name).join(' / ')}`,
        description: `Generated from the deployed service.yaml.\n\n${lines.join('\n')}`,
        // The endpoints' `group` (the mapping form of `endpoint`) is their heading in the reference.
        tags: tags.length > 0 ? tags : ['generated'],
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
