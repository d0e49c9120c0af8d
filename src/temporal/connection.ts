import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Connection, type TLSConfig } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { ServiceError } from '../errors.js';
import { syncEntityId } from './runAuthority.js';
import { tlsHandshakeProblem } from './tlsProbe.js';

/**
 * The only module that opens connections to Temporal: every connection of the service, its tests and
 * benchmarks (the API's client, the worker's native connection, readiness checks, the dev stack's
 * probes) is made here from `TemporalConnectionOptions` (address, TLS and API key). Task queues are in
 * taskQueues.ts; workflow ids here and in runAuthority.ts.
 */
/** Address, TLS and API key of the Temporal frontend: what both the client and the worker connect with. */
export interface TemporalConnectionOptions {
  address: string;
  /** Undefined: plaintext. */
  tls?: TLSConfig | undefined;
  apiKey?: string | undefined;
}

/** The settings (src/settings.ts) that shape the connection; the names are Temporal's own. */
export interface TemporalTlsSettings {
  TEMPORAL_TLS?: 'true' | 'false' | undefined;
  TEMPORAL_TLS_SERVER_CA_CERT_PATH?: string | undefined;
  TEMPORAL_TLS_CLIENT_CERT_PATH?: string | undefined;
  TEMPORAL_TLS_CLIENT_KEY_PATH?: string | undefined;
  TEMPORAL_TLS_SERVER_NAME?: string | undefined;
  TEMPORAL_API_KEY?: string | undefined;
}

function invalid(message: string): ServiceError {
  return new ServiceError('invalid_temporal_tls', `${message} See docs/operations.md, "Temporal Cloud and TLS".`);
}

function readPem(variable: string, path: string): Buffer {
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw invalid(`${variable}=${path} cannot be read (${reason}).`);
  }
  if (!content.toString('latin1').includes('-----BEGIN ')) throw invalid(`${variable}=${path} is not a PEM file.`);
  return content;
}

function parseCertificate(variable: string, path: string, pem: Buffer): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (error) {
    throw invalid(`${variable}=${path} holds no readable certificate (${(error as Error).message}).`);
  }
}

/**
 * Reads and checks the TLS files at start, so that a wrong path or a mismatched pair stops the process
 * with a message naming the setting, instead of failing later inside a gRPC handshake. Returns the
 * options every connection of the process uses.
 */
export function temporalConnectionOptions(address: string, settings: TemporalTlsSettings): TemporalConnectionOptions {
  const {
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: caPath,
    TEMPORAL_TLS_CLIENT_CERT_PATH: certPath,
    TEMPORAL_TLS_CLIENT_KEY_PATH: keyPath,
    TEMPORAL_TLS_SERVER_NAME: serverName,
    TEMPORAL_API_KEY: apiKey,
  } = settings;
  const tlsAsked = caPath !== undefined || certPath !== undefined || keyPath !== undefined || serverName !== undefined;
  if (settings.TEMPORAL_TLS === 'false' && tlsAsked) {
    throw invalid('TEMPORAL_TLS=false, but TLS settings (TEMPORAL_TLS_*) are set: remove one or the other.');
  }
  if ((certPath === undefined) !== (keyPath === undefined)) {
    throw invalid(
      certPath === undefined
        ? 'TEMPORAL_TLS_CLIENT_KEY_PATH is set without TEMPORAL_TLS_CLIENT_CERT_PATH: mTLS needs both.'
        : 'TEMPORAL_TLS_CLIENT_CERT_PATH is set without TEMPORAL_TLS_CLIENT_KEY_PATH: mTLS needs both.',
    );
  }
  // As Temporal's own configuration: an API key implies TLS unless TLS is turned off explicitly.
  const useTls =
    settings.TEMPORAL_TLS === 'true' || (settings.TEMPORAL_TLS !== 'false' && (tlsAsked || apiKey !== undefined));
  if (!useTls) return { address, ...(apiKey !== undefined ? { apiKey } : {}) };

  const tls: TLSConfig = {};
  if (serverName !== undefined) tls.serverNameOverride = serverName;
  if (caPath !== undefined) {
    const ca = readPem('TEMPORAL_TLS_SERVER_CA_CERT_PATH', caPath);
    parseCertificate('TEMPORAL_TLS_SERVER_CA_CERT_PATH', caPath, ca);
    tls.serverRootCACertificate = ca;
  }
  if (certPath !== undefined && keyPath !== undefined) {
    const crt = readPem('TEMPORAL_TLS_CLIENT_CERT_PATH', certPath);
    const key = readPem('TEMPORAL_TLS_CLIENT_KEY_PATH', keyPath);
    const certificate = parseCertificate('TEMPORAL_TLS_CLIENT_CERT_PATH', certPath, crt);
    let privateKey;
    try {
      privateKey = createPrivateKey(key);
    } catch (error) {
      throw invalid(
        `TEMPORAL_TLS_CLIENT_KEY_PATH=${keyPath} holds no readable private key (${(error as Error).message}).`,
      );
    }
    if (!certificate.checkPrivateKey(privateKey)) {
      throw invalid(
        `TEMPORAL_TLS_CLIENT_KEY_PATH=${keyPath} is not the private key of the certificate in TEMPORAL_TLS_CLIENT_CERT_PATH=${certPath}.`,
      );
    }
    tls.clientCertPair = { crt, key };
  }
  return { address, tls, ...(apiKey !== undefined ? { apiKey } : {}) };
}

