/**
 * `npm start`: the whole service on one machine. Temporal (TEMPORAL_ADDRESS, or a dev server with its
 * Web UI), Postgres (DATABASE_URL, or a local cluster), migrations, and the worker; state lives in
 * `.service-data/` and survives a restart. Ctrl-C stops everything cleanly.
 */
import { resolve } from 'node:path';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createActivities } from '../activities/index.js';
import { createPool } from './db/pool.js';
import { migrate } from './db/migrate.js';
import { DevStackError, startStack } from './devstack/index.js';
import { redactUrl } from './devstack/postgres.js';
import { connectWorker, DEFAULT_TASK_QUEUE } from './temporal/connection.js';
import { createWorker } from './temporal/worker.js';

const dataDir = resolve(process.env['SERVICE_DATA_DIR'] ?? '.service-data');

async function main(): Promise<void> {
  Runtime.install({ logger: new DefaultLogger('WARN') });
  console.log(`starting the integration service (state in ${dataDir})…`);
  const stack = await startStack({ dataDir, ui: true });
  const stopStack = async (): Promise<void> => stack.stop();
  try {
    console.log(`Temporal  ${stack.temporal.address}  ${stack.temporal.version}`);
    if (stack.temporal.uiUrl) console.log(`Web UI    ${stack.temporal.uiUrl}`);
    console.log(`Postgres  ${redactUrl(stack.postgres.url)}  ${stack.postgres.version}`);

    const db = createPool({ url: stack.postgres.url, max: 10 });
    const applied = await migrate(db);
    console.log(`migrations: ${applied.length === 0 ? 'up to date' : `applied ${applied.join(', ')}`}`);

    const connection = await connectWorker({
      address: stack.temporal.address,
      namespace: stack.temporal.namespace,
      taskQueue: DEFAULT_TASK_QUEUE,
    });
    const worker = await createWorker({
      connection,
      namespace: stack.temporal.namespace,
      taskQueue: DEFAULT_TASK_QUEUE,
      activities: createActivities({ db }),
    });
    console.log(`worker    task queue ${DEFAULT_TASK_QUEUE}`);
    console.log('ready. Ctrl-C stops everything.');

    let stopping = false;
    const shutdown = (): void => {
      if (stopping) return;
      stopping = true;
      console.log('\nstopping…');
      worker.shutdown();
    };
    process.on('SIGINT', shutdown);
    process.on('SIGTERM', shutdown);
    await worker.run();
    await connection.close();
    await db.end();
  } finally {
    await stopStack();
    console.log('stopped.');
  }
}

main().catch((error: unknown) => {
  if (error instanceof DevStackError) console.error(`error: ${error.message}`);
  else console.error(error);
  process.exit(1);
});
