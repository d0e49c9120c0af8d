/**
 * svc.paginate's walk (src/runtime/paginate.ts) over a fake request function: the format's keys and
 * semantics, the provider's defaults under the script's keys, POST bodies, and the two guarantees
 * (a config it cannot follow names its key; never the same request twice in a row).
 */
import { describe, expect, it } from 'vitest';
import { paginate, paginationSettings, PaginationError, type Page } from './paginate.js';
import type { Pagination, ProxyConfiguration, RequestConfig, ServiceResponse } from './public.js';
import type { HttpMethod } from './svcTypes.js';

type Sent = { method: HttpMethod; endpoint: string; baseUrlOverride?: string; params?: unknown; data?: unknown };

/** A request function answering from `answer`; every request is kept in `sent` (copied). */
function fakeApi(answer: (request: Sent, index: number) => { data: unknown; headers?: Record<string, string> }) {
  const sent: Sent[] = [];
  const request = (method: HttpMethod, config: RequestConfig): Promise<ServiceResponse> => {
    const request: Sent = structuredClone({
      method,
      endpoint: config.endpoint,
      ...(config.baseUrlOverride ? { baseUrlOverride: config.baseUrlOverride } : {}),
      ...(config.params !== undefined ? { params: config.params } : {}),
      ...(config.data !== undefined ? { data: config.data } : {}),
    });
    sent.push(request);
    const { data, headers = {} } = answer(request, sent.length - 1);
    return Promise.resolve({
      data,
      headers,
      status: 200,
      statusText: 'OK',
      config,
      request: { method, url: config.endpoint },
    });
  };
  return { sent, request };
}

async function walk<T>(
  request: (method: HttpMethod, config: RequestConfig) => Promise<ServiceResponse>,
  config: ProxyConfiguration,
  defaults?: Pagination,
): Promise<Page<T>[]> {
  const pages: Page<T>[] = [];
  for await (const page of paginate<T>(request, config, defaults, 'crm')) pages.push(page);
  return pages;
}

