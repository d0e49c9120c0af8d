/**
 * `svc.paginate`: walks the pages of a list endpoint in cursor, link or offset style. Pure logic over
 * a request function, so it runs inside the workflow sandbox and each page is one durable request.
 */
import type { PaginateConfig, RequestConfig, ServiceResponse } from './public.js';

export class PaginationError extends Error {
  override readonly name = 'PaginationError';
  readonly code = 'invalid_pagination';
}

/** Value at a dotted path (`meta.next_cursor`); the value itself for an empty path. */
export function valueAtPath(value: unknown, path: string | undefined): unknown {
  if (path === undefined || path === '') return value;
  let current: unknown = value;
  for (const key of path.split('.')) {
    if (current === null || typeof current !== 'object') return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** The `rel="next"` target of an RFC 8288 `Link` header. */
export function nextLinkFromHeader(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(',')) {
    const match = /<([^>]*)>\s*;(.*)$/.exec(part.trim());
    if (match && /\brel\s*=\s*"?([^";]*\s)?next(\s[^";]*)?"?/i.test(match[2] ?? '')) return match[1];
  }
  return undefined;
}

function itemsOf<T>(response: ServiceResponse, responsePath: string | undefined, endpoint: string): T[] {
  const items = valueAtPath(response.data, responsePath);
  if (items === undefined || items === null) return [];
  if (!Array.isArray(items)) {
    throw new PaginationError(
      `paginate: ${responsePath ? `"${responsePath}" of the response` : 'the response body'} of ${endpoint} is not a list`,
    );
  }
  return items as T[];
}

// A page loop that never ends (an API that always returns the same cursor) must still stop.
const MAX_PAGES = 100_000;

export async function* paginate<T>(
  request: (config: RequestConfig) => Promise<ServiceResponse>,
  config: PaginateConfig,
): AsyncGenerator<T[], void, undefined> {
  const { paginate: options, ...base } = config;
  const params: Record<string, string | number> = { ...base.params };
  if (options.limit !== undefined) {
    if (!options.limitNameInRequest) throw new PaginationError('paginate: limit needs limitNameInRequest');
    params[options.limitNameInRequest] = options.limit;
  }
  let current: RequestConfig = { ...base, params };
  let offset = options.type === 'offset' ? (options.offsetStartsAt ?? 0) : 0;
  let previousCursor: unknown;
  for (let page = 0; page < MAX_PAGES; page++) {
    if (options.type === 'offset')
      current = { ...current, params: { ...current.params, [options.offsetNameInRequest]: offset } };
    const response = await request(current);
    const items = itemsOf<T>(response, options.responsePath, base.endpoint);
    if (items.length > 0) yield items;
    switch (options.type) {
      case 'cursor': {
        const next = valueAtPath(response.data, options.cursorPathInResponse);
        if (typeof next !== 'string' && typeof next !== 'number') return;
        if (next === '' || items.length === 0 || next === previousCursor) return;
        previousCursor = next;
        current = { ...current, params: { ...current.params, [options.cursorNameInRequest]: next } };
        break;
      }
      case 'link': {
        const next = options.linkPathInResponseBody
          ? valueAtPath(response.data, options.linkPathInResponseBody)
          : nextLinkFromHeader(response.headers['link']);
        if (typeof next !== 'string' || next === '') return;
        // The link carries the whole query of the next page.
        current = { ...current, endpoint: next, params: {} };
        break;
      }
      case 'offset': {
        if (items.length === 0) return;
        if (options.limit !== undefined && items.length < options.limit) return;
        offset += options.offsetIncrement === 'page' ? 1 : items.length;
        break;
      }
    }
  }
  throw new PaginationError(`paginate: ${base.endpoint} still had pages after ${MAX_PAGES}`);
}
