/**
 * Generated endpoints as service.yaml declares them, and the two problems that need the whole file to
 * see (SPEC.md "Generated endpoints"; docs/api.md): an endpoint that a built-in route of the API would
 * answer first, and a method and path that one integration declares for two different things. Pure:
 * `compileConfig` reports them with line:column like every other problem, so `service validate` finds
 * what `service deploy` would refuse; the API's router (src/api/generated.ts) uses the same matchers.
 */
import { pathToRegexp } from 'path-to-regexp';
import { actionOutputType, inputTypeOf, type ServiceConfig, type TypeExpr } from './types.js';

/** Every route the API declares besides the generated ones; `*` is any method. Kept in step with createApiRoutes by a test. */
export const BUILTIN_ENDPOINTS: readonly { method: string; path: string }[] = [
  { method: 'GET', path: '/records' },
  { method: 'POST', path: '/action/trigger' },
  { method: 'POST', path: '/mcp' },
  { method: 'GET', path: '/mcp' },
  { method: 'DELETE', path: '/mcp' },
  { method: 'POST', path: '/sync/trigger' },
  { method: 'POST', path: '/sync/pause' },
  { method: 'POST', path: '/sync/start' },
  { method: 'GET', path: '/sync/status' },
  { method: 'PUT', path: '/sync/update-connection-frequency' },
  { method: 'GET', path: '/sync/runs' },
  { method: 'GET', path: '/sync/checkpoint' },
  { method: 'DELETE', path: '/sync/checkpoint' },
  { method: 'GET', path: '/runs/:run_id/history' },
  { method: 'GET', path: '/connections' },
  { method: 'POST', path: '/connections' },
  { method: 'GET', path: '/connections/:connection_id' },
  { method: 'POST', path: '/connections/:connection_id/authorize' },
  { method: 'PATCH', path: '/connections/:connection_id' },
  { method: 'DELETE', path: '/connections/:connection_id' },
  { method: 'POST', path: '/connections/metadata' },
  { method: 'PATCH', path: '/connections/metadata' },
  { method: 'POST', path: '/connect/sessions' },
  { method: '*', path: '/proxy/*path' },
  { method: 'GET', path: '/integrations' },
  { method: 'POST', path: '/integrations' },
  { method: 'GET', path: '/integrations/:id' },
  { method: 'GET', path: '/integrations/:id/connect-fields' },
  { method: 'PATCH', path: '/integrations/:id' },
  { method: 'DELETE', path: '/integrations/:id' },
  { method: 'GET', path: '/environment-variables' },
  { method: 'POST', path: '/environment-variables' },
  { method: 'DELETE', path: '/environment-variables/:name' },
  { method: 'GET', path: '/environment-settings' },
  { method: 'PATCH', path: '/environment-settings' },
  { method: 'GET', path: '/environments' },
  { method: 'POST', path: '/environments' },
  { method: 'PATCH', path: '/environments/:id' },
  { method: 'DELETE', path: '/environments/:id' },
  { method: 'POST', path: '/environments/:id/rotate-key' },
  { method: 'GET', path: '/logs' },
  { method: 'GET', path: '/health' },
  { method: 'GET', path: '/livez' },
  { method: 'GET', path: '/readyz' },
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
  { method: 'GET', path: '/connect' },
  { method: 'POST', path: '/connect' },
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

export interface DeclaredEndpoint {
  method: string;
  path: string;
  integrationId: string;
  kind: 'sync' | 'action';
  name: string;
  /** The sync output's model, or the action's output as written (a model name or a type expression). */
  model: string;
  /** The action's input as written. */
  input: string | null;
  /** What the endpoint answers with: the sync's records are of `model`; the action's output type. */
  outputType: TypeExpr;
  /** The action's input type, or null. */
  inputType: TypeExpr | null;
  /** The endpoint's `group`, when written. */
  group?: string;
  where: (string | number)[];
}

export function declaredEndpoints(config: ServiceConfig): DeclaredEndpoint[] {
  const out: DeclaredEndpoint[] = [];
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
          outputType: { kind: 'model', name: output.model },
          inputType: null,
          ...(output.endpoint.group === undefined ? {} : { group: output.endpoint.group }),
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
        outputType: actionOutputType(action),
        inputType: inputTypeOf(action),
        ...(action.endpoint.group === undefined ? {} : { group: action.endpoint.group }),
        where: ['integrations', integration.id, 'actions', action.name, 'endpoint'],
      });
    }
  }
  return out;
}

/** A path parameter segment: `:name` or `{name}`. */
export const ENDPOINT_PARAM = /^(?::([A-Za-z0-9_]+)|\{([A-Za-z0-9_]+)\})$/;

export function endpointSegments(path: string): string[] {
  return path.split('/').filter((segment) => segment !== '');
}

/** A segment of a generated path as literal text of path-to-regexp: its reserved characters escaped. */
function literalSegment(segment: string): string {
  return segment.replace(/[{}()[\]+?!:*\\]/g, '\\$&');
}

/**
 * A generated path as a matcher (path-to-regexp, the router of Express 5): `:id` and `{id}` match one
 * segment; a trailing slash is optional; case counts.
 */
export function compileEndpointPath(path: string): { regex: RegExp; names: string[]; params: number } {
  const route = endpointSegments(path)
    .map((segment) => {
      const match = ENDPOINT_PARAM.exec(segment);
      return match ? `/:${JSON.stringify(match[1] ?? match[2] ?? '')}` : `/${literalSegment(segment)}`;
    })
    .join('');
  const { regexp, keys } = pathToRegexp(route, { sensitive: true });
  return { regex: regexp, names: keys.map((key) => key.name), params: keys.length };
}

const builtinMatchers = new Map<string, RegExp>();

/**
 * An Express path of a built-in route as a matcher (`:name` one segment, `*name` the rest; case
 * counts), compiled once: the compiler checks every generated endpoint against every built-in route.
 */
function compileBuiltin(path: string): RegExp {
  let regex = builtinMatchers.get(path);
  if (!regex) {
    regex = pathToRegexp(path, { sensitive: true }).regexp;
    builtinMatchers.set(path, regex);
  }
  return regex;
}

/** A concrete path the pattern matches: parameters become a sample value. */
function sample(path: string): string {
  return `/${endpointSegments(path)
    .map((segment) =>
      ENDPOINT_PARAM.test(segment) || segment.startsWith(':') ? 'x1' : segment.startsWith('*') ? 'x1/x2' : segment,
    )
    .join('/')}`;
}

/** Shape of a path for conflict checks: parameters of any name are the same. */
export function endpointShape(path: string): string {
  return `/${endpointSegments(path)
    .map((segment) => (ENDPOINT_PARAM.test(segment) ? ':' : segment))
    .join('/')}`;
}

/**
 * The problems of a configuration's generated endpoints: shadowed by a built-in route, or sharing a
 * method and path within one integration for different things. compileConfig reports each as an error.
 */
export function checkGeneratedEndpoints(
  config: ServiceConfig,
  builtins: readonly { method: string; path: string }[] = BUILTIN_ENDPOINTS,
): EndpointProblem[] {
  const problems: EndpointProblem[] = [];
  const declared = declaredEndpoints(config);
  for (const endpoint of declared) {
    const generated = compileEndpointPath(endpoint.path).regex;
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
  const byKey = new Map<string, DeclaredEndpoint>();
  for (const endpoint of declared) {
    const key = `${endpoint.integrationId} ${endpoint.method} ${endpointShape(endpoint.path)}`;
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
