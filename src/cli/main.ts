/**
 * The `service` command. `runCli` takes the arguments and an output sink and returns the exit code,
 * so tests can run it in-process; bin/service.js calls it. Never prints a stack trace unless
 * SERVICE_DEBUG=1: every failure is a message saying what and where.
 */
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { PACKAGE_ROOT } from '../packageRoot.js';
import { ENVIRONMENTS_HELP } from './environments.js';
import type { CliIo } from './io.js';
import { countSummary, formatProjectProblems, type ProjectProblem } from './project.js';

const ROOT_OPTION =
  '  --root <dir>   the project folder that holds service-integrations/ (default: the current folder)';

const HELP: Record<string, string> = {
  main: `service: declare integrations in service-integrations/service.yaml, write their scripts, build them.

Usage: service <command> [options]

Commands:
  init        create service-integrations/ with an example integration (a sync and an action)
  generate    check service.yaml, write models.ts, create a stub for every script that has none
  compile     generate, then type-check every script and bundle each into build/
  validate    check service.yaml only and print every problem (alias: check)
  deploy      compile, preview the changes against an environment, confirm, apply
  dryrun      run a local script with a real connection; print requests, logs, records; save nothing
  test        run scripts against recorded responses and compare their records with snapshots
  environments  list, create, rename, delete environments and rotate their keys (service admin key)
  replay      replay a run of the service step by step with the local script; tell where it diverges
  import      convert a project of the de-facto format (nango-integrations/) into service-integrations/

Options:
  -h, --help     help of a command: service compile --help
  -v, --version  the version of this package

Examples:
  npx service init && npx service compile
  npx service validate --root ./my-app
`,
  init: `service init: create service-integrations/ with an example integration that compiles as it is.

Usage: service init [--root <dir>]

Writes service.yaml (a GitHub integration with the sync 'issues' and the action 'create-issue'),
their scripts under github/syncs/ and github/actions/, tsconfig.json (so editors check scripts the
way 'service compile' does), .gitignore (build/), the generated models.ts, and an example test for
'service test' (tests/github/create-issue/opens-an-issue: a recorded answer and its snapshot).
Refuses when service-integrations/service.yaml exists already; other existing files are kept.

Options:
${ROOT_OPTION}

Examples:
  npx service init
  npx service init --root ./my-app && npx service compile --root ./my-app
`,
  generate: `service generate: check service.yaml, write models.ts, and create missing script stubs.

Usage: service generate [--root <dir>]

Writes service-integrations/models.ts (one interface per model, plus ServiceSync, ServiceAction,
ActionError, ProxyConfiguration and the other helper types re-exported for scripts) and, for every
sync and action without a script, a stub:
  service-integrations/<integration>/syncs/<sync>.ts
  service-integrations/<integration>/actions/<action>.ts
Existing scripts are never touched. Exits 1 and prints every problem when service.yaml has errors.

Options:
${ROOT_OPTION}

Examples:
  npx service generate
  npx service generate --root ./my-app
`,
  compile: `service compile: generate, type-check every script, bundle each into one file.

Usage: service compile [--root <dir>]

1. generate (see service generate --help)
2. check each script: it may import only '../../models' and 'integration-service/runtime', must
   default-export its function, and an action must not call svc.batchSave or svc.batchDelete
3. type-check all scripts together (TypeScript, strict)
4. bundle each script with esbuild into service-integrations/build/<integration>/<syncs|actions>/<name>.cjs
   and write service-integrations/build/manifest.json (config, scripts, sha256 of each bundle)
Every problem is printed as file:line:column; exits 1 when there is any error.

Options:
${ROOT_OPTION}

Examples:
  npx service compile
  npx service compile --root ./my-app
`,
  validate: `service validate (alias: check): check service.yaml and print every problem; writes nothing.

Usage: service validate [--root <dir>]

Problems print like a compiler: service-integrations/service.yaml:12:5 error unknown_key …
Exits 0 when there is no error (warnings allowed), 1 otherwise.

Options:
${ROOT_OPTION}

Examples:
  npx service validate
  npx service check --root ./my-app
`,
};
HELP['deploy'] = `service deploy: compile, show what changes in the environment, confirm, apply.

Usage: service deploy [--env <name>] [--dry-run] [--yes] [--allow-destructive] [--redeploy <version>] [--root <dir>]

1. compile (see service compile --help); nothing is sent when there is a problem
2. preview: the server compares service.yaml and the bundles with what the environment runs and lists
   every change with its reach (connections touched, records a removal would erase)
3. confirm: a destructive change (a sync removed: its records are erased; an action removed: its
   trigger fails) must be confirmed by typing "yes", or allowed with --allow-destructive; without a
   terminal (CI) it fails unless the flag is given. Other changes ask y/N unless --yes.
4. apply: the new version becomes active; syncs start, stop or take the new script per SPEC.md.
A failed deploy changes nothing. Deploys of one environment run one at a time.

Where to:
  SERVICE_URL                   the API (default ${'http://127.0.0.1:3003'})
  SERVICE_SECRET_KEY            the environment's secret key, or with --env prod: SERVICE_SECRET_KEY_PROD
  (for the local dev environment of 'npm start', the key in .service-data/dev-secret-key is used)

Options:
  --env <name>          the environment whose key to use (SERVICE_SECRET_KEY_<NAME>)
  --dry-run             show the changes only
  --yes, -y             do not ask before a non-destructive deploy
  --allow-destructive   go ahead with removals without asking
  --redeploy <version>  deploy an earlier version again (rollback)
${ROOT_OPTION}

Examples:
  npx service deploy --dry-run
  SERVICE_URL=https://svc.example.com SERVICE_SECRET_KEY_PROD=sk_… npx service deploy --env prod --yes
  npx service deploy --redeploy 3 --allow-destructive
`;
HELP['dryrun'] = `service dryrun: run a local sync or action with a real connection, saving nothing.

Usage: service dryrun <sync|action> <connection-id> [options]

Compiles the project, reads the connection through the API with the environment's secret key, and
runs the local script (not the deployed one) as the service runs it: the real run workflow, in its
own realm, on a Temporal server (TEMPORAL_ADDRESS, or a throw-away dev server started for the run).
Each request gets the connection's credentials from the API (POST /connections/:id/authorize) and is
sent from this machine, under the same outbound policy (SERVICE_OUTBOUND_ALLOW). Prints every request
as it is made, the script's logs, and per model the records it would save (count and the first 3),
each checked against its model with the path of every bad field. Nothing is written to the records
cache or to the connection's metadata (writes are printed). Exits 1 when the script fails or a
record breaks its model.

Where to: SERVICE_URL and SERVICE_SECRET_KEY (or --env), as for service deploy.

Options:
  --integration <id>       the integration, when several have a script of that name
  --input <json|@file>     an action's input
  --last-sync-date <iso>   svc.lastSyncDate of an incremental sync (default: none, a first run)
  --metadata <json|@file>  the connection metadata the script sees instead of the stored one
  --model <name>           print the records of this model only
  --save-responses <dir>   record every HTTP exchange into <dir>/fixture.json for service test
  --env <name>             the environment whose key to use (SERVICE_SECRET_KEY_<NAME>)
${ROOT_OPTION}

Examples:
  npx service dryrun issues user-42
  npx service dryrun issues user-42 --last-sync-date 2026-11-01T00:00:00Z --metadata '{"owner":"acme","repo":"web"}'
  npx service dryrun create-issue user-42 --input '{"title":"Broken link"}'
  npx service dryrun issues user-42 --save-responses service-integrations/tests/github/issues/first-run
`;
HELP['test'] = `service test: run scripts against recorded responses and compare their records with snapshots.

Usage: service test [--update] [--root <dir>]

Finds every fixture.json under service-integrations/tests/ (recorded by
'service dryrun --save-responses <dir>'), runs its script as the service runs it, each request
answered from the fixture (no network; a request the fixture does not hold fails the run with
fixture_missing), and compares what the run saved (records per model, deletes, metadata writes, an
action's output or the run's failure, fields that break their model) with snapshot.json beside it.

Also runs the recorded runs of the field's de-facto format found in service-integrations/<integration>/mocks/
(as its 'dryrun --save-responses' wrote them, and 'service import' copies them): each passes when the
script stores exactly the recorded records (batchSave.json, batchDelete.json, in order) or answers
output.json. Exits 1 on any difference or missing snapshot. A Temporal server is needed as for dryrun
(TEMPORAL_ADDRESS, or a throw-away dev server on loopback).

Options:
  --update, -u   write snapshot.json from this run instead of comparing
${ROOT_OPTION}

Examples:
  npx service test
  npx service test --update && git diff service-integrations/tests
`;
HELP['environments'] = `${ENVIRONMENTS_HELP}
With --database: straight in the service's Postgres instead of through the API, for the first key of a
new deployment or a lost one. create, rotate-key and list only; needs DATABASE_URL (the value the API
and workers use), no running API and no key: whoever can reach the database owns the service anyway.
Pending migrations are applied first, so it works before the service's first start too. The new secret
key is the only line on stdout; everything else goes to stderr (docs/operations.md, "The first environment").

Examples (--database):
  DATABASE_URL=postgres://svc@db/service npx service environments create production --database
  export SERVICE_SECRET_KEY=$(DATABASE_URL=postgres://svc@db/service npx service environments rotate-key production --database)
  DATABASE_URL=postgres://svc@db/service npx service environments list --database
`;
HELP['replay'] = `service replay: replay a finished or failed run of the service with the local script.

Usage: service replay <run-id> [--json] [--env <name>] [--root <dir>]

Fetches the run's history through the API (GET /runs/:run_id/history: every payload decoded by the
service, the connection's credentials redacted), compiles the project, puts the local script in the
place of the one the run loaded, and replays the run in this process with the service's run workflow:
every step answers with what the run recorded, nothing is sent anywhere, no Temporal server is needed.
Prints each step (its name, as in Temporal's Web UI, and its recorded result, shortened) and how the
run ended. When the local script does not take the run's steps in the same order with the same names
(a request to another endpoint, a batchSave of another model, a step more or less, an end that differs)
it says at which step and exits 1: that is what an edit would do to a run in flight.

A sync run's id is run_id of GET /sync/runs (or the dashboard); an action run's is run_id of its log
lines (GET /logs?sync=<action>). Runs of actions that the run triggered are runs of their own.

Debugging: the replay runs in this process, so a debugger can stop in it. Put a 'debugger;' statement
in the script and run the CLI under the inspector:
  node --inspect-brk node_modules/.bin/service replay <run-id>
then open chrome://inspect (or attach your editor). The script sees exactly what the run saw.

Where to: SERVICE_URL and SERVICE_SECRET_KEY (or --env), as for service deploy.

Options:
  --json        print the steps, the outcome and any divergence as JSON (progress goes to stderr)
  --env <name>  the environment whose key to use (SERVICE_SECRET_KEY_<NAME>)
${ROOT_OPTION}

Examples:
  npx service replay 'sync:3f0c…:github:user-42:issues:run:7d2e…'
  npx service replay "$(curl -s -H "Authorization: Bearer $SERVICE_SECRET_KEY" \\
      'http://127.0.0.1:3003/sync/runs?provider_config_key=github&limit=1' | jq -r '.runs[0].run_id')"
  npx service replay 'action:3f0c…:github:user-42:create-issue:1b9a…' --json | jq '.divergence'
`;
HELP['import'] = `service import: convert a project of the de-facto format into service-integrations/.

Usage: service import <folder> [--force] [--root <dir>]

<folder> holds nango.yaml (the nango-integrations/ folder), or holds nango-integrations/.
What it does (docs/migrating.md walks through it):
  1. nango.yaml becomes service-integrations/service.yaml, byte for byte except: a sync without
     sync_type gets 'sync_type: full' (that format's default), 'version:' lines go, and
     'webhook-subscriptions' is spelled 'webhook_subscriptions'. Each edit is printed with its line.
  2. each integration's folder is copied to the same place under service-integrations/ (syncs/,
     actions/, helpers, mappers, types.ts, schema.zod.ts, tests, mocks). In every .ts file the helper
     types imported from the models file get this service's names: NangoSync → ServiceSync,
     NangoAction → ServiceAction. Scripts of the older layout (beside nango.yaml) move into
     <integration>/syncs|actions/ with their relative imports rewritten.
  3. models.ts, tsconfig.json and .gitignore are written; then 'service compile' runs.
It prints every change, then every construct it could not convert (file:line:column) and what
'service compile' refused, and exits 1 when there is any. Nothing is deployed.
service-integrations/ must be empty or absent: with --force import writes into it anyway and lists
every file it replaced. Not copied: the source's generated models.ts, .nango/, dist/, node_modules/, .env.

Options:
  --force       write into a non-empty service-integrations/ (replaced files are listed)
${ROOT_OPTION}

Examples:
  npx service import ../my-app/nango-integrations
  npx service import ../my-app --root . && npx service deploy --dry-run
`;
const ALIASES: Record<string, string> = { check: 'validate' };

