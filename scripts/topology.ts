/**
 * `npm run topology`: the production topology on this machine, in one command: the real Temporal
 * server (v1.29.1, built once into the cache with `go install`) on Postgres persistence, one
 * SERVICE_ROLE=api process and two SERVICE_ROLE=worker processes (src/devstack/topology.ts). State
 * lives in SERVICE_DATA_DIR/topology (`.service-data/topology/`) and survives a restart. Ctrl-C stops
 * everything.
 *
 *   npm run topology
 *   npm run topology -- --workers 3 --port 3010
 */
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { DevStackError } from '../src/devstack/process.js';
import { redactUrl } from '../src/devstack/postgres.js';
import { startTopology } from '../src/devstack/topology.js';

const { values } = parseArgs({
  options: {
    workers: { type: 'string', default: '2' },
    port: { type: 'string' },
    help: { type: 'boolean', short: 'h', default: false },
  },
});
if (values.help) {
  process.stdout.write(
    'usage: npm run topology -- [--workers N] [--port P]\n' +
      '  --workers  SERVICE_ROLE=worker processes to start (default 2)\n' +
      '  --port     port of the API process (default: a free one)\n' +
      'State: SERVICE_DATA_DIR/topology (default .service-data/topology). DATABASE_URL: use that Postgres.\n',
  );
  process.exit(0);
}
const workers = Number(values.workers);
if (!Number.isInteger(workers) || workers < 1) {
  console.error(`error: --workers must be a positive whole number, not ${values.workers}`);
  process.exit(1);
}
const port = values.port === undefined ? undefined : Number(values.port);
if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535)) {
  console.error(`error: --port must be a port number, not ${values.port}`);
  process.exit(1);
}
const dataDir = join(resolve(process.env['SERVICE_DATA_DIR'] ?? '.service-data'), 'topology');
console.log(`starting the production topology (state in ${dataDir})…`);
const databaseUrl = process.env['DATABASE_URL'];
try {
  const topology = await startTopology({
    dataDir,
    workers,
    ...(port ? { apiPort: port } : {}),
    ...(databaseUrl
      ? { postgres: { url: databaseUrl, adminUrl: databaseUrl.replace(/\/[^/?]*(\?|$)/, '/postgres$1') } }
      : {}),
    echo: (name, text) => {
      for (const line of text.split('\n')) if (line.trim()) process.stderr.write(`[${name}] ${line}\n`);
    },
  });
  console.log(
    `Temporal   ${topology.temporal.address}  (${topology.temporal.version}; log ${topology.temporal.logFile})`,
  );
  console.log(`Postgres   ${redactUrl(topology.postgres.url)}`);
  console.log(`API        ${topology.apiUrl}   (pid ${topology.api.child.pid})`);
  for (const worker of topology.workers) console.log(`${worker.name.padEnd(10)} pid ${worker.child.pid}`);
  if (topology.firstSecretKey) console.log(`secret key ${topology.firstSecretKey}   (shown only now; keep it)`);
  console.log('ready. Ctrl-C stops everything.');
  await new Promise<void>((resolveStop) => {
    process.once('SIGINT', resolveStop);
    process.once('SIGTERM', resolveStop);
  });
  console.log('\nstopping…');
  await topology.stop();
  console.log('stopped.');
} catch (error) {
  console.error(`error: ${error instanceof DevStackError ? error.message : String(error)}`);
  process.exit(1);
}
