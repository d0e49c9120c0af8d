/**
 * `service dryrun` and `service test` as a script author runs them: a local project, a real service
 * (API, Postgres, Temporal) holding the connection, and a fake external API on loopback. The local
 * script runs in the real run workflow on the harness's Temporal server.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { runLocalCli } from './localCli.js';
import { json } from '../kit/upstream.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';

const API_KEY = 'key-of-connection-c1-0123456789';
let h: ApiHarness;
let root: string;

const YAML = `integrations:
  ${INTEGRATION}:
    syncs:
      issues:
        description: Issues of the fake API
        output: Issue
        endpoint: GET /issues
        sync_type: incremental
    actions:
      create-issue:
        description: Creates an issue
        input: IssueInput
        output: Issue
        endpoint: POST /issues
models:
  IssueInput:
    title: string
  Issue:
    id: string
    title: string
    state: open | closed
`;

const SYNC = `import type { Issue, ServiceSync } from '../../models';

export default async function syncIssues(svc: ServiceSync): Promise<void> {
  const { owner } = await svc.getMetadata<{ owner?: string }>();
  await svc.log(\`syncing issues of \${owner ?? 'nobody'} since \${svc.lastSyncDate?.toISOString() ?? 'the start'}\`);
  for await (const page of svc.paginate<{ id: number; title: string; state: string }>({
    endpoint: '/issues',
    paginate: { type: 'offset', offsetNameInRequest: 'page', offsetStartsAt: 1, offsetIncrement: 'page', limit: 2, limitNameInRequest: 'per_page' },
  })) {
    await svc.batchSave(page.map((issue): Issue => ({ id: String(issue.id), title: issue.title, state: issue.state as Issue['state'] })), 'Issue');
  }
  await svc.updateMetadata({ cursor: 'after-run' });
}
`;

const ACTION = `import { ActionError, type Issue, type IssueInput, type ServiceAction } from '../../models';

export default async function createIssue(svc: ServiceAction, input: IssueInput): Promise<Issue> {
  if (input.title === '') throw new ActionError({ message: 'title must not be empty' });
  return (await svc.post<Issue>({ endpoint: '/issues', data: input })).data;
}
`;

const issues = [
  { id: 1, title: 'Login is slow', state: 'open' },
  { id: 2, title: 'Typo', state: 'closed' },
  { id: 3, title: 'Crash', state: 'open' },
];
let served = issues;

const cli = (args: string[], env: Record<string, string> = {}) => runLocalCli(h, root, args, env);

function writeProject(sync = SYNC): void {
  const folder = join(root, 'service-integrations');
  mkdirSync(join(folder, INTEGRATION, 'syncs'), { recursive: true });
  mkdirSync(join(folder, INTEGRATION, 'actions'), { recursive: true });
  writeFileSync(join(folder, 'service.yaml'), YAML);
  writeFileSync(join(folder, INTEGRATION, 'syncs', 'issues.ts'), sync);
  writeFileSync(join(folder, INTEGRATION, 'actions', 'create-issue.ts'), ACTION);
}

beforeAll(async () => {
  h = await startApiHarness();
  root = mkdtempSync(join(tmpdir(), 'service-dryrun-'));
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'c1',
    credentials: { type: 'API_KEY', apiKey: API_KEY },
    metadata: { owner: 'acme' },
  });
  h.fake.setHandler((request, response, body) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (request.headers.authorization !== `Bearer ${API_KEY}`) return json(response, 401, { error: 'no key' });
    if (request.method === 'GET' && url.pathname === '/api/issues') {
      const page = Number(url.searchParams.get('page'));
      return json(response, 200, served.slice((page - 1) * 2, page * 2));
    }
    if (request.method === 'POST' && url.pathname === '/api/issues') {
      return json(response, 201, { id: '9', state: 'open', ...(JSON.parse(body) as object) });
    }
    return json(response, 404, { error: 'not found' });
  });
  writeProject();
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

async function recordsInCache(): Promise<number> {
  const { rows } = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM records');
  return Number(rows[0]?.n);
}

describe('service dryrun', () => {
  it('runs the local sync with the connection, prints requests, logs and records, and saves nothing', async () => {
    const before = h.fake.requests.length;
    const result = await cli(['dryrun', 'issues', 'c1', '--last-sync-date', '2026-11-01T00:00:00Z']);
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    // Pages of 2: the second, short page ends the walk.
    expect(result.out).toMatch(
      /GET \/issues\?per_page=2&page=1 → 200 \(\d+ ms\)\nbatchSave Issue ×2 \(2 in this run\)/,
    );
    expect(result.out).toMatch(/GET \/issues\?per_page=2&page=2 → 200/);
    expect(result.out).toMatch(/\[info\] syncing issues of acme since 2026-11-01T00:00:00.000Z/);
    expect(result.out).toMatch(/Issue: 3 record\(s\) would be saved/);
    expect(result.out).toContain('{"id":"1","title":"Login is slow","state":"open"}');
    expect(result.out).toMatch(/metadata update: \{"cursor":"after-run"\}/);
    expect(result.out).toMatch(/every record fits its model/);
    // The requests reached the external API with the connection's credentials (checked by the fake).
    expect(h.fake.requests.slice(before).map((r) => r.url)).toEqual([
      '/api/issues?per_page=2&page=1',
      '/api/issues?per_page=2&page=2',
    ]);
    // Nothing stored: no record, metadata unchanged, and the key never printed.
    expect(await recordsInCache()).toBe(0);
    expect((await h.api.connections.get({ connectionId: 'c1', providerConfigKey: INTEGRATION })).metadata).toEqual({
      owner: 'acme',
    });
    expect(result.out).not.toContain(API_KEY);
  });

  it('exits 1 and names the path of every field that breaks the model', async () => {
    served = [...issues, { id: 4, title: 'Merged one', state: 'merged' }];
    try {
      const result = await cli(['dryrun', 'issues', 'c1', '--metadata', '{"owner":"other"}']);
      expect(result.code).toBe(1);
      expect(result.out).toMatch(/syncing issues of other/);
      expect(result.err).toMatch(/Issue record 1 \(id "4"\): state: expected "open" \| "closed", got "merged"/);
    } finally {
      served = issues;
    }
  });

  it('runs an action with --input and prints its output; an ActionError exits 1', async () => {
    const ok = await cli(['dryrun', 'create-issue', 'c1', '--input', '{"title":"New"}']);
    expect(ok.err).toBe('');
    expect(ok.code).toBe(0);
    expect(ok.out).toMatch(/POST \/issues → 201/);
    expect(ok.out).toMatch(/"title": "New"/);
    const refused = await cli(['dryrun', 'create-issue', 'c1', '--input', '{"title":""}']);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/the run failed: action_script_failure: .*title must not be empty/);
  });

  it('fails clearly on an unknown script, an unknown connection, another environment’s key and bad options', async () => {
    const unknown = await cli(['dryrun', 'nope', 'c1']);
    expect(unknown.code).toBe(1);
    expect(unknown.err).toMatch(/no sync or action 'nope' in service.yaml/);
    const missing = await cli(['dryrun', 'issues', 'c404']);
    expect(missing.code).toBe(1);
    expect(missing.err).toMatch(/connection 'c404' of fake-api: 404 unknown_connection/);
    const otherEnv = await cli(['dryrun', 'issues', 'c1'], { SERVICE_SECRET_KEY: h.envB.secretKey });
    expect(otherEnv.code).toBe(1);
    expect(otherEnv.err).toMatch(/404/);
    const badDate = await cli(['dryrun', 'issues', 'c1', '--last-sync-date', 'yesterday']);
    expect(badDate.code).toBe(2);
    expect(badDate.err).toMatch(/--last-sync-date 'yesterday' is not a date/);
    expect((await cli(['dryrun', 'issues'])).code).toBe(2);
    const help = await cli(['dryrun', '--help']);
    expect(help.out).toMatch(/Examples:\n {2}npx service dryrun issues user-42/);
  });
});

describe('POST /connections/:id/authorize', () => {
  it('injects the credentials for the provider only, for the environment of the key only', async () => {
    const ref = { connectionId: 'c1', providerConfigKey: INTEGRATION };
    const authorized = await h.api.connections.authorizeRequest(ref, {
      method: 'GET',
      endpoint: '/issues',
      params: { a: 1 },
    });
    expect(authorized.url).toBe(`${h.fake.url}/api/issues?a=1`);
    expect(authorized.headers['Authorization']).toBe(`Bearer ${API_KEY}`);
    expect(authorized).not.toHaveProperty('secrets');
    // Another host: no credentials.
    const elsewhere = await h.api.connections.authorizeRequest(ref, {
      method: 'GET',
      endpoint: 'http://127.0.0.2:9/x',
    });
    expect(JSON.stringify(elsewhere)).not.toContain(API_KEY);
    await expect(
      h.api.connections.authorizeRequest(ref, {
        method: 'GET',
        endpoint: '/x',
        base_url_override: 'http://127.0.0.2:9',
      }),
    ).rejects.toMatchObject({ status: 403, code: 'base_url_not_allowed' });
    await expect(
      h.apiB.connections.authorizeRequest(ref, { method: 'GET', endpoint: '/issues' }),
    ).rejects.toMatchObject({
      status: 404,
    });
    await expect(
      h.anonymous.connections.authorizeRequest(ref, { method: 'GET', endpoint: '/issues' }),
    ).rejects.toMatchObject({
      status: 401,
    });
  });
});

describe('service test', () => {
  it('records with --save-responses, snapshots with --update, then runs without the network and catches a change', async () => {
    const caseDir = 'service-integrations/tests/fake-api/issues/first-run';
    const recorded = await cli(['dryrun', 'issues', 'c1', '--save-responses', caseDir]);
    expect(recorded.code).toBe(0);
    expect(recorded.out).toMatch(/saved 2 exchange\(s\) to .*fixture\.json/);
    const fixture = readFileSync(join(root, caseDir, 'fixture.json'), 'utf8');
    expect(fixture).not.toContain(API_KEY);

    const noSnapshot = await cli(['test']);
    expect(noSnapshot.code).toBe(1);
    expect(noSnapshot.err).toMatch(/no snapshot.json; run 'service test --update'/);
    expect((await cli(['test', '--update'])).code).toBe(0);
    const snapshot = JSON.parse(readFileSync(join(root, caseDir, 'snapshot.json'), 'utf8')) as {
      records: { Issue: unknown[] };
    };
    expect(snapshot.records.Issue).toHaveLength(3);

    // No network: the external API is gone for this part, and no request reaches it.
    const before = h.fake.requests.length;
    h.fake.setHandler((_request, response) => json(response, 500, { error: 'the network was used' }));
    const passed = await cli(['test']);
    expect(passed.err).toBe('');
    expect(passed.code).toBe(0);
    expect(passed.out).toMatch(/✓ service-integrations\/tests\/fake-api\/issues\/first-run\n/);
    expect(passed.out).toMatch(/1 passed, 0 failed/);

    // A script change that alters the records is caught, at the line that differs.
    writeProject(SYNC.replace('title: issue.title', 'title: issue.title.toUpperCase()'));
    const changed = await cli(['test']);
    expect(changed.code).toBe(1);
    expect(changed.err).toMatch(/the run differs from snapshot.json/);
    expect(changed.err).toMatch(/- .*"title": "Login is slow"/);
    expect(changed.err).toMatch(/\+ .*"title": "LOGIN IS SLOW"/);

    // A request the fixture does not hold fails the run, naming it.
    writeProject(SYNC.replace("endpoint: '/issues'", "endpoint: '/tickets'"));
    const unrecorded = await cli(['test', '--update']);
    expect(unrecorded.out).toMatch(/wrote snapshot.json/);
    expect(readFileSync(join(root, caseDir, 'snapshot.json'), 'utf8')).toMatch(/fixture_missing[\s\S]*GET \/tickets/);
    expect(h.fake.requests.length).toBe(before);
    writeProject();
  });
});

describe('service init', () => {
  it('writes an example test that service test runs and passes, without the network', async () => {
    const own = root;
    root = mkdtempSync(join(tmpdir(), 'service-init-test-'));
    try {
      const init = await cli(['init']);
      expect(init.code).toBe(0);
      expect(init.out).toMatch(
        /created service-integrations\/tests\/github\/create-issue\/opens-an-issue\/fixture.json/,
      );
      const result = await cli(['test']);
      expect(result.err).toBe('');
      expect(result.code).toBe(0);
      expect(result.out).toMatch(/✓ service-integrations\/tests\/github\/create-issue\/opens-an-issue\n/);
    } finally {
      rmSync(root, { recursive: true, force: true });
      root = own;
    }
  });
});
