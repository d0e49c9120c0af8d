/**
 * TLS, mTLS and an API key on the connection to Temporal (docs/operations.md, "Temporal Cloud and
 * TLS"): the settings are checked at start with messages naming the setting; a worker process of the
 * service, given the CA, its client certificate, the server name and the API key, runs a workflow
 * through a frontend that demands all of them; a wrong CA, a missing server name, an untrusted client
 * certificate and a wrong API key each fail with a clear error.
 */
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEncryptor } from '../src/connections/encryption.js';
import { freePort } from '../src/devstack/process.js';
import { createDataConverter } from '../src/runtime/payloadStorage.js';
import {
  connectTemporal,
  connectWorker,
  temporalConnectionOptions,
  workflowIds,
  type TemporalTlsSettings,
} from '../src/temporal/connection.js';
import type { checkHealth } from '../workflows/index.js';
import { productionEnv, startService } from './helpers/serviceProcess.js';
import { stack } from './kit/stack.js';
import { useDatabase } from './kit/db.js';
import { makePki, startTlsFrontend, type Pki, type TlsFrontend } from './helpers/tlsFrontend.js';

const SERVER_NAME = 'temporal.test';
const API_KEY = `key-${randomUUID()}`;
let pki: Pki;
let frontend: TlsFrontend;

beforeAll(async () => {
  pki = makePki(SERVER_NAME);
  frontend = await startTlsFrontend({ pki, upstream: stack().temporalAddress, apiKey: API_KEY });
});
afterAll(async () => {
  await frontend.close();
  pki.remove();
});

function tlsSettings(
  overrides: Partial<Record<keyof TemporalTlsSettings, string | undefined>> = {},
): TemporalTlsSettings {
  return {
    TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.serverCa,
    TEMPORAL_TLS_CLIENT_CERT_PATH: pki.clientCert,
    TEMPORAL_TLS_CLIENT_KEY_PATH: pki.clientKey,
    TEMPORAL_TLS_SERVER_NAME: SERVER_NAME,
    TEMPORAL_API_KEY: API_KEY,
    ...overrides,
  } as TemporalTlsSettings;
}

function asEnv(settings: TemporalTlsSettings): Record<string, string> {
  return Object.fromEntries(
    Object.entries(settings).filter((entry): entry is [string, string] => entry[1] !== undefined),
  );
}

describe('TLS settings are checked at start', () => {
  it('names the setting for a missing file, a lone certificate or key, a non-PEM file, a mismatched key', () => {
    const check = (overrides: Parameters<typeof tlsSettings>[0]) => () =>
      temporalConnectionOptions(frontend.address, tlsSettings(overrides));
    expect(check({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: '/nonexistent/ca.pem' })).toThrow(
      /TEMPORAL_TLS_SERVER_CA_CERT_PATH=\/nonexistent\/ca\.pem cannot be read \(ENOENT\)/,
    );
    expect(check({ TEMPORAL_TLS_CLIENT_CERT_PATH: undefined })).toThrow(
      /TEMPORAL_TLS_CLIENT_KEY_PATH is set without TEMPORAL_TLS_CLIENT_CERT_PATH/,
    );
    expect(check({ TEMPORAL_TLS_CLIENT_KEY_PATH: undefined })).toThrow(
      /TEMPORAL_TLS_CLIENT_CERT_PATH is set without TEMPORAL_TLS_CLIENT_KEY_PATH/,
    );
    const notPem = join(pki.dir, 'not.pem');
    writeFileSync(notPem, 'hello');
    expect(check({ TEMPORAL_TLS_CLIENT_CERT_PATH: notPem })).toThrow(
      /TEMPORAL_TLS_CLIENT_CERT_PATH=\S+ is not a PEM file/,
    );
    const brokenPem = join(pki.dir, 'broken.pem');
    writeFileSync(brokenPem, '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n');
    expect(check({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: brokenPem })).toThrow(/holds no readable certificate/);
    expect(check({ TEMPORAL_TLS_CLIENT_KEY_PATH: pki.clientCert })).toThrow(/holds no readable private key/);
    expect(check({ TEMPORAL_TLS_CLIENT_KEY_PATH: pki.otherClientKey })).toThrow(
      /is not the private key of the certificate in TEMPORAL_TLS_CLIENT_CERT_PATH/,
    );
    expect(() => temporalConnectionOptions('x:1', { TEMPORAL_TLS: 'false', TEMPORAL_TLS_SERVER_NAME: 'a' })).toThrow(
      /TEMPORAL_TLS=false, but TLS settings/,
    );
    // An API key alone means TLS with the system's roots, as in Temporal's own configuration.
    expect(temporalConnectionOptions('x:1', { TEMPORAL_API_KEY: 'k' })).toEqual({
      address: 'x:1',
      tls: {},
      apiKey: 'k',
    });
    expect(temporalConnectionOptions('x:1', {})).toEqual({ address: 'x:1' });
  });

  it('a service process with a missing certificate file stops at once with that message', async () => {
    const { url } = await useDatabase();
    const service = startService({
      ...productionEnv(url),
      ...asEnv(tlsSettings({ TEMPORAL_TLS_CLIENT_CERT_PATH: join(pki.dir, 'missing.pem') })),
      TEMPORAL_ADDRESS: frontend.address,
      SERVICE_ROLE: 'api',
      PORT: String(await freePort()),
    });
    expect(await service.exited).toBe(1);
    expect(service.output()).toMatch(
      /^error: TEMPORAL_TLS_CLIENT_CERT_PATH=\S+missing\.pem cannot be read \(ENOENT\)/m,
    );
    expect(service.output()).not.toContain(API_KEY);
  }, 120_000);
});

