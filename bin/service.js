#!/usr/bin/env node
// The `service` command. The CLI is TypeScript (src/cli); tsx compiles it on the fly, so the package
// ships its sources and needs no build step.
import process from 'node:process';
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../src/cli/main.ts');
// What the service's modules log (a bundler warning, a lost database connection) goes to stderr: stdout
// is the command's answer (`export SERVICE_SECRET_KEY=$(service environments create … --database)`).
const { setLogDestination } = await import('../src/log.ts');
setLogDestination('stderr');
// The outbound request policy of the CLI's process (dryrun, test): SERVICE_OUTBOUND_ALLOW, as the service reads it.
const { configureOutboundPolicy, OutboundPolicy } = await import('../src/runtime/outbound.ts');
try {
  configureOutboundPolicy(new OutboundPolicy(process.env.SERVICE_OUTBOUND_ALLOW ?? ''));
} catch (error) {
  process.stderr.write(`service: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(2);
}
process.exitCode = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
  interactive: process.stdin.isTTY === true && process.env.CI !== 'true',
});
