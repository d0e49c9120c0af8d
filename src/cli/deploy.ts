/**
 * `service deploy`: compile, preview the changes against what the environment runs, confirm, apply.
 * The server does the diff and the work (src/deploy/deployments.ts); this side builds the request,
 * shows the plan and asks.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline/promises';
import { createClient, ServiceApiError } from '../client/index.js';
import type { DeployPlan, DeployRequest } from '../deploy/deployments.js';
import type { CliIo } from './io.js';

export interface DeployOptions {
  root: string;
  /** Environment name: its key is read from SERVICE_SECRET_KEY_<NAME>. */
  env: string | undefined;
  dryRun: boolean;
  yes: boolean;
  allowDestructive: boolean;
  /** Deploy an earlier version again instead of the local project. */
  redeploy: number | undefined;
  /** Whether a person can answer questions (stdin is a terminal). */
  interactive: boolean;
  /** Reads one answer from the terminal; injected for tests. */
  ask?: (question: string) => Promise<string>;
}

export const DEFAULT_URL = 'http://127.0.0.1:3003';

/** The API address and the environment's secret key, from the environment (or the local dev key). */
export function resolveTarget(
  options: Pick<DeployOptions, 'root' | 'env'>,
  io: CliIo,
): { url: string; secretKey: string } | string {
  const url = (io.env['SERVICE_URL'] ?? DEFAULT_URL).replace(/\/+$/, '');
  const variable = options.env
    ? `SERVICE_SECRET_KEY_${options.env.toUpperCase().replace(/[^A-Z0-9]/g, '_')}`
    : 'SERVICE_SECRET_KEY';
  const fromEnv = io.env[variable];
  if (fromEnv) return { url, secretKey: fromEnv };
  // `npm start` keeps the local dev environment's key beside its data; use it when deploying there.
  const devKey = join(resolve(options.root, io.env['SERVICE_DATA_DIR'] ?? '.service-data'), 'dev-secret-key');
  if ((!options.env || options.env === 'dev') && url === DEFAULT_URL && existsSync(devKey)) {
    return { url, secretKey: readFileSync(devKey, 'utf8').trim() };
  }
  return `no secret key: set ${variable} to the secret key of the environment${options.env ? ` '${options.env}'` : ''} (and SERVICE_URL to the API address, now ${url}).`;
}

function printPlan(plan: DeployPlan, io: CliIo): void {
  for (const warning of plan.warnings ?? []) io.err(`warning: ${warning}\n`);
  const from = plan.previousVersion === null ? 'nothing deployed yet' : `version ${plan.previousVersion}`;
  if (plan.changes.length === 0) {
    io.out(`no changes against ${from}.\n`);
    return;
  }
  io.out(`changes against ${from} (would become version ${plan.version}):\n`);
  for (const planned of plan.changes) {
    const reach = [
      planned.connections > 0 ? `${planned.connections} connection(s)` : '',
      planned.recordsErased > 0 ? `${planned.recordsErased} record(s) erased` : '',
    ].filter(Boolean);
    io.out(`  ${planned.description}${reach.length > 0 ? `  [${reach.join(', ')}]` : ''}\n`);
  }
}

/** Builds the deploy request from `service compile`'s output: the YAML, each bundle and its source. */
export function deployRequestFromBuild(
  root: string,
  manifest: { scripts: { integration: string; kind: 'sync' | 'action'; name: string; file: string; source: string }[] },
): DeployRequest {
  const dir = join(root, 'service-integrations');
  return {
    yaml: readFileSync(join(dir, 'service.yaml'), 'utf8'),
    scripts: manifest.scripts.map((script) => ({
      integration: script.integration,
      kind: script.kind,
      name: script.name,
      code: readFileSync(join(dir, 'build', script.file), 'utf8'),
      source: readFileSync(join(dir, script.source), 'utf8'),
      sourcePath: script.source,
    })),
  };
}

