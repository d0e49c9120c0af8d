/**
 * The one fake external API of the tests: an HTTP server on 127.0.0.1 that a test answers with a
 * handler it can swap, that records every request, and that is gone when the test file ends.
 *
 * The fakes of each area build on it and keep their own shape for their tests: test/api's
 * `startFakeServer`, test/runtime's `startFakeApi`, test/connections' OAuth provider, test/helpers'
 * paged API.
 */
import {
  createServer,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';
import { deferCleanup } from './cleanup.js';
import { allowOutbound } from './outbound.js';

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
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  allowOutbound(url);
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }));
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
