/**
 * The one fake external API of the tests: an HTTP server on 127.0.0.1 that a test answers with a
 * handler it can swap, that records every request, and that is gone when the test file ends; with what
 * tests of it share: `json` answers, cursor pages (`cursorPage`) and the catalog entry of a provider
 * whose API it is (`apiKeyProvider`).
 *
 * The richer fakes are handlers on it, not servers of their own: test/kit/oauthProvider.ts (an OAuth
 * 1.0a and 2 provider) and test/kit/pagedApi.ts (a paginated API whose pages can be held at a gate).
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import { deferCleanup } from './cleanup.js';
import { allowOutbound } from '../helpers/outbound.js';
import { listenOnLoopback } from './loopback.js';

/** Answers one request; `body` is the request's whole body, read before the handler is called. */
export type UpstreamHandler = (
  request: IncomingMessage,
  response: ServerResponse,
  body: string,
) => void | Promise<void>;

export interface UpstreamRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface FakeUpstream {
  /** `http://127.0.0.1:<port>`, opened in this process's outbound policy (and nothing else). */
  url: string;
  server: Server;
  /** Every request, in arrival order. */
  requests: UpstreamRequest[];
  /** Every request as `METHOD path?query`, in arrival order. */
  hits: string[];
  setHandler(next: UpstreamHandler): void;
  /** Stops the server, cutting open connections; also done when the test file ends. */
  close: () => Promise<void>;
}

/** Answers a JSON body. */
export function json(
  response: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  response.writeHead(status, { 'content-type': 'application/json', ...headers });
  response.end(JSON.stringify(body));
}

const notFound: UpstreamHandler = (_request, response) => json(response, 404, { error: 'no handler' });

/**
 * Starts a fake external API, closed when the test file ends. A handler that throws or rejects answers
 * 500 with the error's text, unless the response was already sent.
 */
export async function startFakeUpstream(handler: UpstreamHandler = notFound): Promise<FakeUpstream> {
  const upstream = await createFakeUpstream(handler);
  deferCleanup(upstream.close);
  return upstream;
}

/** A fake external API (startFakeUpstream) that its owner closes: a fixture's (test/kit). */
export async function createFakeUpstream(handler: UpstreamHandler = notFound): Promise<FakeUpstream> {
  let current = handler;
  const requests: UpstreamRequest[] = [];
  const hits: string[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      requests.push({ method: request.method ?? '', url: request.url ?? '', headers: request.headers, body });
      hits.push(`${request.method} ${request.url}`);
      Promise.resolve()
        .then(() => current(request, response, body))
        .catch((error: unknown) => {
          if (response.headersSent) return void response.destroy();
          response.statusCode = 500;
          response.end(String(error));
        });
    });
  });
  const { url, close } = await listenOnLoopback(server);
  allowOutbound(url);
  return {
    url,
    server,
    requests,
    hits,
    setHandler: (next) => {
      current = next;
    },
    close,
  };
}

/**
 * A provider catalog entry whose API is the fake upstream at `url` (its paths under `/api`), the
 * connection's API key sent as `Authorization: Bearer <key>`.
 */
export function apiKeyProvider(url: string, displayName = 'Fake API'): Record<string, unknown> {
  return {
    display_name: displayName,
    auth_mode: 'API_KEY',
    api_key: { in: 'header', name: 'Authorization', format: 'Bearer ${apiKey}' },
    base_url: `${url}/api`,
  };
}

/**
 * The page a request asks of a cursor-paginated list of `total` items (`?cursor=<offset>&limit=<n>`,
 * the first page without a cursor): its offset, and the answer `{ items, next }` whose items `item`
 * makes from their index, `next` null on the last page.
 */
export function cursorPage<T>(
  request: IncomingMessage,
  total: number,
  item: (index: number) => T,
): { start: number; answer: { items: T[]; next: string | null } } {
  const url = new URL(request.url ?? '/', 'http://x');
  const start = Number(url.searchParams.get('cursor') ?? '0');
  const limit = Number(url.searchParams.get('limit'));
  const items = Array.from({ length: Math.min(limit, total - start) }, (_, i) => item(start + i));
  return { start, answer: { items, next: start + limit < total ? String(start + limit) : null } };
}
