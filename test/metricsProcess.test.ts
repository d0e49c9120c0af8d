/**
 * The metrics of the service's processes as `npm start` runs them (src/main.ts): a worker's own
 * `GET /metrics` on METRICS_PORT, and the Temporal SDK's worker metrics, served to Prometheus on
 * TEMPORAL_METRICS_PROMETHEUS_ADDRESS or pushed to an OpenTelemetry collector (a fake OTLP/HTTP one
 * on loopback here); with SERVICE_ROLE=all, the API process and its worker child each on a port. And
 * the settings that are refused.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../src/devstack/process.js';
import { loadSettings } from '../src/settings.js';
import { eventually } from './helpers/eventually.js';
import { stack, uniqueName } from './kit/stack.js';
import { useDatabase } from './kit/db.js';
import { deferCleanup } from './kit/cleanup.js';
import { startFakeUpstream } from './kit/upstream.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const TSX_LOADER = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;

/**
 * A service process of its own (node with tsx's loader, so that SIGTERM reaches main.ts), a worker
 * unless `env` says otherwise; stopped after the file.
 */
async function startWorker(env: Record<string, string>): Promise<{ output(): string }> {
  const { url } = await useDatabase();
  const { temporalAddress, temporalNamespace } = stack();
  const child = spawn(process.execPath, ['--import', TSX_LOADER, join(REPO, 'src/main.ts')], {
    cwd: REPO,
    env: {
      ...process.env,
      SERVICE_ROLE: 'worker',
      DATABASE_URL: url,
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: temporalNamespace,
      TEMPORAL_TASK_QUEUE: uniqueName('metrics'),
      SERVICE_ENCRYPTION_KEY: randomBytes(32).toString('base64'),
      SERVICE_DATA_DIR: join(REPO, '.service-data-unused'),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  deferCleanup(async () => {
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    await exited;
    clearTimeout(timer);
  });
  const exitedEarly = exited.then((code) => {
    throw new Error(`the worker exited (${code}) before it was ready:\n${output}`);
  });
  await Promise.race([
    eventually(async () => (/^ready\./m.test(output) ? true : undefined), 180_000, 'the worker to be ready'),
    exitedEarly,
  ]);
  return { output: () => output };
}

describe('a worker process', () => {
  it('serves its metrics on METRICS_PORT and the Temporal SDK’s on TEMPORAL_METRICS_PROMETHEUS_ADDRESS', async () => {
    const metricsPort = await freePort();
    const sdkPort = await freePort();
    const worker = await startWorker({
      METRICS_PORT: String(metricsPort),
      TEMPORAL_METRICS_PROMETHEUS_ADDRESS: `127.0.0.1:${sdkPort}`,
    });
    expect(worker.output()).toContain(`metrics    http://127.0.0.1:${metricsPort}/metrics   (worker process)`);
    const own = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(own.status).toBe(200);
    const text = await own.text();
    expect(text).toContain('# TYPE service_sync_runs_started_total counter');
    expect(text).toContain('# TYPE service_retention_deleted_rows_total counter');
    expect(text).toMatch(/^nodejs_heap_size_used_bytes \d+/m);
    // The retention job ran once at start, without error.
    expect(text).toMatch(/^service_retention_last_success_timestamp_seconds \d/m);
    // The SDK's exporter: its pollers report as soon as the worker polls.
    const sdk = await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${sdkPort}/metrics`);
        const body = await response.text();
        return /^temporal_num_pollers\{/m.test(body) ? body : undefined;
      },
      60_000,
      'the Temporal SDK metrics',
    );
    expect(sdk).toMatch(/^temporal_worker_start_total\{/m);
  }, 300_000);

  it('pushes the Temporal SDK’s metrics to an OpenTelemetry collector (OTLP/HTTP)', async () => {
    // The kit's fake upstream as the collector: it records each push (the protobuf's metric names are
    // ASCII, readable in the body as text).
    const collector = await startFakeUpstream((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
    await startWorker({
      TEMPORAL_METRICS_OTEL_URL: `${collector.url}/v1/metrics`,
      TEMPORAL_METRICS_OTEL_PROTOCOL: 'http',
    });
    const push = await eventually(
      async () => collector.requests.find((r) => r.body.includes('temporal_num_pollers')),
      60_000,
      'a push to the collector',
    );
    expect(push.url).toBe('/v1/metrics');
    expect(push.headers['content-type']).toContain('application/x-protobuf');
  }, 300_000);
});

describe('SERVICE_ROLE=all', () => {
  it('serves the API process’s metrics on METRICS_PORT and its worker child’s on METRICS_PORT + 1', async () => {
    // Two free ports side by side.
    let metricsPort = 0;
    for (let attempt = 0; attempt < 20 && metricsPort === 0; attempt++) {
      const candidate = await freePort();
      if (candidate < 65_535 && (await freePort(candidate + 1).catch(() => 0)) === candidate + 1)
        metricsPort = candidate;
    }
    expect(metricsPort).toBeGreaterThan(0);
    const apiPort = await freePort();
    const service = await startWorker({
      SERVICE_ROLE: 'all',
      PORT: String(apiPort),
      METRICS_PORT: String(metricsPort),
    });
    expect(service.output()).toContain(`metrics    http://127.0.0.1:${metricsPort}/metrics   (API process)`);
    expect((await fetch(`http://127.0.0.1:${apiPort}/health`)).status).toBeLessThan(500);
    const api = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(api).toMatch(
      /^service_http_request_duration_seconds_count\{method="GET",route="\/health",status="200"\} 1$/m,
    );
    // The worker child counts what happens in it: its retention purge ran at start.
    const worker = await eventually(
      async () => {
        const response = await fetch(`http://127.0.0.1:${metricsPort + 1}/metrics`).catch(() => undefined);
        const text = await response?.text();
        return text !== undefined && /^service_retention_last_success_timestamp_seconds \d/m.test(text)
          ? text
          : undefined;
      },
      120_000,
      'the worker child’s metrics',
    );
    expect(worker).not.toMatch(/route="\/health"/);
  }, 300_000);
});

describe('metrics settings', () => {
  it('refuse a metrics listener reachable from other machines without a token, and two SDK exporters', () => {
    expect(() => loadSettings({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0' })).toThrow(
      /METRICS_HOST: .*0\.0\.0\.0.*set METRICS_TOKEN/,
    );
    expect(
      loadSettings({ METRICS_PORT: '9464', METRICS_HOST: '0.0.0.0', METRICS_TOKEN: 'a'.repeat(32) }).METRICS_HOST,
    ).toBe('0.0.0.0');
    expect(loadSettings({ METRICS_PORT: '9464' }).METRICS_HOST).toBe('127.0.0.1');
    expect(() => loadSettings({ METRICS_TOKEN: 'short' })).toThrow(/METRICS_TOKEN: must be at least 16 characters/);
    expect(() =>
      loadSettings({
        TEMPORAL_METRICS_PROMETHEUS_ADDRESS: '127.0.0.1:9465',
        TEMPORAL_METRICS_OTEL_URL: 'http://127.0.0.1:4317',
      }),
    ).toThrow(/not both/);
    expect(() => loadSettings({ TEMPORAL_METRICS_PROMETHEUS_ADDRESS: '9465' })).toThrow(
      /TEMPORAL_METRICS_PROMETHEUS_ADDRESS: expected host:port/,
    );
  });
});
