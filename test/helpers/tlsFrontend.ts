/**
 * A Temporal frontend that speaks TLS and demands a client certificate and an API key, as Temporal
 * Cloud does: an HTTP/2 server on loopback that terminates mTLS, refuses calls without the expected
 * `Authorization: Bearer <key>` with gRPC status 16 (UNAUTHENTICATED), and forwards every other call,
 * stream by stream with headers, body and trailers, to the test run's plaintext dev server. (The
 * Temporal CLI's dev server has no TLS options, and the TLS handshake and the API key are what is
 * under test; the gRPC calls behind them are the real server's.) Certificates are made with the
 * `openssl` CLI.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TLSSocket } from 'node:tls';

export interface Pki {
  dir: string;
  /** Paths of PEM files. */
  serverCa: string;
  serverCert: string;
  serverKey: string;
  clientCa: string;
  clientCert: string;
  clientKey: string;
  /** A CA that signed nothing the server presents. */
  otherCa: string;
  /** A client certificate signed by `otherCa`, which the server does not trust. */
  otherClientCert: string;
  otherClientKey: string;
  remove(): void;
}

function openssl(cwd: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
}

// A new P-256 key, unencrypted, for `openssl req`.
const NEW_EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function makeCa(dir: string, name: string): void {
  openssl(
    dir,
    'req',
    '-x509',
    ...NEW_EC_KEY,
    '-keyout',
    `${name}.key`,
    '-out',
    `${name}.pem`,
    '-days',
    '2',
    '-subj',
    `/CN=${name}`,
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  );
}

function makeLeaf(dir: string, name: string, ca: string, extensions: string): void {
  writeFileSync(join(dir, `${name}.ext`), `basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n${extensions}\n`);
  openssl(dir, 'req', ...NEW_EC_KEY, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`);
  openssl(
    dir,
    'x509',
    '-req',
    '-in',
    `${name}.csr`,
    '-CA',
    `${ca}.pem`,
    '-CAkey',
    `${ca}.key`,
    '-set_serial',
    String(Date.now()),
    '-days',
    '2',
    '-out',
    `${name}.pem`,
    '-extfile',
    `${name}.ext`,
  );
}

/** CAs and certificates for a server named `serverName` and for a client, in a temporary folder. */
export function makePki(serverName: string): Pki {
  const dir = mkdtempSync(join(tmpdir(), 'service-pki-'));
  makeCa(dir, 'server-ca');
  makeCa(dir, 'client-ca');
  makeCa(dir, 'other-ca');
  makeLeaf(dir, 'server', 'server-ca', `subjectAltName=DNS:${serverName}\nextendedKeyUsage=serverAuth`);
  makeLeaf(dir, 'client', 'client-ca', 'extendedKeyUsage=clientAuth');
  makeLeaf(dir, 'other-client', 'other-ca', 'extendedKeyUsage=clientAuth');
  const at = (file: string): string => join(dir, file);
  return {
    dir,
    serverCa: at('server-ca.pem'),
    serverCert: at('server.pem'),
    serverKey: at('server.key'),
    clientCa: at('client-ca.pem'),
    clientCert: at('client.pem'),
    clientKey: at('client.key'),
    otherCa: at('other-ca.pem'),
    otherClientCert: at('other-client.pem'),
    otherClientKey: at('other-client.key'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

export interface TlsFrontend {
  address: string;
  /** Calls forwarded, by the client certificate's common name. */
  forwarded: Map<string, number>;
  /** Calls refused for a missing or wrong API key. */
  refused: number;
  /** TLS handshakes that failed (no client certificate, an untrusted one, a client that distrusts us). */
  handshakeFailures: number;
  close(): Promise<void>;
}

export async function startTlsFrontend(options: { pki: Pki; upstream: string; apiKey: string }): Promise<TlsFrontend> {
  const { pki } = options;
  // One HTTP/2 session to the dev server, opened again whenever the server ended it (GOAWAY, an error).
  let upstream: http2.ClientHttp2Session | undefined;
  const session = (): http2.ClientHttp2Session => {
    if (!upstream || upstream.closed || upstream.destroyed) {
      upstream = http2.connect(`http://${options.upstream}`);
      upstream.on('error', () => undefined);
    }
    return upstream;
  };
  const server = http2.createSecureServer({
    key: readFileSync(pki.serverKey),
    cert: readFileSync(pki.serverCert),
    ca: readFileSync(pki.clientCa),
    requestCert: true,
    rejectUnauthorized: true,
  });
  const frontend: TlsFrontend = {
    address: '',
    forwarded: new Map(),
    refused: 0,
    handshakeFailures: 0,
    close: async () => {
      // Sessions of clients that never closed theirs would keep the server open.
      for (const session of sessions) session.destroy();
      upstream?.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  server.on('tlsClientError', () => frontend.handshakeFailures++);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
    session.on('error', () => undefined);
  });
  server.on('stream', (stream, headers) => {
    stream.on('error', () => undefined);
    if (headers['authorization'] !== `Bearer ${options.apiKey}`) {
      frontend.refused++;
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '16', 'grpc-message': 'invalid API key' },
        { endStream: true },
      );
      return;
    }
    const peer = (stream.session?.socket as TLSSocket | undefined)?.getPeerCertificate();
    const name = String(peer?.subject?.CN ?? '?');
    frontend.forwarded.set(name, (frontend.forwarded.get(name) ?? 0) + 1);
    const forward: http2.OutgoingHttpHeaders = {};
    for (const [key, value] of Object.entries(headers)) {
      if (key !== ':scheme' && key !== 'authorization' && value !== undefined) forward[key] = value;
    }
    let request: http2.ClientHttp2Stream;
    try {
      request = session().request(forward);
    } catch {
      // The session was going away as the call came in: a fresh one.
      upstream = undefined;
      request = session().request(forward);
    }
    request.on('error', () => {
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    stream.on('close', () => {
      if (!request.closed) request.close(http2.constants.NGHTTP2_CANCEL);
    });
    let trailers: http2.IncomingHttpHeaders = {};
    request.on('trailers', (received: http2.IncomingHttpHeaders) => {
      trailers = received;
    });
    request.on('response', (responseHeaders, flags) => {
      if (stream.closed) return;
      // A trailers-only answer (an error status) ends the stream with its headers.
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) {
        stream.respond(responseHeaders, { endStream: true });
        return;
      }
      stream.respond(responseHeaders, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers(trailers));
      request.pipe(stream);
    });
    stream.pipe(request);
  });
  server.listen(0, '127.0.0.1');
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  frontend.address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  return frontend;
}
