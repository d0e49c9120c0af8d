/** Finds or builds the Temporal CLI (see src/devstack/temporal.ts) and prints which one and its version. */
import { findTemporalCli } from '../src/devstack/temporal.js';
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
