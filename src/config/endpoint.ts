/**
 * Endpoints of syncs and actions. SPEC.md writes them `<METHOD> <URL-PATH>`; the de-facto format also
 * reads a bare path (its method is GET for a sync, POST for an action) and, in its later versions, a
 * mapping `{ method, path, group }` (docs/configuration.md, "Endpoints").
 */
import type { EndpointConfig, HttpMethod } from './types.js';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const satisfies readonly HttpMethod[];

const PATH_CHARS = "/[A-Za-z0-9\\-._~!$&'()*+,;=:@%{}/]*";

/**
 * A path, also the JSON Schema `pattern` of `path` in the mapping form: starts with `/` and holds URL
 * path characters only (no query string: the generated endpoint owns that). `:name` and `{name}`
 * segments are plain characters here.
 */
export const PATH_PATTERN = `^${PATH_CHARS}$`;

/**
 * The whole string form, also the JSON Schema `pattern`: an optional method and one space, then a path.
 */
export const ENDPOINT_PATTERN = `^(?:(GET|POST|PUT|PATCH|DELETE) )?(${PATH_CHARS})$`;
const ENDPOINT = new RegExp(ENDPOINT_PATTERN);

export const ENDPOINT_FORM =
  '"<METHOD> <URL-PATH>" with METHOD one of GET, POST, PUT, PATCH, DELETE (for example "GET /issues"), or a mapping { method, path, group }';

/** The method an endpoint without one gets: the format's (GET for a sync, POST for an action). */
export type DefaultMethod = 'GET' | 'POST';

function isMethod(value: unknown): value is HttpMethod {
  return typeof value === 'string' && (HTTP_METHODS as readonly string[]).includes(value);
}

/** The string form, or null when it is not one. */
export function parseEndpointString(value: string, defaultMethod: DefaultMethod): EndpointConfig | null {
  const match = ENDPOINT.exec(value);
  const method = match?.[1] ?? defaultMethod;
  const path = match?.[2];
  if (path === undefined || !isMethod(method)) return null;
  return { method, path };
}

/**
 * Either form, or null. The mapping form's `group` (a heading for the endpoint in generated
 * documentation) is kept only when written, so configs without it compare as before.
 */
export function parseEndpoint(value: unknown, defaultMethod: DefaultMethod): EndpointConfig | null {
  if (typeof value === 'string') return parseEndpointString(value, defaultMethod);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
  const fields = value as Record<string, unknown>;
  const method = fields['method'] ?? defaultMethod;
  const path = fields['path'];
  const group = fields['group'];
  if (!isMethod(method) || typeof path !== 'string' || !new RegExp(PATH_PATTERN).test(path)) return null;
  if (group !== undefined && typeof group !== 'string') return null;
  return group === undefined ? { method, path } : { method, path, group };
}

/** A hint for the usual slips (lower-case method, missing slash, a query string, spaces). */
export function endpointHint(value: string): string {
  const [first, ...rest] = value.trim().split(/\s+/);
  if (first === undefined || first === '') return '';
  if (rest.length === 0) {
    if (first.includes('?')) return '; the path must not carry a query string';
    return first.startsWith('/') ? '' : "; the path must start with '/'";
  }
  if (isMethod(first.toUpperCase()) && first !== first.toUpperCase())
    return `; write the method in capitals: '${first.toUpperCase()}'`;
  if (!isMethod(first)) return `; '${first}' is not one of GET, POST, PUT, PATCH, DELETE`;
  if (rest.length > 1) return '; the path must not contain spaces';
  if (!rest[0]?.startsWith('/')) return "; the path must start with '/'";
  if (rest[0].includes('?')) return '; the path must not carry a query string';
  return '';
}
