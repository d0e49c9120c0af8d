/**
 * `svc.paginate`: walks the pages of a list endpoint in cursor, link or offset style, with the config
 * keys and the semantics of the field's format (its snake_case keys, each also in camelCase), the
 * provider catalog's default pagination under the script's keys, and the parameters in the query or,
 * for POST/PUT/PATCH or `in_body`, in the body. Pure logic over a request function, so it runs inside
 * the workflow sandbox and each page is one durable request.
 *
 * Two guarantees the format does not give: a config the walk cannot follow (no type, a cursor walk
 * without its cursor parameter, a list that is not a list) fails with `invalid_pagination` naming the
 * key, and the walk never sends the same request twice in a row (an API that answers the same cursor
 * or link again ends the walk instead of looping).
 */
import type { Pagination, ProxyConfiguration, RequestConfig, ServiceResponse } from './public.js';
import type { HttpMethod } from './svcTypes.js';
import type { RunErrorCode } from '../errors.js';

export class PaginationError extends Error {
  override readonly name = 'PaginationError';
  readonly code = 'invalid_pagination' satisfies RunErrorCode;
}

/** The walk's settings, every key in the format's spelling (declared, with their docs, in public.ts). */
export type PaginationSettings = Pick<
  Pagination,
  | 'limit'
  | 'limit_name_in_request'
  | 'response_path'
  | 'in_body'
  | 'cursor_path_in_response'
  | 'cursor_name_in_request'
  | 'link_rel_in_response_header'
  | 'link_path_in_response_body'
  | 'offset_name_in_request'
  | 'offset_start_value'
  | 'offset_calculation_method'
> & { type: 'cursor' | 'link' | 'offset' };

/** One page of items, and the `on_page` call the format makes before it asks for the next page. */
export interface Page<T> {
  items: T[];
  /** Present when the format calls `on_page` before going on (or ending) after this page. */
  onPage?: { nextPageParam: string | number | undefined; response: ServiceResponse };
}

const STRING_KEYS = [
  'limit_name_in_request',
  'response_path',
  'cursor_path_in_response',
  'cursor_name_in_request',
  'link_rel_in_response_header',
  'link_path_in_response_body',
  'offset_name_in_request',
] as const;

/** camelCase spellings (this service's first ones) of the format's keys. */
const CAMEL_CASE: Record<string, keyof PaginationSettings> = {
  responsePath: 'response_path',
  limitNameInRequest: 'limit_name_in_request',
  cursorPathInResponse: 'cursor_path_in_response',
  cursorNameInRequest: 'cursor_name_in_request',
  linkPathInResponseBody: 'link_path_in_response_body',
  linkRelInResponseHeader: 'link_rel_in_response_header',
  offsetNameInRequest: 'offset_name_in_request',
  offsetStartsAt: 'offset_start_value',
  inBody: 'in_body',
};

const KNOWN_KEYS = new Set<string>([
  'type',
  'limit',
  'in_body',
  'on_page',
  'offset_start_value',
  'offset_calculation_method',
  'offsetIncrement',
  ...STRING_KEYS,
  ...Object.keys(CAMEL_CASE),
]);

