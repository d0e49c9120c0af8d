/**
 * Schemathesis (PyPI), the property-based API tester that test/api/schemathesis.test.ts runs against
 * GET /openapi.json: installed once per machine into a virtual environment in the project's cache
 * (`~/.cache/integration-service/schemathesis-<version>`, SERVICE_CACHE_DIR), pinned to one version.
 * `npx tsx scripts/ensureSchemathesis.ts` installs it and prints its path (.ci/run does, as a phase).
 */
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { cacheDir } from '../src/devstack/temporal.js';
import { run } from '../src/devstack/process.js';

export const SCHEMATHESIS_VERSION = '4.32.5';

/** The `schemathesis` command, installed if it is not yet; throws with what to do when it cannot be. */
export async function ensureSchemathesis(log: (line: string) => void = () => undefined): Promise<string> {
  const venv = join(cacheDir(), `schemathesis-${SCHEMATHESIS_VERSION}`);
  const command = join(venv, 'bin', 'schemathesis');
  if (existsSync(command) && existsSync(join(venv, '.installed'))) return command;
  rmSync(venv, { recursive: true, force: true });
  log(`installing schemathesis ${SCHEMATHESIS_VERSION} from PyPI into ${venv} (once per machine)…`);
  const python = process.env['PYTHON'] ?? 'python3';
  const created = await run(python, ['-m', 'venv', venv]);
  if (created.code !== 0) {
    throw new Error(
      `cannot create a Python virtual environment with '${python} -m venv' (${created.stderr.trim().slice(0, 300)}); install Python 3 with venv (Debian: apt-get install python3-venv) or set PYTHON`,
    );
  }
  const installed = await run(join(venv, 'bin', 'pip'), [
    'install',
    '--quiet',
    '--disable-pip-version-check',
    `schemathesis==${SCHEMATHESIS_VERSION}`,
  ]);
  if (installed.code !== 0) {
    rmSync(venv, { recursive: true, force: true });
    throw new Error(
      `pip install schemathesis==${SCHEMATHESIS_VERSION} failed: ${installed.stderr.trim().slice(-1000)}`,
    );
  }
  writeFileSync(join(venv, '.installed'), `${SCHEMATHESIS_VERSION}\n`);
  return command;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const command = await ensureSchemathesis(console.log);
  console.log(`${command}: ${(await run(command, ['--version'])).stdout.trim()}`);
}