describe('svc.paginate', () => {
  it('cursor in snake_case: the cursor at a dotted path, trimmed; ends on a missing cursor; limit sent', async () => {
    const api = fakeApi((request) => {
      const after = (request.params as Record<string, unknown>)['after'];
      if (after === undefined) return { data: { results: [{ id: 1 }], paging: { next: { after: ' c2 ' } } } };
      return { data: { results: [{ id: 2 }], paging: {} } };
    });
    const pages = await walk(api.request, {
      endpoint: '/contacts',
      params: { archived: 'false' },
      paginate: {
        type: 'cursor',
        cursor_name_in_request: 'after',
        cursor_path_in_response: 'paging.next.after',
        response_path: 'results',
        limit_name_in_request: 'limit',
        limit: 100,
      },
    });
    expect(pages.map((page) => page.items)).toEqual([[{ id: 1 }], [{ id: 2 }]]);
    expect(api.sent.map((request) => request.params)).toEqual([
      { archived: 'false', limit: 100 },
      { archived: 'false', limit: 100, after: 'c2' },
    ]);
    expect(pages[0]?.onPage?.nextPageParam).toBe('c2');
    expect(pages[1]?.onPage?.nextPageParam).toBeUndefined();
  });

  it('without type, the provider default under the script keys (the format merge); none at all is invalid_pagination naming paginate.type', async () => {
    const defaults: Pagination = {
      type: 'cursor',
      cursor_name_in_request: 'cursor',
      cursor_path_in_response: 'next',
      response_path: 'data',
      limit_name_in_request: 'limit',
      limit: 50,
    };
    const api = fakeApi((request) =>
      (request.params as Record<string, unknown>)['cursor'] === undefined
        ? { data: { items: [{ id: 'a' }], next: 'n' } }
        : { data: { items: [{ id: 'b' }] } },
    );
    const pages = await walk(
      api.request,
      { endpoint: '/x', paginate: { response_path: 'items', limit: 10 } },
      defaults,
    );
    expect(pages.map((page) => page.items)).toEqual([[{ id: 'a' }], [{ id: 'b' }]]);
    expect(api.sent[1]?.params).toEqual({ limit: 10, cursor: 'n' });

    // The bug this replaces: without a type the walk asked for page 1 again and again.
    const endless = fakeApi(() => ({ data: [{ id: 1 }] }));
    await expect(
      walk(endless.request, { endpoint: '/x', paginate: { limit: 10, limit_name_in_request: 'n' } }),
    ).rejects.toThrow(/paginate\.type is missing and the provider of crm has no default pagination/);
    await expect(walk(endless.request, { endpoint: '/x' })).rejects.toBeInstanceOf(PaginationError);
    expect(endless.sent).toHaveLength(0);
  });

  it('a config it cannot follow names the key', () => {
    const cases: [Pagination, RegExp][] = [
      [{ type: 'page' }, /paginate\.type "page" is not one of/],
      [{ type: 'cursor', cursor_path_in_response: 'next' }, /paginate\.cursor_name_in_request is required/],
      [{ type: 'cursor', cursor_name_in_request: 'c' }, /paginate\.cursor_path_in_response is required/],
      [{ type: 'offset' }, /paginate\.offset_name_in_request is required/],
      [{ type: 'link', limit: 10 }, /paginate\.limit needs paginate\.limit_name_in_request/],
      [{ type: 'link', cursor_paht: 'x' } as Pagination, /paginate\.cursor_paht is not a pagination setting/],
      [
        { type: 'offset', offset_name_in_request: 'o', offset_start_value: '1' } as unknown as Pagination,
        /offset_start_value must be a number/,
      ],
      [
        { type: 'link', responsePath: 'a', response_path: 'b' },
        /paginate\.(responsePath|response_path) and paginate\.(responsePath|response_path) disagree/,
      ],
    ];
    for (const [config, message] of cases) {
      expect(() => paginationSettings(config, undefined), JSON.stringify(config)).toThrow(message);
    }
    // camelCase, the service's first spelling, is the same walk.
    expect(
      paginationSettings(
        { type: 'offset', offsetNameInRequest: 'page', offsetStartsAt: 1, offsetIncrement: 'page' },
        undefined,
      ),
    ).toEqual({
      type: 'offset',
      offset_name_in_request: 'page',
      offset_start_value: 1,
      offset_calculation_method: 'per-page',
    });
  });

  it('POST: the parameters go in the body (dotted names nest), the offset a number there and text in a query', async () => {
    const api = fakeApi((request) => {
      const offset = (request.data as { page?: { offset?: number } }).page?.offset ?? 0;
      return { data: { rows: offset === 0 ? [{ id: 1 }, { id: 2 }] : [{ id: 3 }] } };
    });
    const pages = await walk(api.request, {
      endpoint: '/search',
      method: 'POST',
      data: { query: 'open' },
      paginate: {
        type: 'offset',
        offset_name_in_request: 'page.offset',
        limit_name_in_request: 'page.size',
        limit: 2,
        response_path: 'rows',
      },
    });
    expect(pages.map((page) => page.items)).toEqual([[{ id: 1 }, { id: 2 }], [{ id: 3 }]]);
    expect(api.sent.map((request) => [request.method, request.data, request.params])).toEqual([
      ['POST', { query: 'open', page: { size: 2, offset: 0 } }, undefined],
      ['POST', { query: 'open', page: { size: 2, offset: 2 } }, undefined],
    ]);
    // The last (short) page calls no on_page, as the format does.
    expect(pages[1]?.onPage).toBeUndefined();

    const get = fakeApi((request) => ({
      data: (request.params as Record<string, unknown>)['offset'] === '0' ? [1, 2] : [],
    }));
    await walk(get.request, { endpoint: '/n', paginate: { type: 'offset', offset_name_in_request: 'offset' } });
    expect(get.sent.map((request) => request.params)).toEqual([{ offset: '0' }, { offset: '2' }]);

    // in_body: false keeps a POST's parameters in the query.
    const query = fakeApi(() => ({ data: [] }));
    await walk(query.request, {
      endpoint: '/q',
      method: 'post',
      paginate: { type: 'offset', offset_name_in_request: 'o', in_body: false },
    });
    expect(query.sent[0]).toMatchObject({ method: 'POST', params: { o: '0' } });
  });

  it('link: the Link header (rel next, or the named rel) or a body path; an absolute link sets the base URL and drops the query', async () => {
    const api = fakeApi((_request, index) =>
      index === 0
        ? {
            data: { items: [1] },
            headers: {
              link: '<https://api.example.com/v2/items?page=2&per_page=1>; rel="next", <https://api.example.com/v2/items?page=9>; rel="last"',
            },
          }
        : { data: { items: [2] } },
    );
    const pages = await walk(api.request, {
      endpoint: '/v2/items',
      paginate: { type: 'link', response_path: 'items', limit: 1, limit_name_in_request: 'per_page' },
    });
    expect(pages.map((page) => page.items)).toEqual([[1], [2]]);
    expect(api.sent[1]).toEqual({
      method: 'GET',
      endpoint: '/v2/items?page=2&per_page=1',
      baseUrlOverride: 'https://api.example.com',
      params: {},
    });

    const body = fakeApi((_request, index) => ({
      data: { values: [index], next: index === 0 ? 'items?page=2' : null },
    }));
    const bodyPages = await walk(body.request, {
      endpoint: '/items',
      paginate: { type: 'link', link_path_in_response_body: 'next', response_path: 'values' },
    });
    expect(bodyPages.map((page) => page.items)).toEqual([[0], [1]]);
    expect(body.sent[1]?.endpoint).toBe('items?page=2');
  });

  it('never the same request twice in a row: a cursor or a link that repeats ends the walk', async () => {
    const cursor = fakeApi(() => ({ data: { items: [{ id: 1 }], next: 'same' } }));
    const pages = await walk(cursor.request, {
      endpoint: '/c',
      paginate: {
        type: 'cursor',
        cursor_name_in_request: 'c',
        cursor_path_in_response: 'next',
        response_path: 'items',
      },
    });
    expect(cursor.sent).toHaveLength(2);
    expect(pages).toHaveLength(2);

    const link = fakeApi(() => ({ data: [1], headers: { link: '</l?page=2>; rel="next"' } }));
    await walk(link.request, { endpoint: '/l', paginate: { type: 'link' } });
    expect(link.sent.map((request) => request.endpoint)).toEqual(['/l', '/l?page=2']);
  });

  it("a path reads own data only: an array's `entries` is no list (the walk ends on an empty page)", async () => {
    const api = fakeApi((_request, index) => ({ data: index === 0 ? { entries: [1], next: 'n' } : [] }));
    const pages = await walk(api.request, {
      endpoint: '/e',
      paginate: {
        type: 'cursor',
        cursor_name_in_request: 'm',
        cursor_path_in_response: 'next',
        response_path: 'entries',
      },
    });
    expect(pages.map((page) => page.items)).toEqual([[1]]);
    expect(api.sent).toHaveLength(2);
  });

  it('an empty response_path is none, as the format reads it: the body is the list', async () => {
    const api = fakeApi((_request, index) => ({ data: index === 0 ? [{ id: 1 }] : [] }));
    // The provider's default reads `results`; the script's empty path overrides it.
    const pages = await walk(
      api.request,
      { endpoint: '/e', paginate: { response_path: '' } },
      { type: 'offset', offset_name_in_request: 'offset', response_path: 'results' },
    );
    expect(pages.map((page) => page.items)).toEqual([[{ id: 1 }]]);
  });

  it('a list that is not a list fails with invalid_pagination naming response_path', async () => {
    const api = fakeApi(() => ({ data: { results: { id: 1 } } }));
    await expect(
      walk(api.request, {
        endpoint: '/r',
        paginate: { type: 'offset', offset_name_in_request: 'o', response_path: 'results' },
      }),
    ).rejects.toThrow(/paginate\.response_path "results" of the answer of \/r is not a list/);
  });
});
