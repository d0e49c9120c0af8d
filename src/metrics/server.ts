/**
 * The metrics listener of one process: `GET /metrics` in the Prometheus text format, on a port of its
 * own (METRICS_PORT), never on the API's port. Why a port of its own: the worker has no HTTP server,
 * the metrics span every environment (an environment's secret key must not read another's integration
 * names), and operators scrape on an internal address. On loopback (the default) it answers without
 * credentials, like any local exporter; with METRICS_TOKEN it requires `Authorization: Bearer <token>`,
 * and settings refuse a non-loopback METRICS_HOST without one (src/settings.ts).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { collectProcessMetrics, metricsRegistry } from './index.js';
import { log } from '../log.js';

export interface MetricsServerOptions {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  /** When set, scrapes must send `Authorization: Bearer <token>`. */
  token?: string | undefined;
}

export interface MetricsServer {
  /** `http://host:port`, the port as bound. */
  url: string;
  close(): Promise<void>;
}

function digest(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

function error(
  res: ServerResponse,
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify({ error: { code, message } }));
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  collectProcessMetrics();
  const expected = options.token === undefined ? undefined : digest(options.token);
  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0];
    if (path !== '/metrics') {
      error(
        res,
        404,
        'route_not_found',
        `No route ${req.method ?? ''} ${path ?? ''}: this listener serves GET /metrics only.`,
      );
      return;
    }
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      error(res, 405, 'method_not_allowed', 'GET /metrics only.', { allow: 'GET, HEAD' });
      return;
    }
    if (expected) {
      const presented = /^Bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '')?.[1];
      // Compared as digests: equal lengths for timingSafeEqual, and no early exit on the first difference.
      if (presented === undefined || !timingSafeEqual(digest(presented), expected)) {
        error(res, 401, 'invalid_metrics_token', 'Send `Authorization: Bearer <METRICS_TOKEN>` to read the metrics.', {
          'www-authenticate': 'Bearer',
        });
        return;
      }
    }
    const body = await metricsRegistry.metrics();
    res.writeHead(200, { 'content-type': metricsRegistry.contentType });
    res.end(req.method === 'HEAD' ? undefined : body);
  };
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((failure: unknown) => {
      if (!res.headersSent) error(res, 500, 'internal_error', 'The metrics could not be collected.');
      log.error({ component: 'metrics', err: failure }, 'collecting the metrics failed');
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
