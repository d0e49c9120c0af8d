/**
 * `service environments list|create|rename|delete|rotate-key`: managing environments through the API
 * with the service admin key (SERVICE_ADMIN_KEY), from any machine that reaches the API. Environments
 * are named by id or name; a secret key is printed once, when it is made.
 */
import { createClient, ServiceApiError, type EnvironmentView } from '../client/index.js';
import type { CliIo } from './io.js';

const DEFAULT_URL = 'http://127.0.0.1:3003';

export const ENVIRONMENTS_HELP = `service environments: create, list, rename and delete environments and rotate their keys, through the API.

Usage:
  service environments list [--json]
  service environments create <name> [--json]
  service environments rename <id or name> <new name>
  service environments delete <id or name> --yes
  service environments rotate-key <id or name> [--json]

Needs the service admin key: an environment's own secret key cannot manage environments.
  SERVICE_URL         the API (default ${DEFAULT_URL})
  SERVICE_ADMIN_KEY   the admin key the API server was started with

create and rotate-key print the new secret key once: store it now, it cannot be read again. After
rotate-key the old key is refused at once (no grace period). delete refuses an environment that still
has connections (delete them first); otherwise it removes the environment with its integrations,
variables, webhook settings, deployments, logs and run history.

Options:
  --json   print the API's answer as JSON
  --yes    confirm delete

Examples:
  SERVICE_ADMIN_KEY=… npx service environments list
  SERVICE_ADMIN_KEY=… npx service environments create staging
  SERVICE_ADMIN_KEY=… npx service environments rotate-key staging
  SERVICE_ADMIN_KEY=… npx service environments rename staging preprod
  SERVICE_ADMIN_KEY=… npx service environments delete preprod --yes
`;

export interface EnvironmentsOptions {
  args: string[];
  json: boolean;
  yes: boolean;
}

const USAGE = `Run 'service environments --help'.`;

export async function environments(options: EnvironmentsOptions, io: CliIo): Promise<number> {
  const [sub, ...args] = options.args;
  const expected: Record<string, number> = { list: 0, create: 1, rename: 2, delete: 1, 'rotate-key': 1 };
  if (sub === undefined || expected[sub] === undefined) {
    io.err(
      `service environments: ${sub === undefined ? 'missing' : `unknown`} subcommand${sub === undefined ? '' : ` '${sub}'`}: one of list, create, rename, delete, rotate-key. ${USAGE}\n`,
    );
    return 2;
  }
  if (args.length !== expected[sub]) {
    io.err(`service environments ${sub}: takes ${expected[sub]} argument(s), got ${args.length}. ${USAGE}\n`);
    return 2;
  }
  const adminKey = io.env['SERVICE_ADMIN_KEY'];
  if (!adminKey) {
    io.err(
      `service environments: set SERVICE_ADMIN_KEY to the admin key of the API server (an environment's secret key cannot manage environments). ${USAGE}\n`,
    );
    return 2;
  }
  if (sub === 'delete' && !options.yes) {
    io.err(`service environments delete: deleting '${args[0]}' cannot be undone: add --yes to confirm.\n`);
    return 2;
  }
  const url = (io.env['SERVICE_URL'] ?? DEFAULT_URL).replace(/\/+$/, '');
  const api = createClient({ baseUrl: url, secretKey: adminKey });
  const print = (value: unknown, text: string) => io.out(options.json ? `${JSON.stringify(value, null, 2)}\n` : text);
  try {
    switch (sub) {
      case 'list': {
        const answer = await api.environments.list();
        print(answer, table(answer.environments));
        return 0;
      }
      case 'create': {
        const answer = await api.environments.create(args[0]!);
        print(
          answer,
          `created environment ${answer.environment.name} (id ${answer.environment.id})\n` +
            `public key: ${answer.environment.public_key}\n` +
            `secret key: ${answer.secret_key}\n(shown once: store it now)\n`,
        );
        return 0;
      }
      case 'rename': {
        const target = await find(api, args[0]!);
        const answer = await api.environments.rename(target.id, args[1]!);
        print(
          answer,
          `renamed environment ${target.name} to ${answer.environment.name} (id ${answer.environment.id})\n` +
            answer.warnings.map((warning) => `warning: ${warning}\n`).join(''),
        );
        return 0;
      }
      case 'delete': {
        const target = await find(api, args[0]!);
        const answer = await api.environments.delete(target.id);
        print(answer, `deleted environment ${target.name} (id ${target.id})\n`);
        return 0;
      }
      default: {
        const target = await find(api, args[0]!);
        const answer = await api.environments.rotateKey(target.id);
        print(
          answer,
          `new secret key of ${answer.environment.name}: ${answer.secret_key}\n(shown once; the old key no longer works)\n`,
        );
        return 0;
      }
    }
  } catch (error) {
    if (error instanceof ServiceApiError) {
      io.err(`service environments ${sub}: ${error.message}\n`);
      return 1;
    }
    if (error instanceof TypeError) {
      io.err(`service environments ${sub}: cannot reach the service at ${url}. Start it or set SERVICE_URL.\n`);
      return 1;
    }
    throw error;
  }
}

/** The environment with this id, else with this name; a clear error when neither. */
async function find(api: ReturnType<typeof createClient>, idOrName: string): Promise<EnvironmentView> {
  const { environments } = await api.environments.list();
  const found =
    environments.find((environment) => environment.id === idOrName) ??
    environments.find((environment) => environment.name === idOrName);
  if (!found) {
    throw new ServiceApiError(
      404,
      'unknown_environment',
      `no environment has the id or name '${idOrName}'; known: ${environments.map((e) => e.name).join(', ') || 'none'}`,
      undefined,
      null,
    );
  }
  return found;
}

function table(rows: EnvironmentView[]): string {
  if (rows.length === 0) return 'no environments\n';
  const header = ['NAME', 'ID', 'PUBLIC KEY', 'CREATED'];
  const cells = rows.map((row) => [row.name, row.id, row.public_key, row.created_at]);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((cell) => cell[column]!.length)));
  return (
    [header, ...cells]
      .map((line) =>
        line
          .map((cell, i) => cell.padEnd(widths[i]!))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}
