/**
 * A runtime worker in a process of its own, for the tests that kill it (SIGKILL in the middle of a
 * sync) or that let a script exhaust its memory. Configured through the environment; prints `ready`
 * once polling. Run with `tsx test/kit/workerProcess.ts`.
 */
import { Client } from '@temporalio/client';
import type { DeployActivityDeps } from '../../activities/deploy.js';
import { createConnections } from '../../src/connections/index.js';
import { createPostgresDeploymentStore } from '../../src/deploy/store.js';
import type { ActionDefinition } from '../../src/runtime/definitions.js';
import { createPool } from '../../src/db/pool.js';
import { outboundPolicy } from '../../src/runtime/outbound.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { LOG_LEVELS, log, setLogDestination } from '../../src/log.js';
import { installServiceRuntime } from '../../src/temporal/logger.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { createServiceWorkers } from '../../src/service.js';
import { fakeApiCatalog, runtimeDeps, TestConnections, testEncryptor } from './testConnections.js';
import { connectTemporal, connectWorker } from '../../src/temporal/connection.js';

// Dies with the process that started it. The parent holds our stdin's other end: when the parent is
// gone (its test finished, or the test runner was killed, SIGKILL included) the pipe closes. A clean-clone
// CI run once left this worker running 28 minutes after the suite, reparented to init and retrying the
// stopped Temporal server forever. The parent's pid changing is checked too (a parent that did not
// give a pipe).
const parent = process.ppid;
const orphaned = (why: string): void => {
  process.stderr.write(`workerProcess: ${why}; exiting\n`);
  process.exit(1);
};
process.stdin.on('end', () => orphaned('the parent closed the lifeline'));
process.stdin.on('error', () => orphaned('the lifeline broke'));
process.stdin.resume();
setInterval(() => {
  if (process.ppid !== parent) orphaned(`the parent ${parent} is gone`);
}, 500).unref();

function required(name: string): string {
  const value = process.env[name];
  if (!value) throw new Error(`workerProcess: ${name} is not set`);
  return value;
}

// The service's logger, as src/main.ts installs it; WORKER_LOG_LEVEL=info shows its INFO lines. On stderr:
// stdout says `ready` and nothing else (a warning saying "already" must not look like it).
log.level = LOG_LEVELS.find((level) => level === process.env['WORKER_LOG_LEVEL']) ?? 'warn';
setLogDestination('stderr');
installServiceRuntime();
const db = createPool({ url: required('DATABASE_URL'), max: 10, applicationName: 'runtime-test-worker' });
// WORKER_API_KEY: the connections' credential, for the tests that look for it where it must not be.
// WORKER_CONNECTIONS=postgres: the real connections instead, read from the database on every request as
// the service's worker does (integration `fake-api`, an API key, base URL API_BASE_URL); the test imports
// the connection with the runtime's key (testConnections.ts `testEncryptor`).
const connections =
  process.env['WORKER_CONNECTIONS'] === 'postgres'
    ? createConnections({
        db,
        encryptor: testEncryptor(),
        callbackUrl: 'http://127.0.0.1/oauth/callback',
        catalog: fakeApiCatalog(required('API_BASE_URL')),
      }).service
    : new TestConnections({ baseUrl: required('API_BASE_URL') }, process.env['WORKER_API_KEY'] || undefined);
// The fake API of the test that started this worker, and no other local address.
outboundPolicy().allow(new URL(required('API_BASE_URL')).host);
const connection = await connectWorker({ address: required('TEMPORAL_ADDRESS') });
const clientConnection = await connectTemporal({ address: required('TEMPORAL_ADDRESS') });
const client = new Client({
  connection: clientConnection,
  namespace: required('TEMPORAL_NAMESPACE'),
  dataConverter: createDataConverter({ db }),
});
const runtime = runtimeDeps(db, connections, new Map<string, ActionDefinition>(), client);
// WORKER_DEPLOY=1: a deploy's apply too (activities/deploy.ts), over the real connections table.
function deployActivities(deps: typeof runtime): DeployActivityDeps | undefined {
  if (process.env['WORKER_DEPLOY'] !== '1') return undefined;
  const stored = createConnections({ db, encryptor: deps.encryptor, callbackUrl: 'http://127.0.0.1/oauth/callback' });
  return {
    deployments: createPostgresDeploymentStore({ db }),
    records: deps.records,
    syncs: createSyncControl({ client, taskQueue: required('TASK_QUEUE') }),
    connectionIds: async (environmentId, integrationId) =>
      (await stored.service.listConnections(environmentId, { integrationId })).map((c) => c.connection_id),
  };
}
// Both queues, as the service's worker process serves them (src/main.ts).
const workers = await createServiceWorkers({
  db,
  runtime: { ...runtime, deploy: deployActivities(runtime) },
  connection,
  namespace: required('TEMPORAL_NAMESPACE'),
  taskQueue: required('TASK_QUEUE'),
  workflowBundle: { codePath: required('WORKFLOW_BUNDLE') },
  dataConverter: createDataConverter({ db }),
  tuning: process.env['WORKER_REUSE_V8'] === '0' ? { reuseV8Context: false } : {},
});
process.on('SIGTERM', () => {
  workers.shutdown();
  // A shutdown waits for the tasks in flight; a test that asked for it does not wait forever.
  setTimeout(() => orphaned('SIGTERM and no shutdown within 15 s'), 15_000).unref();
});
// WORKER_STANDBY=1: a warm standby (as src/main.ts keeps one): everything loaded, `standby` said, and
// no polling until the parent writes `run` on the lifeline.
if (process.env['WORKER_STANDBY'] === '1') {
  process.stdout.write('standby\n');
  await new Promise<void>((resolve) => {
    let said = '';
    process.stdin.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      if (said.includes('run\n')) resolve();
    });
  });
}
const running = workers.run();
process.stdout.write('ready\n');
await running;
await connection.close();
await clientConnection.close();
await db.end();
