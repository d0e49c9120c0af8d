import type { Request } from 'express';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { generatedOperations, modelSchemas } from '../../generated.js';
import { buildOpenApiDocument } from '../../openapi.js';
import { defineRoute, type AnyRoute } from '../../route.js';

export const API_INFO = {
  title: 'Integration service API',
  version: '1',
  description:
    'The REST API of the integration service, in the wire shapes of the field’s de-facto REST API (docs/api.md, "Compatibility with the de-facto API", lists each difference and its reason). Authenticate with `Authorization: Bearer <environment secret key>`; connection-scoped calls carry `Connection-Id` and `Provider-Config-Key`. Errors are `{ "error": { "code", "message", "errors"? } }`, `errors` a list of objects.',
};

/**
 * The OpenAPI document: the built-in routes, plus the generated endpoints of the current deployment
 * when the request carries an environment's secret key. Without a key it is public (the routes only).
 */
export async function openApiDocument(deps: ApiDeps, routes: readonly AnyRoute[], req: Request) {
  const header = req.header('authorization');
  let environmentId: string | undefined;
  if (header !== undefined) {
    const key = /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1];
    const environment = key ? await deps.environments.findBySecretKey(key) : undefined;
    if (!environment) throw new ServiceError('invalid_secret_key', 'No environment has this secret key.');
    environmentId = environment.id;
  }
  const table = environmentId === undefined ? null : await deps.generated.table(environmentId);
  const document = buildOpenApiDocument(API_INFO, routes, table ? generatedOperations(table.config) : []);
  if (table) document.components.schemas = { ...modelSchemas(table.config), ...document.components.schemas };
  return document;
}

export const getOpenApiRoute = (deps: ApiDeps, routes: () => readonly AnyRoute[]) =>
  defineRoute({
    method: 'get',
    path: '/openapi.json',
    summary: 'The OpenAPI 3.1 document of this API',
    description: 'With a secret key it includes the generated endpoints of the environment’s current deployment.',
    tags: ['service'],
    auth: 'none',
    responses: { 200: { description: 'OpenAPI 3.1' } },
    handler: async ({ req }) => openApiDocument(deps, routes(), req),
  });
