/**
 * The `service` command's process: bin/service.js imports this module, from the sources (through tsx) or
 * from the build (dist/src/cli/bin.js), and it runs the CLI on this process's arguments and stdio.
 */
import process from 'node:process';
import { setLogDestination } from '../log.js';
import { configureOutboundPolicy, OutboundPolicy } from '../runtime/outbound.js';
import { runCli } from './main.js';

// What the service's modules log (a bundler warning, a lost database connection) goes to stderr: stdout
// is the command's answer (`export SERVICE_SECRET_KEY=$(service environments create … --database)`).
setLogDestination('stderr');
// The outbound request policy of the CLI's process (dryrun, test): SERVICE_OUTBOUND_ALLOW, as the service reads it.
try {
  configureOutboundPolicy(new OutboundPolicy(process.env['SERVICE_OUTBOUND_ALLOW'] ?? ''));
} catch (error) {
  process.stderr.write(`service: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
}
process.exitCode = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
  interactive: process.stdin.isTTY === true && process.env['CI'] !== 'true',
});