function version(): string {
  const text = readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8');
  const parsed: unknown = JSON.parse(text);
  return typeof parsed === 'object' && parsed !== null && 'version' in parsed ? String(parsed.version) : 'unknown';
}

export async function runCli(argv: readonly string[], io: CliIo): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
        root: { type: 'string' },
        env: { type: 'string' },
        'dry-run': { type: 'boolean' },
        yes: { type: 'boolean', short: 'y' },
        'allow-destructive': { type: 'boolean' },
        redeploy: { type: 'string' },
        integration: { type: 'string' },
        input: { type: 'string' },
        'last-sync-date': { type: 'string' },
        metadata: { type: 'string' },
        model: { type: 'string' },
        'save-responses': { type: 'string' },
        update: { type: 'boolean', short: 'u' },
        json: { type: 'boolean' },
        database: { type: 'boolean' },
        force: { type: 'boolean' },
      },
    });
  } catch (error) {
    io.err(`service: ${error instanceof Error ? error.message : String(error)}\nRun 'service --help' for usage.\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  const [given, ...extra] = positionals;
  const command = given === undefined ? undefined : (ALIASES[given] ?? given);

  if (values.version === true) {
    io.out(`${version()}\n`);
    return 0;
  }
  if (command === 'help') {
    io.out(HELP[extra[0] === undefined ? 'main' : (ALIASES[extra[0]] ?? extra[0])] ?? HELP['main'] ?? '');
    return 0;
  }
  if (command === undefined || HELP[command] === undefined || command === 'main') {
    if (command === undefined) {
      io.out(HELP['main'] ?? '');
      return values.help === true ? 0 : 2;
    }
    io.err(
      `service: unknown command '${given}'. Commands: init, generate, compile, validate, deploy, dryrun, test, replay, import, environments.\nRun 'service --help' for usage.\n`,
    );
    return 2;
  }
  if (values.help === true) {
    io.out(HELP[command] ?? '');
    return 0;
  }
  if (command === 'environments' && values.database === true) {
    const { environmentCommand } = await import('./environment.js');
    try {
      return await environmentCommand(extra, io);
    } catch (error) {
      io.err(`service environments: ${error instanceof Error ? error.message : String(error)}\n`);
      return 1;
    }
  }
  if (command === 'environments') {
    const { environments } = await import('./environments.js');
    return environments({ args: extra, json: values.json === true, yes: values.yes === true }, io);
  }
  if (command === 'dryrun' && extra.length !== 2) {
    io.err(`service dryrun: give the sync or action name and the connection id. Run 'service dryrun --help'.\n`);
    return 2;
  }
  if (command === 'replay' && extra.length !== 1) {
    io.err(`service replay: give the run id (run_id of GET /sync/runs). Run 'service replay --help'.\n`);
    return 2;
  }
  if (command === 'import' && extra.length !== 1) {
    io.err(`service import: give the folder that holds nango.yaml. Run 'service import --help'.\n`);
    return 2;
  }
  if (command !== 'dryrun' && command !== 'replay' && command !== 'import' && extra.length > 0) {
    io.err(`service ${command}: unexpected argument '${extra[0]}'. Run 'service ${command} --help'.\n`);
    return 2;
  }
  const root = resolve(io.cwd, values.root ?? '.');

  try {
    switch (command) {
      case 'init':
        return await init(root, io);
      case 'generate':
        return await generate(root, io);
      case 'compile':
        return await compile(root, io);
      case 'validate':
        return await validate(root, io);
      case 'deploy': {
        const redeploy = values.redeploy === undefined ? undefined : Number(values.redeploy);
        if (redeploy !== undefined && !(Number.isInteger(redeploy) && redeploy > 0)) {
          io.err(`service deploy: --redeploy takes a version number, got '${values.redeploy}'.\n`);
          return 2;
        }
        const { deploy } = await import('./deploy.js');
        return await deploy(
          {
            root,
            env: values.env,
            dryRun: values['dry-run'] === true,
            yes: values.yes === true,
            allowDestructive: values['allow-destructive'] === true,
            redeploy,
            interactive: io.interactive ?? false,
          },
          io,
        );
      }
      case 'dryrun': {
        const { dryrun } = await import('./dryrun.js');
        return await dryrun(
          {
            root,
            env: values.env,
            name: extra[0] ?? '',
            connectionId: extra[1] ?? '',
            integration: values.integration,
            input: values.input,
            lastSyncDate: values['last-sync-date'],
            metadata: values.metadata,
            model: values.model,
            saveResponses:
              values['save-responses'] === undefined ? undefined : resolve(io.cwd, values['save-responses']),
          },
          io,
        );
      }
      case 'replay': {
        const { replay } = await import('./replay.js');
        return await replay({ root, env: values.env, runId: extra[0] ?? '', json: values.json === true }, io);
      }
      case 'import': {
        const { importCommand } = await import('./import.js');
        return await importCommand({ from: resolve(io.cwd, extra[0] ?? '.'), root, force: values.force === true }, io);
      }
      case 'test': {
        const { runScriptTests } = await import('./scriptTests.js');
        return await runScriptTests({ root, update: values.update === true }, io);
      }
      default:
        return 2;
    }
  } catch (error) {
    // Unexpected (a file system error, say): one line, no stack, unless asked for.
    const message = error instanceof Error ? error.message : String(error);
    io.err(`service ${command}: ${message}\n`);
    if (io.env['SERVICE_DEBUG'] === '1' && error instanceof Error && error.stack !== undefined)
      io.err(`${error.stack}\n`);
    return 1;
  }
}

function printProblems(
  io: CliIo,
  report: string,
  others: readonly ProjectProblem[],
  all: readonly ProjectProblem[],
): void {
  const text = [report, formatProjectProblems(others)].filter((t) => t !== '').join('\n');
  if (text !== '') io.err(`${text}\n`);
  if (all.length > 0) io.err(`${countSummary(all)}\n`);
}

/** What `generate` and `validate` found: the config report, and a missing config named on its own. */
function printGenerateProblems(io: CliIo, result: { report: string; problems: readonly ProjectProblem[] }): void {
  printProblems(
    io,
    result.report,
    result.problems.filter((p) => p.code === 'config_not_found'),
    result.problems,
  );
}

async function init(root: string, io: CliIo): Promise<number> {
  const { initProject } = await import('./init.js');
  const result = await initProject({ root });
  if (!result.ok) {
    io.err(`service init: ${result.file} exists already; edit it, then run 'service generate'.\n`);
    return 1;
  }
  for (const file of result.created) io.out(`created ${file}\n`);
  if (!result.generated.ok) {
    printProblems(io, result.generated.report, [], result.generated.problems);
    return 1;
  }
  io.out(`\nNext: edit service-integrations/service.yaml and the scripts, then run 'npx service compile'.\n`);
  return 0;
}

// Commands load their modules on demand: TypeScript and esbuild take a while to load, and only
// compile needs them.
async function generate(root: string, io: CliIo): Promise<number> {
  const { generateProject } = await import('./generate.js');
  const result = await generateProject({ root });
  printGenerateProblems(io, result);
  if (!result.ok) return 1;
  io.out(`${result.modelsWritten ? 'wrote' : 'unchanged'} service-integrations/models.ts\n`);
  for (const stub of result.stubsCreated) io.out(`created stub ${stub}\n`);
  return 0;
}

async function compile(root: string, io: CliIo): Promise<number> {
  const { compileProject } = await import('./compile.js');
  const result = await compileProject({ root, onProgress: (line) => io.out(`${line}\n`) });
  const configCodes = new Set(['config_not_found']);
  const scriptProblems = result.problems.filter((p) => !p.file.endsWith('service.yaml') || configCodes.has(p.code));
  printProblems(io, result.configReport, scriptProblems, result.problems);
  for (const stub of result.stubsCreated) io.out(`created stub ${stub}\n`);
  if (!result.ok || result.manifest === null) return 1;
  const count = result.manifest.scripts.length;
  io.out(`built ${count} script${count === 1 ? '' : 's'} into service-integrations/build (manifest.json)\n`);
  return 0;
}

async function validate(root: string, io: CliIo): Promise<number> {
  const { generateProject } = await import('./generate.js');
  const result = await generateProject({ root, write: false });
  printGenerateProblems(io, result);
  if (!result.ok) return 1;
  const config = result.config;
  const syncs = config?.integrations.reduce((n, i) => n + i.syncs.length, 0) ?? 0;
  const actions = config?.integrations.reduce((n, i) => n + i.actions.length, 0) ?? 0;
  io.out(
    `service-integrations/service.yaml is valid: ${config?.integrations.length ?? 0} integration(s), ${syncs} sync(s), ${actions} action(s), ${config?.models.length ?? 0} model(s)\n`,
  );
  return 0;
}
