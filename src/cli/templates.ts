/**
 * Files that `service init` and `service generate` write: the example integration, script stubs and
 * the tsconfig that makes editors check scripts the way `service compile` does.
 */
import { modelNamesIn, typeToTs } from '../config/generateModels.js';
import { actionOutputType, inputTypeOf, type ActionConfig, type SyncConfig } from '../config/types.js';

/** Compiler options of scripts: `service compile` type-checks with these, and `init` writes them to tsconfig.json. */
export const SCRIPT_COMPILER_OPTIONS = {
  target: 'ES2022',
  // Scripts run in a realm with the language only (V8 of Node 20: ES2023), no DOM, no Node (`process`,
  // `require`, `fs`); what the realm adds (console, URL, Buffer, …) is declared by `service compile`.
  lib: ['ES2023'],
  module: 'ESNext',
  // esbuild bundles the scripts, so imports are written as for a bundler: '../../models', no extension.
  moduleResolution: 'Bundler',
  strict: true,
  noEmit: true,
  skipLibCheck: true,
  isolatedModules: true,
  types: [] as string[],
};

export const TSCONFIG = `${JSON.stringify(
  {
    compilerOptions: SCRIPT_COMPILER_OPTIONS,
    include: ['**/*.ts'],
    exclude: ['build'],
  },
  null,
  2,
)}\n`;

export const GITIGNORE = '# Written by `service compile`.\nbuild/\n';

export const EXAMPLE_SERVICE_YAML = `# yaml-language-server: $schema=../node_modules/integration-service/config/service.schema.json
# Integrations, their syncs and actions, and the models they use. Reference: the package's
# docs/configuration.md; an annotated example with every option: config/service.example.yaml.
# After a change, run \`npx service generate\` (models.ts, script stubs) and \`npx service compile\`.
integrations:
  github:
    syncs:
      issues:
        description: The issues of one repository, kept up to date every hour.
        input: GithubRepo # the connection metadata holds { owner, repo }
        output: GithubIssue
        endpoint: GET /github/issues
        sync_type: incremental
        runs: every hour
        scopes: [repo]
    actions:
      create-issue:
        description: Opens an issue in the repository.
        input: GithubCreateIssue
        output: GithubIssue
        endpoint: POST /github/issues

models:
  GithubRepo:
    owner: string
    repo: string
  GithubIssue:
    id: string
    number: number
    title: string
    state: open | closed
    url: string
    labels: string[]
    updatedAt: string
  GithubCreateIssue:
    __extends: GithubRepo
    title: string
    body?: string
`;

const EXAMPLE_API_ISSUE = `/** An issue as the GitHub REST API returns it (the fields used here). */
interface ApiIssue {
  id: number;
  number: number;
  title: string;
  state: string;
  html_url: string;
  updated_at: string;
  labels: { name: string }[];
}

// Scripts cannot import files (each is bundled on its own), so this small mapping lives in both scripts.
function toIssue(issue: ApiIssue): GithubIssue {
  return {
    id: String(issue.id),
    number: issue.number,
    title: issue.title,
    state: issue.state === 'open' ? 'open' : 'closed',
    url: issue.html_url,
    labels: issue.labels.map((label) => label.name),
    updatedAt: issue.updated_at,
  };
}`;

export const EXAMPLE_SYNC = `import type { GithubIssue, GithubRepo, ServiceSync } from '../../models';

${EXAMPLE_API_ISSUE}

/**
 * Saves the issues of the repository named in the connection metadata. After the first run only the
 * issues updated since the last successful run are fetched (an incremental sync).
 */
export default async function fetchIssues(svc: ServiceSync): Promise<void> {
  const { owner, repo } = await svc.getMetadata<GithubRepo>();
  const params: Record<string, string | number> = { state: 'all', per_page: 100 };
  if (svc.lastSyncDate !== undefined) params['since'] = svc.lastSyncDate.toISOString();

  for await (const page of svc.paginate<ApiIssue>({
    baseUrlOverride: 'https://api.github.com',
    endpoint: \`/repos/\${owner}/\${repo}/issues\`,
    params,
    retries: 3,
    paginate: { type: 'link' },
  })) {
    await svc.batchSave(page.map(toIssue), 'GithubIssue');
    await svc.log(\`saved \${page.length} issues\`);
  }
}
`;

export const EXAMPLE_ACTION = `import { ActionError, type GithubCreateIssue, type GithubIssue, type ServiceAction } from '../../models';

${EXAMPLE_API_ISSUE}

/** Opens an issue and returns it. An empty title fails with an ActionError the caller receives. */
export default async function createIssue(svc: ServiceAction, input: GithubCreateIssue): Promise<GithubIssue> {
  if (input.title.trim() === '') throw new ActionError({ message: 'title must not be empty' });
  const response = await svc.post<ApiIssue>({
    baseUrlOverride: 'https://api.github.com',
    endpoint: \`/repos/\${input.owner}/\${input.repo}/issues\`,
    data: { title: input.title, body: input.body ?? '' },
  });
  return toIssue(response.data);
}
`;