/** The same, from raw environment variables (the CLI's local runs, which do not load the settings). */
export function temporalConnectionOptionsFromEnv(
  address: string,
  env: Record<string, string | undefined>,
): TemporalConnectionOptions {
  const tls = env['TEMPORAL_TLS'];
  if (tls !== undefined && tls !== 'true' && tls !== 'false')
    throw invalid(`TEMPORAL_TLS is '${tls}': use true or false.`);
  const value = (name: string): string | undefined => (env[name] === '' ? undefined : env[name]);
  return temporalConnectionOptions(address, {
    TEMPORAL_TLS: tls,
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: value('TEMPORAL_TLS_SERVER_CA_CERT_PATH'),
    TEMPORAL_TLS_CLIENT_CERT_PATH: value('TEMPORAL_TLS_CLIENT_CERT_PATH'),
    TEMPORAL_TLS_CLIENT_KEY_PATH: value('TEMPORAL_TLS_CLIENT_KEY_PATH'),
    TEMPORAL_TLS_SERVER_NAME: value('TEMPORAL_TLS_SERVER_NAME'),
    TEMPORAL_API_KEY: value('TEMPORAL_API_KEY'),
  });
}

/** Says what was tried, without the API key, for an error message. */
function describeConnection(options: TemporalConnectionOptions): string {
  const parts = [options.tls ? 'TLS' : 'plaintext'];
  if (options.tls?.clientCertPair) parts.push('client certificate');
  if (options.tls?.serverNameOverride) parts.push(`server name ${options.tls.serverNameOverride}`);
  if (options.apiKey !== undefined) parts.push('API key');
  return `${options.address} (${parts.join(', ')})`;
}

async function connectError(options: TemporalConnectionOptions, error: unknown): Promise<ServiceError> {
  // The SDK wraps the server's answer ("16 UNAUTHENTICATED: …") in a cause.
  const reasons: string[] = [];
  for (let current: unknown = error; current instanceof Error && reasons.length < 3; current = current.cause) {
    reasons.push((current.message.split('\n')[0] ?? current.name).replace(/\.$/, ''));
  }
  const reason = reasons.length > 0 ? reasons.join(': ') : String(error);
  const handshake = await tlsHandshakeProblem(options.address, options.tls);
  // A handshake refused by either side: say why, and name the settings that decide it.
  const hint =
    handshake === undefined
      ? ''
      : ` The TLS handshake failed (${handshake}): check TEMPORAL_TLS_SERVER_CA_CERT_PATH, TEMPORAL_TLS_SERVER_NAME and the client certificate.`;
  return new ServiceError(
    'temporal_unreachable',
    `Cannot connect to Temporal at ${describeConnection(options)}: ${reason}.${hint}`,
    { cause: error },
  );
}

/**
 * A client connection as the SDK makes it, its failure untranslated: for the dev stack's probes, which
 * try again and again while a server starts and report on their own when it never answers.
 */
export async function probeConnection(
  options: TemporalConnectionOptions,
  connectTimeoutMs: number,
  channelArgs?: Record<string, number | string>,
): Promise<Connection> {
  return Connection.connect({
    address: options.address,
    connectTimeout: connectTimeoutMs,
    ...(channelArgs ? { channelArgs } : {}),
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
  });
}

/**
 * The largest message the client takes from Temporal. gRPC's default, 4 MiB, is less than one page of a
 * long run's history: a page of 1,000 events of a 1,000,000-record backfill was 42 MB (each `svc.get`
 * step records its answer), and reading it failed RESOURCE_EXHAUSTED, in the run watch, the status read
 * from history, GET /runs/:id/history and bench/backfill.ts alike.
 */
export const RECEIVE_MESSAGE_LIMIT_BYTES = 512 * 1024 * 1024;

/** A client connection (the API, the workers' helpers); fails with a message naming address and TLS. */
export async function connectTemporal(
  options: TemporalConnectionOptions,
  connectTimeoutMs = 10_000,
  /** gRPC channel arguments, over the received-message limit above. */
  channelArgs?: Record<string, number | string>,
): Promise<Connection> {
  try {
    return await probeConnection(options, connectTimeoutMs, {
      'grpc.max_receive_message_length': RECEIVE_MESSAGE_LIMIT_BYTES,
      ...channelArgs,
    });
  } catch (error) {
    throw await connectError(options, error);
  }
}

/**
 * A connection for readiness checks only: lazy (it connects at its first call) and without the SDK's
 * retry interceptor, so a check is one call that ends by its deadline. With the default retries a
 * check made while Temporal is down leaves a retry timer running for up to ~20 s, and one that fires
 * after the connection was closed at shutdown throws "Channel has been shut down" out of a timer.
 */
export function checksConnection(options: TemporalConnectionOptions): Connection {
  return Connection.lazy({
    address: options.address,
    interceptors: [],
    ...(options.tls ? { tls: options.tls } : {}),
    ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
  });
}

/** The worker's native (Core) connection, with the same TLS and API key. */
export async function connectWorker(options: TemporalConnectionOptions): Promise<NativeConnection> {
  try {
    return await NativeConnection.connect({
      address: options.address,
      ...(options.tls ? { tls: options.tls } : {}),
      ...(options.apiKey !== undefined ? { apiKey: options.apiKey } : {}),
    });
  } catch (error) {
    throw await connectError(options, error);
  }
}

/** Workflow ids are business keys, so a second start of the same thing is refused by Temporal itself. */
export const workflowIds = {
  healthCheck: (token: string): string => `health:${token}`,
};

/** The sync entity workflow of one sync of one connection (ARCHITECTURE.md "The durable execution model"). */
export function syncWorkflowId(scope: {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  syncName: string;
}): string {
  return syncEntityId(scope);
}