async function confirm(options: DeployOptions, question: string): Promise<boolean> {
  const ask =
    options.ask ??
    (async (text: string) => {
      const rl = createInterface({ input: process.stdin, output: process.stdout });
      try {
        return await rl.question(text);
      } finally {
        rl.close();
      }
    });
  return /^y(es)?$/i.test((await ask(question)).trim());
}

/** Shows a line that says the server is still working, every few seconds, until `work` settles. */
async function withProgress<T>(io: CliIo, label: string, work: Promise<T>): Promise<T> {
  const started = Date.now();
  io.out(`${label}…\n`);
  const timer = setInterval(
    () => io.out(`  still ${label.toLowerCase()} (${Math.round((Date.now() - started) / 1000)} s)\n`),
    5000,
  );
  try {
    return await work;
  } finally {
    clearInterval(timer);
  }
}

export async function deploy(options: DeployOptions, io: CliIo): Promise<number> {
  const target = resolveTarget(options, io);
  if (typeof target === 'string') {
    io.err(`service deploy: ${target}\n`);
    return 1;
  }
  const api = createClient({ baseUrl: target.url, secretKey: target.secretKey });
  try {
    let request: DeployRequest;
    if (options.redeploy !== undefined) {
      request = await api.call<DeployRequest>('GET', `/deployments/${options.redeploy}/request`);
    } else {
      const { compileProject } = await import('./compile.js');
      const compiled = await compileProject({ root: options.root, onProgress: (line) => io.out(`${line}\n`) });
      if (!compiled.ok || compiled.manifest === null) {
        const { countSummary, formatProjectProblems } = await import('./project.js');
        const report = [
          compiled.configReport,
          formatProjectProblems(compiled.problems.filter((p) => !p.file.endsWith('service.yaml'))),
        ];
        io.err(
          `${report.filter(Boolean).join('\n')}\n${countSummary(compiled.problems)}\nservice deploy: fix the problems above; nothing was deployed.\n`,
        );
        return 1;
      }
      request = deployRequestFromBuild(options.root, compiled.manifest);
    }

    const plan = await withProgress(io, `Previewing against ${target.url}`, api.deploy.preview(request));
    printPlan(plan, io);
    if (options.dryRun) {
      io.out('dry run: nothing was deployed.\n');
      return 0;
    }
    if (plan.changes.length === 0 && options.redeploy === undefined) {
      io.out('nothing to deploy.\n');
      return 0;
    }
    if (plan.destructive && !options.allowDestructive) {
      if (!options.interactive) {
        io.err(
          'service deploy: this deploy removes syncs or actions (see above) and there is no terminal to confirm it; pass --allow-destructive to go ahead.\n',
        );
        return 1;
      }
      if (!(await confirm(options, 'This erases data or removes actions, as listed above. Type "yes" to deploy: '))) {
        io.out('not deployed.\n');
        return 1;
      }
    } else if (!options.yes && options.interactive) {
      if (!(await confirm(options, `Deploy version ${plan.version}? [y/N] `))) {
        io.out('not deployed.\n');
        return 1;
      }
    }
    const allowDestructive = plan.destructive;
    const applied =
      options.redeploy === undefined
        ? await withProgress(io, 'Deploying', api.deploy.apply(request, { allow_destructive: allowDestructive }))
        : await withProgress(
            io,
            'Deploying',
            api.call<{ version: number }>('POST', `/deployments/${options.redeploy}/redeploy`, {
              query: { allow_destructive: allowDestructive },
            }),
          );
    io.out(`deployed version ${applied.version}.\n`);
    return 0;
  } catch (error) {
    if (error instanceof ServiceApiError) {
      io.err(`service deploy: ${error.message}\n`);
      return 1;
    }
    if (error instanceof TypeError && /fetch failed/.test(error.message)) {
      io.err(`service deploy: cannot reach the service at ${target.url}. Start it (npm start) or set SERVICE_URL.\n`);
      return 1;
    }
    throw error;
  }
}
