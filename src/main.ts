/**
 * `npm start` (through tsx), or its build `npm run serve` (`node dist/src/main.js`): the whole service.
 * Temporal (TEMPORAL_ADDRESS, or a dev server with its Web UI), Postgres (DATABASE_URL, or a local
 * cluster), migrations, the worker and the API. Local state lives in SERVICE_DATA_DIR (`.service-data/`)
 * and survives a restart. Ctrl-C stops everything cleanly.
 *
 * SERVICE_ROLE=api or SERVICE_ROLE=worker runs one half only, for scaling out against a Temporal
 * cluster and a managed Postgres (docs/operations.md).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { migrate } from './db/migrate.js';
import { DevStackError, startStack, type Stack } from './devstack/index.js';
import { redactUrl } from './devstack/postgres.js';
import { isServiceError, ServiceError } from './errors.js';
import { configureOutboundPolicy, OutboundPolicy } from './runtime/outbound.js';
import { startMetricsServer } from './metrics/server.js';
import { log } from './log.js';
import { createService, publicUrls, type Service } from './service.js';
import { loadSettings, type Settings } from './settings.js';
import { actionTaskQueue } from '../workflows/taskQueues.js';
import { temporalConnectionOptions } from './temporal/connection.js';
import { installServiceRuntime, type TemporalMetricsExport } from './temporal/logger.js';

const DEV_ENVIRONMENT = 'dev';

async function main(): Promise<void> {
  const settings = loadSettings();
  log.level = settings.SERVICE_LOG_LEVEL;
  // Before anything sends a request: the outbound request policy of this process (docs/operations.md).
  configureOutboundPolicy(new OutboundPolicy(settings.SERVICE_OUTBOUND_ALLOW));
  const dataDir = resolve(settings.SERVICE_DATA_DIR);
  const local = !settings.DATABASE_URL || !settings.TEMPORAL_ADDRESS;
  // The worker child of a supervised `all` process: its parent already said where everything is.
  const child = settings.SERVICE_SUPERVISED_CHILD === '1';
  // A supervised worker child starts as a warm standby: everything loaded and connected, it polls only
  // once its supervisor says so (when the worker before it died), so that a killed worker is replaced in
  // well under a second instead of the seconds a process start takes (issue 17's recovery).
  const standby = child && typeof process.send === 'function';
  let activated = !standby;
  const activation = new Promise<void>((resolve) => {
    if (!standby) return resolve();
    process.on('message', (message) => {
      if (message === 'activate') resolve();
    });
    // The supervisor is gone: a standby has nothing to finish.
    process.once('disconnect', () => {
      if (!activated) process.exit(0);
    });
  });
  // TLS and API key of TEMPORAL_ADDRESS, read and checked before anything starts (a missing file, a
  // key without its certificate: one message naming the setting).
  const temporalTlsSet = Object.entries(settings).some(
    ([name, value]) => value !== undefined && (name.startsWith('TEMPORAL_TLS') || name === 'TEMPORAL_API_KEY'),
  );
  if (!settings.TEMPORAL_ADDRESS && temporalTlsSet) {
    throw new ServiceError(
      'invalid_settings',
      'TEMPORAL_TLS_* or TEMPORAL_API_KEY is set, but TEMPORAL_ADDRESS is not: they apply to a Temporal server you name. See docs/operations.md.',
    );
  }
  const reach = settings.TEMPORAL_ADDRESS ? temporalConnectionOptions(settings.TEMPORAL_ADDRESS, settings) : undefined;
  const say = (line: string): void => {
    if (!child) console.log(line);
  };
  // With SERVICE_ROLE=all the worker runs in a child process that is restarted when it dies: a
  // script that exhausts memory or never yields can take its worker process down
  // (docs/architecture.md), and must not take the API with it.
  const supervise = settings.SERVICE_ROLE === 'all' && settings.SERVICE_SUPERVISE_WORKER !== '0';
  const runsWorker = settings.SERVICE_ROLE === 'worker' || (settings.SERVICE_ROLE === 'all' && !supervise);
  // The service's logger for the SDK's lines too, where an expected run failure (an ActionError) is one
  // INFO line; and the SDK's worker metrics, from the process that runs the worker (docs/operations.md "Metrics").
  installServiceRuntime({ metrics: runsWorker ? temporalMetricsExport(settings) : undefined });

  const cleanups: (() => Promise<void>)[] = [];
  const stopAll = async (): Promise<void> => {
    for (const cleanup of cleanups.reverse())
      await cleanup().catch((error: unknown) => log.error({ err: error }, 'stopping failed'));
  };
  let stopping = false;
  let wake: () => void = () => undefined;
  const stopped = new Promise<void>((resolve) => (wake = resolve));
  const shutdown = (): void => {
    // A standby never polled: no run is in its hands.
    if (!activated) process.exit(0);
    if (stopping) return;
    stopping = true;
    say('\nstopping…');
    wake();
  };
  process.on('SIGINT', shutdown);
  process.on('SIGTERM', shutdown);

  // The ports a process listens on: a standby binds them once it takes over (its predecessor held them).
  const startMetrics = async (): Promise<void> => {
    if (settings.METRICS_PORT === undefined) return;
    const metrics = await startMetricsServer({
      host: settings.METRICS_HOST,
      port: settings.METRICS_PORT,
      token: settings.METRICS_TOKEN,
    });
    cleanups.push(() => metrics.close());
    const what = settings.SERVICE_ROLE === 'worker' ? 'worker' : runsWorker ? 'API and worker' : 'API';
    console.log(`metrics    ${metrics.url}/metrics   (${what} process)`);
  };

  try {
    if (!standby) await startMetrics();
    if (local) console.log(`starting the integration service (local state in ${dataDir})…`);
    const stack: Stack = await startStack({
      dataDir,
      ui: true,
      temporalPort: 7233,
      ...(reach ? { temporalConnection: reach } : {}),
    });
    cleanups.push(() => stack.stop());
    say(`Temporal   ${stack.temporal.address}  (${stack.temporal.version})`);
    if (stack.temporal.uiUrl) say(`Web UI     ${stack.temporal.uiUrl}`);
    say(`Postgres   ${redactUrl(stack.postgres.url)}  (${stack.postgres.version})`);

    const service = await createService(
      {
        ...settings,
        DATABASE_URL: stack.postgres.url,
        TEMPORAL_ADDRESS: stack.temporal.address,
        TEMPORAL_NAMESPACE: stack.temporal.namespace,
      },
      {
        temporalConnection: reach ?? {},
        // Outside local mode a missing SERVICE_ENCRYPTION_KEY is an error; locally one is generated once.
        ...(local ? { encryptionKeyFile: join(dataDir, 'encryption.key') } : {}),
        workers: runsWorker,
        apiDeps: { dashboard: { temporalUiUrl: stack.temporal.uiUrl, temporalNamespace: stack.temporal.namespace } },
      },
    );
    cleanups.push(() => service.stop());
    const applied = await migrate(service.db);
    say(`migrations ${applied.length === 0 ? 'up to date' : `applied ${applied.length}`}`);

    const queues = `${settings.TEMPORAL_TASK_QUEUE}, ${actionTaskQueue(settings.TEMPORAL_TASK_QUEUE)}`;
    if (supervise) {
      const supervisor = superviseWorker(settings.SERVICE_WORKER_STANDBY === 'true', {
        DATABASE_URL: stack.postgres.url,
        TEMPORAL_ADDRESS: stack.temporal.address,
        TEMPORAL_NAMESPACE: stack.temporal.namespace,
        // Locally the key was generated into the data folder; the child reads the same key.
        SERVICE_ENCRYPTION_KEY:
          settings.SERVICE_ENCRYPTION_KEY ?? readFileSync(join(dataDir, 'encryption.key'), 'utf8').trim(),
        // The worker is a process of its own, with metrics of its own: on the next port.
        ...(settings.METRICS_PORT ? { METRICS_PORT: String(settings.METRICS_PORT + 1) } : {}),
      });
      // Stopped after the API closed (cleanups run in reverse), before the stack stops.
      cleanups.splice(cleanups.length - 1, 0, () => supervisor.stop());
      console.log(`worker     task queues ${queues} (child process, restarted if it dies)`);
    }
    if (standby) {
      // Loaded and connected; the health and metrics ports wait until this process takes over.
      await service.prepare();
      process.send?.('standing-by');
      await activation;
      activated = true;
      await startMetrics();
    }
    // The worker (when this process runs it: health port, polling, background jobs), then the API.
    await service.start();
    if (standby) {
      // Polling: the supervisor may start the next standby. The channel no longer keeps this process up.
      process.send?.('polling');
      process.channel?.unref();
    }
    if (runsWorker) {
      if (settings.SERVICE_HEALTH_PORT !== undefined)
        say(`health     http://${settings.HOST}:${settings.SERVICE_HEALTH_PORT}/readyz`);
      say(`worker     task queues ${queues}`);
    }
    if (settings.SERVICE_ROLE !== 'worker') {
      const { publicUrl } = publicUrls(settings);
      console.log(`API        ${publicUrl}   (reference: ${publicUrl}/reference, dashboard: ${publicUrl}/dashboard)`);
    }

    if (local && !child) {
      const key = await ensureDevEnvironment(service.parts.connections.environments, dataDir);
      console.log(`secret key ${key}   (environment "${DEV_ENVIRONMENT}"; send it as Authorization: Bearer …)`);
    } else if (settings.SERVICE_ROLE !== 'worker') {
      // A new deployment has no environment yet, so nothing could call the API: make the first one (once,
      // under a lock, however many API processes start at once) with the declared key, or a generated key
      // shown this once (only a hash is stored; `service environment rotate-key` replaces a lost one).
      const declared = settings.SERVICE_FIRST_SECRET_KEY;
      const first = await service.parts.connections.environments.createFirst({
        name: settings.SERVICE_FIRST_ENVIRONMENT,
        secretKey: declared,
      });
      if (first && declared !== undefined) {
        console.log(`created environment "${first.environment.name}" with the secret key of SERVICE_FIRST_SECRET_KEY`);
      } else if (first) {
        console.log(
          `created environment "${first.environment.name}"; its secret key, shown only now: ${first.secretKey}`,
        );
      }
    }
    say('ready. Ctrl-C stops everything.');
    await Promise.race([stopped, service.done]);
  } finally {
    await stopAll();
    say('stopped.');
  }
}

/** The Temporal SDK's metrics exporter the settings ask for, if any. */
function temporalMetricsExport(settings: Settings): TemporalMetricsExport | undefined {
  if (settings.TEMPORAL_METRICS_PROMETHEUS_ADDRESS) {
    return { prometheus: { bindAddress: settings.TEMPORAL_METRICS_PROMETHEUS_ADDRESS } };
  }
  if (settings.TEMPORAL_METRICS_OTEL_URL) {
    return {
      otel: { url: settings.TEMPORAL_METRICS_OTEL_URL, http: settings.TEMPORAL_METRICS_OTEL_PROTOCOL === 'http' },
    };
  }
  return undefined;
}

