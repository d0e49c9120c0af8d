/**
 * Finds or builds the Temporal CLI (see src/devstack/temporal.ts) and the Temporal server with its sql
 * tool and Postgres schemas (src/devstack/temporalServer.ts, for the production topology and its
 * tests), and prints which ones and their versions.
 */
import { findTemporalCli } from '../src/devstack/temporal.js';
import { ensureTemporalServer } from '../src/devstack/temporalServer.js';
import { run } from '../src/devstack/process.js';

if (process.env['TEMPORAL_ADDRESS']) {
  console.log(`TEMPORAL_ADDRESS=${process.env['TEMPORAL_ADDRESS']}: using that server, nothing to install`);
} else {
  const { path, tried } = await findTemporalCli();
  if (!path) {
    console.log(`no Temporal CLI (${tried.join('; ')}); tests will try the SDK download`);
  } else {
    console.log(`${path}: ${(await run(path, ['--version'])).stdout.trim()}`);
  }
}
// The topology tests (test/topology/) start the real server whatever TEMPORAL_ADDRESS says.
const server = await ensureTemporalServer();
console.log(`${server.server}: ${(await run(server.server, ['--version'])).stdout.trim()}`);
