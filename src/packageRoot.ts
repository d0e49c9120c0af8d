/**
 * The package's own folder (the one with its package.json), whether this module runs from its source
 * (src/packageRoot.ts, through tsx) or from the build (dist/src/packageRoot.js, `npm run build`).
 * Files that the build does not copy, and whose path must not depend on which of the two runs (the
 * workflow sources and the failure converter the workflow bundle's manifest names), resolve from here.
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

function findPackageRoot(start: string): string {
  for (let folder = start; ; folder = dirname(folder)) {
    if (existsSync(join(folder, 'package.json'))) return folder;
    if (dirname(folder) === folder) throw new Error(`no package.json in ${start} or any folder above it`);
  }
}

export const PACKAGE_ROOT = findPackageRoot(dirname(fileURLToPath(import.meta.url)));
