import { isIP } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import type { TLSConfig } from '@temporalio/client';

/**
 * Why a TLS handshake with the server fails, or undefined when it succeeds (or TLS is off). gRPC
 * clients report a refused handshake as "failed to connect before the deadline"; this one handshake,
 * with the same CA, client certificate and server name, says what was wrong.
 */
export async function tlsHandshakeProblem(
  address: string,
  tls: TLSConfig | undefined,
  timeoutMs = 5000,
): Promise<string | undefined> {
  if (!tls) return undefined;
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at).replace(/^\[|\]$/g, '');
  const port = Number(address.slice(at + 1));
  return new Promise((resolve) => {
    const socket = tlsConnect({
      host,
      port,
      // SNI carries names only (RFC 6066); an IP address is checked against the certificate all the same.
      ...(tls.serverNameOverride !== undefined
        ? { servername: tls.serverNameOverride }
        : isIP(host) === 0
          ? { servername: host }
          : {}),
      ALPNProtocols: ['h2'],
      ...(tls.serverRootCACertificate ? { ca: Buffer.from(tls.serverRootCACertificate) } : {}),
      ...(tls.clientCertPair
        ? { cert: Buffer.from(tls.clientCertPair.crt), key: Buffer.from(tls.clientCertPair.key) }
        : {}),
    });
    const done = (problem: string | undefined): void => {
      clearTimeout(timer);
      socket.destroy();
      resolve(problem);
    };
    const timer = setTimeout(() => done(undefined), timeoutMs);
    // TLS 1.3 sends the server's verdict on the client certificate after the handshake: read, and wait
    // a moment for it (an alert, or the server closing the connection).
    socket.once('secureConnect', () => {
      socket.resume();
      setTimeout(() => done(undefined), 1000);
    });
    socket.once('end', () =>
      done('the server closed the connection after the handshake: it does not accept the client certificate'),
    );
    socket.once('error', (error: Error) => done(error.message));
  });
}
