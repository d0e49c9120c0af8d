/** An HTTP server of a test on 127.0.0.1: the fake upstream's, the API harness's, the connections harness's. */
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * Listens on a free port of 127.0.0.1: `http://127.0.0.1:<port>`, and a `close` that cuts open
 * connections and resolves once the server is closed (twice is once).
 */
export async function listenOnLoopback(server: Server): Promise<{ url: string; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> =>
    (closed ??= new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }));
  return { url, close };
}