/** A JavaScript function name for a sync or action name (`fetch-issues` → `fetchIssues`). */
export function functionName(name: string, fallback: string): string {
  const camel = name.replace(/[-_]+([A-Za-z0-9])/g, (_, c: string) => c.toUpperCase()).replace(/[^A-Za-z0-9_$]/g, '');
  return /^[A-Za-z_$]/.test(camel) ? camel : fallback;
}

function docComment(description: string): string {
  return `/**\n${description
    .split('\n')
    .map((line) => ` * ${line.replace(/\*\//g, '*\\/')}`.trimEnd())
    .join('\n')}\n */`;
}

export function syncStub(sync: SyncConfig): string {
  const models = [...new Set(sync.outputs.map((o) => o.model))];
  const inputType = inputTypeOf(sync);
  const imports = [...new Set([...models, ...modelNamesIn(inputType), 'ServiceSync'])].sort();
  const saves = models
    .map(
      (model) =>
        `  const ${lowerFirst(model)}Records: ${model}[] = [];\n  await svc.batchSave(${lowerFirst(model)}Records, '${model}');`,
    )
    .join('\n');
  const input =
    inputType === null
      ? ''
      : `  const input = await svc.getMetadata<${typeToTs(inputType, '  ')}>();\n  await svc.log(\`input: \${JSON.stringify(input)}\`);\n`;
  return `import type { ${imports.join(', ')} } from '../../models';

${docComment(sync.description)}
export default async function ${functionName(sync.name, 'sync')}(svc: ServiceSync): Promise<void> {
  // Fetch from the external API with svc.get or svc.paginate, map to the output model(s), then save.
${input}${saves}
}
`;
}

export function actionStub(action: ActionConfig): string {
  const outputType = actionOutputType(action);
  const inputType = inputTypeOf(action);
  const imports = [...new Set([...modelNamesIn(outputType), ...modelNamesIn(inputType)])].sort();
  const params = inputType === null ? 'svc: ServiceAction' : `svc: ServiceAction, input: ${typeToTs(inputType)}`;
  const use = inputType === null ? '' : `  await svc.log(\`input: \${JSON.stringify(input)}\`);\n`;
  return `import { ActionError, type ServiceAction${imports.map((name) => `, type ${name}`).join('')} } from '../../models';

${docComment(action.description)}
export default async function ${functionName(action.name, 'action')}(${params}): Promise<${typeToTs(outputType)}> {
  // Call the external API with svc.get, svc.post, … and return the output.
${use}  throw new ActionError({ message: '${action.name} is not implemented yet' });
}
`;
}

function lowerFirst(name: string): string {
  return name.charAt(0).toLowerCase() + name.slice(1);
}

const EXAMPLE_API_ANSWER = {
  id: 1001,
  number: 7,
  title: 'The login page is slow',
  state: 'open',
  html_url: 'https://github.com/acme/web/issues/7',
  updated_at: '2026-11-20T09:30:00Z',
  labels: [{ name: 'performance' }],
};

/**
 * An example test of `service test`: the action create-issue against one recorded answer of the
 * GitHub API (as `service dryrun create-issue <connection> --input … --save-responses <dir>` writes
 * it), and the snapshot of its output.
 */
export const EXAMPLE_TEST_DIR = 'tests/github/create-issue/opens-an-issue';

export const EXAMPLE_TEST_FIXTURE = `${JSON.stringify(
  {
    version: 1,
    integration: 'github',
    kind: 'action',
    name: 'create-issue',
    connectionId: 'example-connection',
    lastSyncDate: null,
    input: { owner: 'acme', repo: 'web', title: 'The login page is slow' },
    metadata: {},
    connection: { connection_id: 'example-connection', provider_config_key: 'github', credentials: {} },
    environmentVariables: [],
    exchanges: [
      {
        request: {
          method: 'POST',
          config: {
            baseUrlOverride: 'https://api.github.com',
            endpoint: '/repos/acme/web/issues',
            data: { title: 'The login page is slow', body: '' },
          },
        },
        response: {
          status: 201,
          headers: { 'content-type': 'application/json; charset=utf-8' },
          data: EXAMPLE_API_ANSWER,
          request: { method: 'POST', url: 'https://api.github.com/repos/acme/web/issues' },
        },
        ms: 120,
      },
    ],
  },
  null,
  2,
)}\n`;

export const EXAMPLE_TEST_SNAPSHOT = `${JSON.stringify(
  {
    records: {},
    deleted: {},
    metadataWrites: [],
    output: {
      id: '1001',
      number: 7,
      title: 'The login page is slow',
      state: 'open',
      url: 'https://github.com/acme/web/issues/7',
      labels: ['performance'],
      updatedAt: '2026-11-20T09:30:00Z',
    },
    invalid: [],
  },
  null,
  2,
)}\n`;
