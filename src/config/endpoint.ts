/** Endpoints of syncs and actions: `<METHOD> <URL-PATH>`, as SPEC.md writes them. */
import type { EndpointConfig, HttpMethod } from './types.js';

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const satisfies readonly HttpMethod[];

/**
 * The whole accepted form, also used as the JSON Schema `pattern`: one method, one space, a path that
 * starts with `/` and holds URL path characters only (no query string: the generated endpoint owns that).
 * `:name` and `{name}` segments are plain characters here.
 */
export const ENDPOINT_PATTERN = "^(GET|POST|PUT|PATCH|DELETE) (/[A-Za-z0-9\\-._~!$&'()*+,;=:@%{}/]*)$";
const ENDPOINT = new RegExp(ENDPOINT_PATTERN);

export const ENDPOINT_FORM =
  '"<METHOD> <URL-PATH>" with METHOD one of GET, POST, PUT, PATCH, DELETE, for example "GET /issues"';

function isMethod(value: string): value is HttpMethod {
  return (HTTP_METHODS as readonly string[]).includes(value);
}

export function parseEndpoint(value: string): EndpointConfig | null {
  const match = ENDPOINT.exec(value);
  const method = match?.[1];
  const path = match?.[2];
  if (method === undefined || path === undefined || !isMethod(method)) return null;
  return { method, path };
}

/** A hint for the usual slips (lower-case method, missing slash, missing method). */
export function endpointHint(value: string): string {
  const [first, ...rest] = value.trim().split(/\s+/);
  if (first === undefined || first === '') return '';
  if (rest.length === 0) return first.startsWith('/') ? '; the method is missing' : '';
  if (isMethod(first.toUpperCase()) && first !== first.toUpperCase())
    return `; write the method in capitals: '${first.toUpperCase()}'`;
  if (!isMethod(first)) return `; '${first}' is not one of GET, POST, PUT, PATCH, DELETE`;
  if (rest.length > 1) return '; the path must not contain spaces';
  if (!rest[0]?.startsWith('/')) return "; the path must start with '/'";
  if (rest[0].includes('?')) return '; the path must not carry a query string';
  return '';
}
