#!/usr/bin/env node
// The `service` command. The CLI is TypeScript (src/cli); tsx compiles it on the fly, so the package
// ships its sources and needs no build step.
import process from 'node:process';
import { register } from 'tsx/esm/api';

register();
const { runCli } = await import('../src/cli/main.ts');
process.exitCode = await runCli(process.argv.slice(2), {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  cwd: process.cwd(),
  env: process.env,
  interactive: process.stdin.isTTY === true && process.env.CI !== 'true',
});