function fail(message: string): never {
  throw new PaginationError(`svc.paginate: ${message}`);
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The script's `paginate` in the format's spelling; unknown keys and wrong types fail, naming the key. */
function spelled(config: unknown, where: string): Record<string, unknown> {
  if (config === undefined || config === null) return {};
  if (!isRecord(config)) fail(`${where} must be an object`);
  const out: Record<string, unknown> = {};
  const spelling: Record<string, string> = {};
  for (const [key, value] of Object.entries(config)) {
    if (value === undefined || key === 'on_page') continue;
    if (!KNOWN_KEYS.has(key)) fail(`${where}.${key} is not a pagination setting`);
    let name = CAMEL_CASE[key] ?? key;
    let given = value;
    if (key === 'offsetIncrement') {
      if (value !== 'page' && value !== 'items') fail(`${where}.offsetIncrement must be 'page' or 'items'`);
      name = 'offset_calculation_method';
      given = value === 'page' ? 'per-page' : 'by-response-size';
    }
    if (name in out && out[name] !== given) fail(`${where}.${spelling[name]} and ${where}.${key} disagree`);
    out[name] = given;
    spelling[name] = key;
  }
  return out;
}

/**
 * The walk's settings: the provider's default pagination under the script's keys (the format's
 * merge), checked. Throws a PaginationError that names the key it cannot follow.
 */
export function paginationSettings(
  script: Pagination | undefined,
  defaults: Pagination | undefined,
  integration = 'this integration',
): PaginationSettings {
  const merged = { ...spelled(defaults, 'the provider default'), ...spelled(script, 'paginate') };
  // The format reads an empty response_path as none: the body is the list.
  if (merged['response_path'] === '') delete merged['response_path'];
  const type = merged['type'];
  if (type === undefined) {
    fail(
      `paginate.type is missing and the provider of ${integration} has no default pagination: give type 'cursor', 'link' or 'offset'`,
    );
  }
  if (type !== 'cursor' && type !== 'link' && type !== 'offset') {
    fail(`paginate.type ${JSON.stringify(type)} is not one of 'cursor', 'link', 'offset'`);
  }
  for (const key of STRING_KEYS) {
    const value = merged[key];
    if (value !== undefined && (typeof value !== 'string' || value === '')) {
      fail(`paginate.${key} must be a non-empty string`);
    }
  }
  const limit = merged['limit'];
  if (limit !== undefined && typeof limit !== 'number' && typeof limit !== 'string') {
    fail('paginate.limit must be a number');
  }
  if (limit !== undefined && limit !== 0 && limit !== '' && merged['limit_name_in_request'] === undefined) {
    fail('paginate.limit needs paginate.limit_name_in_request, the parameter that carries it');
  }
  if (merged['in_body'] !== undefined && typeof merged['in_body'] !== 'boolean')
    fail('paginate.in_body must be a boolean');
  const start = merged['offset_start_value'];
  if (start !== undefined && (typeof start !== 'number' || !Number.isFinite(start))) {
    fail('paginate.offset_start_value must be a number');
  }
  const method = merged['offset_calculation_method'];
  if (method !== undefined && method !== 'per-page' && method !== 'by-response-size') {
    fail("paginate.offset_calculation_method must be 'per-page' or 'by-response-size'");
  }
  if (type === 'cursor') {
    if (merged['cursor_name_in_request'] === undefined)
      fail('paginate.cursor_name_in_request is required for cursor pagination');
    if (merged['cursor_path_in_response'] === undefined)
      fail('paginate.cursor_path_in_response is required for cursor pagination');
  }
  if (type === 'offset' && merged['offset_name_in_request'] === undefined) {
    fail('paginate.offset_name_in_request is required for offset pagination');
  }
  return merged as unknown as PaginationSettings;
}

/** Value at a dotted path (`meta.next_cursor`, `items[0].id`), or at a key that is the path itself; the value for an empty path. */
export function valueAtPath(value: unknown, path: string | undefined): unknown {
  if (path === undefined || path === '') return value;
  if (isRecord(value) && Object.hasOwn(value, path)) return value[path];
  let current: unknown = value;
  for (const key of path.replace(/\[(\w+)\]/g, '.$1').split('.')) {
    if (key === '') continue;
    // Own properties only: a list's `entries` is not data.
    if (current === null || typeof current !== 'object' || !Object.hasOwn(current, key)) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** Sets a dotted path in an object, creating the objects on the way (a body parameter `page.cursor`). */
function setAtPath(target: Record<string, unknown>, path: string, value: unknown): void {
  const keys = path.split('.');
  let current = target;
  keys.slice(0, -1).forEach((key) => {
    const next = current[key];
    current = isRecord(next) ? next : (current[key] = {});
  });
  current[keys[keys.length - 1]!] = value;
}

/** The `rel` target of an RFC 8288 `Link` header (`next` by default). */
export function nextLinkFromHeader(header: string | undefined, rel = 'next'): string | undefined {
  if (!header) return undefined;
  const wanted = rel.toLowerCase();
  for (const part of header.split(/,(?=\s*<)/)) {
    const match = /<([^>]*)>\s*;(.*)$/.exec(part.trim());
    const rels = /\brel\s*=\s*"?([^";]*)"?/i.exec(match?.[2] ?? '')?.[1];
    if (match && rels?.toLowerCase().split(/\s+/).includes(wanted)) return match[1];
  }
  return undefined;
}

/** A query given as a string, as a record. */
export function queryRecord(params: RequestConfig['params']): Record<string, string | number> {
  if (params === undefined) return {};
  if (typeof params !== 'string') return { ...params };
  const out: Record<string, string> = {};
  for (const part of params.replace(/^\?/, '').split('&')) {
    if (part === '') continue;
    const at = part.indexOf('=');
    const decode = (text: string) => decodeURIComponent(text.replace(/\+/g, ' '));
    if (at < 0) out[decode(part)] = '';
    else out[decode(part.slice(0, at))] = decode(part.slice(at + 1));
  }
  return out;
}

function itemsOf<T>(response: ServiceResponse, settings: PaginationSettings, endpoint: string): T[] | undefined {
  const items = valueAtPath(response.data, settings.response_path);
  if (items === undefined || items === null) return undefined;
  if (!Array.isArray(items)) {
    fail(
      `${settings.response_path ? `paginate.response_path "${settings.response_path}" of` : 'the body of'} the answer of ${endpoint} is not a list` +
        (settings.response_path ? '' : ': set paginate.response_path to the list'),
    );
  }
  return items as T[];
}

// A page loop that never ends (an API that always answers a next page) must still stop.
const MAX_PAGES = 100_000;

function isAbsoluteUrl(link: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(link);
}

/**
 * Walks the pages. `request` sends one page (the walk's `page`-th, from 0); `config` is the script's
 * first request with its `paginate`; `defaults` the provider's default pagination.
 */
export async function* paginate<T>(
  request: (method: HttpMethod, config: RequestConfig, page: number) => Promise<ServiceResponse>,
  config: ProxyConfiguration,
  defaults?: Pagination,
  integration?: string,
): AsyncGenerator<Page<T>, void, undefined> {
  if (!isRecord(config) || typeof config.endpoint !== 'string' || config.endpoint === '') {
    throw new PaginationError('svc.paginate needs a config object with an endpoint');
  }
  const settings = paginationSettings(config.paginate, defaults, integration);
  const method = String(config.method ?? 'GET').toUpperCase() as HttpMethod;
  const inBody = settings.in_body ?? ['POST', 'PUT', 'PATCH'].includes(method);
  const { paginate: _paginate, method: _method, ...base } = config;
  if (inBody && base.data !== undefined && !isRecord(base.data)) {
    fail('the pagination parameters go in the body (in_body, or a POST/PUT/PATCH), so data must be an object');
  }
  // The parameters the walk changes: the query's, or the body's (dotted names nest there).
  const carried: Record<string, unknown> = inBody
    ? { ...(base.data as Record<string, unknown>) }
    : queryRecord(base.params);
  if (settings.limit !== undefined && settings.limit !== 0 && settings.limit !== '') {
    carried[settings.limit_name_in_request!] = settings.limit;
  }
  let current: RequestConfig = { ...base };
  let sent = 0;
  const send = async (): Promise<ServiceResponse> => {
    if (inBody) {
      const body: Record<string, unknown> = {};
      for (const [key, value] of Object.entries(carried)) setAtPath(body, key, value);
      current = { ...current, data: body };
    } else {
      current = { ...current, params: { ...(carried as Record<string, string | number>) } };
    }
    return request(method, current, sent++);
  };
  let previousRequest: string | undefined;
  // The walk never sends the same request twice in a row: that page was just answered.
  const repeats = (): boolean => {
    const key = JSON.stringify([current.baseUrlOverride, current.endpoint, carried]);
    if (key === previousRequest) return true;
    previousRequest = key;
    return false;
  };

  switch (settings.type) {
    case 'cursor': {
      let cursor: string | number | undefined;
      for (let page = 0; page < MAX_PAGES; page++) {
        if (cursor !== undefined) carried[settings.cursor_name_in_request!] = cursor;
        if (repeats()) return;
        const response = await send();
        const items = itemsOf<T>(response, settings, config.endpoint);
        if (!items || items.length === 0) return;
        let next = valueAtPath(response.data, settings.cursor_path_in_response);
        if (typeof next === 'string') next = next.trim() === '' ? undefined : next.trim();
        else if (typeof next !== 'number') next = undefined;
        cursor = next as string | number | undefined;
        yield { items, onPage: { nextPageParam: cursor, response } };
        if (cursor === undefined) return;
      }
      break;
    }
    case 'link': {
      const rel =
        settings.link_rel_in_response_header ??
        (settings.link_path_in_response_body === undefined ? 'next' : undefined);
      for (let page = 0; page < MAX_PAGES; page++) {
        if (repeats()) return;
        const response = await send();
        const items = itemsOf<T>(response, settings, config.endpoint) ?? [];
        let next = rel === undefined ? undefined : nextLinkFromHeader(response.headers['link'], rel);
        if (next === undefined && settings.link_path_in_response_body !== undefined) {
          const found = valueAtPath(response.data, settings.link_path_in_response_body);
          next = typeof found === 'string' && found !== '' ? found : undefined;
        }
        yield { items, onPage: { nextPageParam: next, response } };
        if (next === undefined) return;
        if (isAbsoluteUrl(next)) {
          // The link carries the whole query, and may name another host of the provider.
          const at = /^([a-z][a-z0-9+.-]*:\/\/[^/?#]*)(.*)$/i.exec(next)!;
          current = { ...current, baseUrlOverride: at[1]!, endpoint: at[2] === '' ? '/' : at[2]! };
        } else {
          current = { ...current, endpoint: next };
        }
        if (!inBody) for (const key of Object.keys(carried)) delete carried[key];
      }
      break;
    }
    case 'offset': {
      const perPage = settings.offset_calculation_method === 'per-page';
      let offset = settings.offset_start_value ?? 0;
      for (let page = 0; page < MAX_PAGES; page++) {
        // In the query as text, in a body as a number (as the format sends them).
        carried[settings.offset_name_in_request!] = inBody ? offset : String(offset);
        if (repeats()) return;
        const response = await send();
        const items = itemsOf<T>(response, settings, config.endpoint);
        if (!items || items.length === 0) return;
        const last = settings.limit !== undefined && settings.limit !== '' && items.length < Number(settings.limit);
        yield last ? { items } : { items, onPage: { nextPageParam: offset, response } };
        if (last) return;
        offset += perPage ? 1 : items.length;
      }
      break;
    }
  }
  fail(`${config.endpoint} still had pages after ${MAX_PAGES}`);
}
