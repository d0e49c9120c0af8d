/**
 * The OpenAPI 3.1 document, built from the same route declarations that validate requests, plus the
 * generated endpoints of the current deployment.
 */
import { z } from 'zod';
import { ERROR_CODES } from '../errors.js';
import type { AnyRoute } from './route.js';

type JsonSchema = Record<string, unknown>;

export interface OpenApiInfo {
  title: string;
  version: string;
  description: string;
}

/** A path item contributed by the deployment (its generated sync and action endpoints). */
export interface ExtraOperation {
  method: string;
  path: string;
  operation: Record<string, unknown>;
}

function toSchema(schema: z.ZodType): JsonSchema {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  delete json['$schema'];
  return json;
}

/** Express `:name` segments (and `*name` wildcards) become OpenAPI `{name}`. */
export function openApiPath(path: string): string {
  return path.replace(/[:*]([A-Za-z0-9_]+)/g, '{$1}');
}

function parameters(schema: z.ZodType | undefined, where: 'query' | 'path'): Record<string, unknown>[] {
  if (!schema) return [];
  const json = toSchema(schema);
  const properties = (json['properties'] ?? {}) as Record<string, JsonSchema>;
  const required = new Set((json['required'] ?? []) as string[]);
  return Object.entries(properties).map(([name, property]) => ({
    name,
    in: where,
    required: where === 'path' || required.has(name),
    ...(typeof property['description'] === 'string' ? { description: property['description'] } : {}),
    schema: property,
  }));
}

const connectionHeaderParameters = [
  {
    name: 'Connection-Id',
    in: 'header',
    required: true,
    schema: { type: 'string' },
    description: 'The connection this call acts for.',
  },
  {
    name: 'Provider-Config-Key',
    in: 'header',
    required: true,
    schema: { type: 'string' },
    description: 'The integration id of that connection.',
  },
];

/**
 * Every error code with its status and meaning, as a Markdown table: in the Error schema of the OpenAPI
 * document and, the same text, in docs/api.md ("Error codes").
 */
export function errorCodesTable(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, entry]) => {
    const others = 'otherStatuses' in entry ? entry.otherStatuses : [];
    const status =
      others === 'client_error' ? `${entry.status} (or another 4xx)` : [entry.status, ...others].join(' or ');
    return `| \`${code}\` | ${status} | ${entry.meaning} |`;
  });
  return ['| code | status | meaning |', '| --- | --- | --- |', ...rows].join('\n');
}

export const errorSchema: JsonSchema = {
  type: 'object',
  required: ['error'],
  description:
    'The body of every error. `POST /action/trigger` relays the code its run failed with and answers 500 ' +
    '(404 for `action_not_found`), whatever the status below.\n\n' +
    errorCodesTable(),
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', description: 'Stable snake_case code; the Error schema lists them.' },
        message: { type: 'string', description: 'What went wrong and what to do next.' },
        errors: {
          type: 'array',
          items: { type: 'object' },
          description: 'Details, such as every invalid field (`{ path, code, message }`).',
        },
      },
    },
  },
};

export function buildOpenApiDocument(
  info: OpenApiInfo,
  routes: readonly AnyRoute[],
  extra: readonly ExtraOperation[] = [],
) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of routes) {
    const responses: Record<string, unknown> = {};
    for (const [status, response] of Object.entries(route.responses)) {
      responses[status] = {
        description: response.description,
        ...(response.schema ? { content: { 'application/json': { schema: toSchema(response.schema) } } } : {}),
      };
    }
    responses['default'] = {
      description: 'Error',
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
    };
    const operation: Record<string, unknown> = {
      operationId: `${route.method}${openApiPath(route.path).replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
      summary: route.summary,
      ...(route.description ? { description: route.description } : {}),
      tags: route.tags,
      parameters: [
        ...parameters(route.params, 'path'),
        ...parameters(route.query, 'query'),
        ...(route.connectionScoped ? connectionHeaderParameters : []),
        ...(route.headers ?? []).map((header) => ({
          name: header.name,
          in: 'header',
          required: header.required ?? false,
          description: header.description,
          schema: { type: 'string' },
        })),
      ],
      ...(route.body
        ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(route.body) } } } }
        : {}),
      responses,
      security:
        route.auth === 'secret-key' ? [{ secretKey: [] }] : route.auth === 'admin-key' ? [{ adminKey: [] }] : [],
    };
    (paths[openApiPath(route.path)] ??= {})[route.method] = operation;
  }
  for (const item of extra) (paths[openApiPath(item.path)] ??= {})[item.method.toLowerCase()] = item.operation;
  return {
    openapi: '3.1.0',
    info,
    components: {
      securitySchemes: {
        secretKey: { type: 'http', scheme: 'bearer', description: 'The secret key of an environment.' },
        adminKey: {
          type: 'http',
          scheme: 'bearer',
          description: 'The service admin key (SERVICE_ADMIN_KEY): manages environments, reads no environment’s data.',
        },
      },
      schemas: { Error: errorSchema },
    },
    paths,
  };
}