describe('a Temporal frontend with mTLS and an API key', () => {
  it('the service worker and a client with the right settings run a workflow; every call carried the client certificate', async () => {
    const { pool, url } = await useDatabase();
    const env = productionEnv(url, {
      ...asEnv(tlsSettings()),
      TEMPORAL_ADDRESS: frontend.address,
      SERVICE_ROLE: 'worker',
    });
    const worker = startService(env);
    await worker.waitFor(/^ready\. Ctrl-C stops everything\./m, 300_000, 'the worker to be ready');

    const connection = await connectTemporal(temporalConnectionOptions(frontend.address, tlsSettings()));
    try {
      // The service's own data converter: its payloads are encrypted with its key.
      const encryptor = loadEncryptor({ env: { SERVICE_ENCRYPTION_KEY: env['SERVICE_ENCRYPTION_KEY'] } });
      const dataConverter = createDataConverter({ db: pool, encryptor });
      const client = new Client({ connection, namespace: stack().temporalNamespace, dataConverter });
      const token = randomUUID();
      const result = await client.workflow.execute<typeof checkHealth>('checkHealth', {
        taskQueue: env['TEMPORAL_TASK_QUEUE']!,
        workflowId: workflowIds.healthCheck(token),
        args: [token],
        workflowExecutionTimeout: '2 minutes',
      });
      expect(result.token).toBe(token);
      const stored = await pool.query('SELECT 1 FROM health_checks WHERE token = $1', [token]);
      expect(stored.rowCount).toBe(1);
    } finally {
      await connection.close();
    }
    // Everything went through the frontend with the client certificate (the worker knows no other address).
    expect(frontend.forwarded.get('client')).toBeGreaterThan(5);
    expect([...frontend.forwarded.keys()]).toEqual(['client']);
    worker.interrupt();
    expect(await worker.exited).toBe(0);
    expect(worker.output()).not.toContain(API_KEY);
  }, 400_000);

  it('fails with a clear error for a wrong CA, no server name, an untrusted client certificate, a wrong API key', async () => {
    const attempt = async (overrides: Parameters<typeof tlsSettings>[0]): Promise<string> => {
      const options = temporalConnectionOptions(frontend.address, tlsSettings(overrides));
      const client = await connectTemporal(options, 5000).then(
        async (c) => {
          await c.close();
          return 'connected';
        },
        (error: Error) => error.message,
      );
      const worker = await connectWorker(options).then(
        async (c) => {
          await c.close();
          return 'connected';
        },
        (error: Error) => error.message,
      );
      return `client: ${client}\nworker: ${worker}`;
    };
    const handshake = /The TLS handshake failed \(.+\): check TEMPORAL_TLS_SERVER_CA_CERT_PATH/;

    const wrongCa = await attempt({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.otherCa });
    expect(wrongCa).toMatch(
      /^client: Cannot connect to Temporal at 127\.0\.0\.1:\d+ \(TLS, client certificate, server name temporal\.test, API key\)/,
    );
    for (const line of wrongCa.split('\n')) expect(line).toMatch(handshake);
    expect(wrongCa).toMatch(/\(unable to verify the first certificate\)/);

    const noServerName = await attempt({ TEMPORAL_TLS_SERVER_NAME: undefined });
    for (const line of noServerName.split('\n')) expect(line).toMatch(handshake);

    const failuresBefore = frontend.handshakeFailures;
    const untrusted = await attempt({
      TEMPORAL_TLS_CLIENT_CERT_PATH: pki.otherClientCert,
      TEMPORAL_TLS_CLIENT_KEY_PATH: pki.otherClientKey,
    });
    for (const line of untrusted.split('\n')) {
      expect(line).toMatch(
        /The TLS handshake failed \(the server closed the connection after the handshake: it does not accept the client certificate\)/,
      );
    }
    expect(frontend.handshakeFailures).toBeGreaterThan(failuresBefore);

    const refusedBefore = frontend.refused;
    const wrongKey = await attempt({ TEMPORAL_API_KEY: 'not-the-key' });
    for (const line of wrongKey.split('\n'))
      expect(line).toMatch(/Cannot connect to Temporal at .*UNAUTHENTICATED|invalid API key/);
    expect(frontend.refused).toBeGreaterThan(refusedBefore);
    for (const message of [wrongCa, noServerName, untrusted, wrongKey]) expect(message).not.toContain('not-the-key');
    expect(frontend.forwarded.get('other-client')).toBeUndefined();
  }, 120_000);

  it('a service process with a wrong CA stops with a message naming the TLS settings', async () => {
    const { url } = await useDatabase();
    const service = startService({
      ...productionEnv(url),
      ...asEnv(tlsSettings({ TEMPORAL_TLS_SERVER_CA_CERT_PATH: pki.otherCa })),
      TEMPORAL_ADDRESS: frontend.address,
      SERVICE_ROLE: 'api',
      PORT: String(await freePort()),
    });
    // startStack gives the server 10 s to answer before it gives up.
    expect(await service.exited).toBe(1);
    expect(service.output()).toMatch(
      /error: Temporal is not reachable at 127\.0\.0\.1:\d+ \(namespace \S+, TLS\): .*TEMPORAL_TLS_SERVER_CA_CERT_PATH/,
    );
  }, 120_000);
});
