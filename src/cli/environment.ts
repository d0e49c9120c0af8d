/**
 * `service environments create|rotate-key|list --database`: an operator's way to an environment's secret key that
 * needs no key to begin with. It talks to the service's Postgres directly (DATABASE_URL), applies the
 * migrations first (under the same advisory lock as every process, so it also works before the first
 * start), and prints a new key alone on stdout, once: only its hash is stored.
 */
import { createEnvironmentStore } from '../connections/environmentStore.js';
import { createPool } from '../db/pool.js';
import { migrate } from '../db/migrate.js';
import { isServiceError } from '../errors.js';
import type { CliIo } from './io.js';

const SUBCOMMANDS = ['create', 'rotate-key', 'list'] as const;

export async function environmentCommand(args: readonly string[], io: CliIo): Promise<number> {
  const [sub, name, ...extra] = args;
  if (sub === undefined || !(SUBCOMMANDS as readonly string[]).includes(sub)) {
    io.err(
      `service environments --database: ${sub === undefined ? 'missing' : `unknown`} subcommand${sub === undefined ? '' : ` '${sub}'`}; use create, rotate-key or list. Run 'service environments --help'.\n`,
    );
    return 2;
  }
  const wantsName = sub !== 'list';
  if (wantsName && name === undefined) {
    io.err(
      `service environments ${sub} --database: name the environment, e.g. 'service environments ${sub} --database production'.\n`,
    );
    return 2;
  }
  const unexpected = wantsName ? extra[0] : name;
  if (unexpected !== undefined) {
    io.err(
      `service environments ${sub} --database: unexpected argument '${unexpected}'. Run 'service environments --help'.\n`,
    );
    return 2;
  }
  const url = io.env['DATABASE_URL'];
  if (!url) {
    io.err(
      `service environments ${sub} --database: DATABASE_URL is not set; set it to the service's Postgres (docs/operations.md).\n`,
    );
    return 2;
  }
  const db = createPool({ url, max: 2, applicationName: 'integration-service-cli' });
  try {
    await migrate(db);
    const environments = createEnvironmentStore({ db });
    if (sub === 'list') {
      for (const environment of await environments.list()) {
        io.out(`${environment.name}\t${environment.id}\t${environment.publicKey}\t${environment.createdAt}\n`);
      }
      return 0;
    }
    const environmentName = name ?? '';
    if (sub === 'create') {
      const { environment, secretKey } = await environments.create({ name: environmentName });
      io.err(`created environment "${environment.name}" (${environment.id}); its secret key, shown only now:\n`);
      io.out(`${secretKey}\n`);
      return 0;
    }
    const existing = await environments.getByName(environmentName);
    if (!existing) {
      io.err(
        `service environments rotate-key --database: there is no environment named '${environmentName}' (see 'service environments list --database').\n`,
      );
      return 1;
    }
    const secretKey = await environments.rotateSecretKey(existing.id);
    io.err(`new secret key of environment "${existing.name}"; the old one no longer works. Shown only now:\n`);
    io.out(`${secretKey}\n`);
    return 0;
  } catch (error) {
    if (isServiceError(error)) {
      io.err(`service environments ${sub} --database: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    await db.end();
  }
}