/**
 * Runs the worker as a child process of this one (same entry, SERVICE_ROLE=worker) and replaces it when
 * it exits unexpectedly. Beside the active child it keeps a warm standby: a second child that has
 * loaded the code and the workflow bundle and connected to Postgres and Temporal, and waits to be told
 * to poll. When the active child dies, the standby takes over at once (its runs then wait only for
 * Temporal's workflow task timeout: docs/architecture.md "Recovery"), and a new standby is started
 * once the new active child polls. Without a standby (it died too, or was not ready yet), a child is
 * started at once when the one that died had run for a while, else after 1 s, then twice as long after
 * each quick failure, up to 30 s. SERVICE_WORKER_STANDBY=false turns the standby off (one process less).
 */
function superviseWorker(withStandby: boolean, env: Record<string, string>): { stop(): Promise<void> } {
  let active: ChildProcess | undefined;
  let standby: ChildProcess | undefined;
  let stopping = false;
  let delay = 0;
  const alive = (child: ChildProcess | undefined): child is ChildProcess =>
    child !== undefined && child.exitCode === null && child.signalCode === null;
  const spawnChild = (): ChildProcess =>
    spawn(process.execPath, [...process.execArgv, fileURLToPath(import.meta.url)], {
      env: {
        ...process.env,
        ...env,
        SERVICE_ROLE: 'worker',
        SERVICE_SUPERVISED_CHILD: '1',
      },
      stdio: ['inherit', 'inherit', 'inherit', 'ipc'],
    });
  const startStandby = (): void => {
    if (!withStandby || stopping || alive(standby)) return;
    const child = spawnChild();
    standby = child;
    child.on('message', (message) => {
      if (message === 'standing-by' && standby === child) console.log(`worker     standby ready (pid ${child.pid})`);
    });
    child.on('exit', (code, signal) => {
      if (stopping || standby !== child) return;
      standby = undefined;
      // It was told to stop (Ctrl-C reaches the whole process group before this process's own handler).
      if (code === 0) return;
      // A standby that cannot start (Postgres or Temporal unreachable) is tried again, with the back-off.
      delay = Math.min(Math.max(delay * 2, 1000), 30_000);
      log.warn(
        { component: 'supervisor', code, signal },
        `worker standby exited (${signal ?? `code ${code}`}); starting another in ${delay / 1000} s`,
      );
      setTimeout(startStandby, delay);
    });
  };
  const activate = (child: ChildProcess): void => {
    const activatedAt = Date.now();
    active = child;
    child.on('message', (message) => {
      // Polling: a standby may be prepared behind it (not earlier, so that both do not start at once).
      if (message === 'polling') startStandby();
    });
    child.on('exit', (code, signal) => {
      if (stopping || active !== child) return;
      active = undefined;
      // A worker that ran for 15 s got past its start: its successor starts at once. One that died
      // sooner may be failing to start: the back-off grows.
      delay = Date.now() - activatedAt > 15_000 ? 0 : Math.min(Math.max(delay * 2, 1000), 30_000);
      if (alive(standby)) {
        const next = standby;
        standby = undefined;
        log.warn(
          { component: 'supervisor', code, signal },
          `worker exited (${signal ?? `code ${code}`}); the standby takes over`,
        );
        activate(next);
        return;
      }
      log.warn(
        { component: 'supervisor', code, signal },
        `worker exited (${signal ?? `code ${code}`}); starting it again in ${delay / 1000} s`,
      );
      setTimeout(() => {
        if (!stopping) activate(spawnChild());
      }, delay);
    });
    child.send('activate');
  };
  activate(spawnChild());
  return {
    async stop() {
      stopping = true;
      await Promise.all(
        [active, standby].filter(alive).map(async (child) => {
          const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
          child.kill('SIGTERM');
          const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
          await exited;
          clearTimeout(timer);
        }),
      );
    },
  };
}

/**
 * The local development environment and its secret key. Only a hash of a key is stored in Postgres,
 * so the key itself is kept beside the local cluster (mode 0600) to be printed at every start.
 */
async function ensureDevEnvironment(
  environments: Service['parts']['connections']['environments'],
  dataDir: string,
): Promise<string> {
  const keyFile = join(dataDir, 'dev-secret-key');
  const existing = await environments.getByName(DEV_ENVIRONMENT);
  if (existing && existsSync(keyFile)) return readFileSync(keyFile, 'utf8').trim();
  const secretKey = existing
    ? await environments.rotateSecretKey(existing.id)
    : (await environments.create({ name: DEV_ENVIRONMENT })).secretKey;
  writeFileSync(keyFile, `${secretKey}\n`, { mode: 0o600 });
  return secretKey;
}

main().catch((error: unknown) => {
  if (error instanceof DevStackError || isServiceError(error)) console.error(`error: ${error.message}`);
  else console.error(error);
  process.exit(1);
});
