#!/usr/bin/env node
// The `service` command (src/cli/bin.ts). The CLI is TypeScript: where tsx is installed beside its sources
// (a checkout with its devDependencies) tsx compiles them on the fly, so an edit needs no build;
// elsewhere (the published package, the production image) it runs its build, dist/src/cli/bin.js
// (`npm run build`, which `npm pack` runs).
import { existsSync } from 'node:fs';
import process from 'node:process';
import { URL } from 'node:url';

const root = new URL('../', import.meta.url);
let tsx;
if (existsSync(new URL('src/cli/bin.ts', root))) {
  try {
    tsx = await import('tsx/esm/api');
  } catch (error) {
    if (error?.code !== 'ERR_MODULE_NOT_FOUND') throw error;
  }
}
if (tsx) {
  tsx.register();
  await import(new URL('src/cli/bin.ts', root).href);
} else if (existsSync(new URL('dist/src/cli/bin.js', root))) {
  await import(new URL('dist/src/cli/bin.js', root).href);
} else {
  process.stderr.write(
    'service: the CLI has neither its build (dist/src/cli/bin.js: run `npm run build`) nor tsx to run its ' +
      'TypeScript sources (`npm install --save-dev tsx`)\n',
  );
  process.exit(2);
}
