/**
 * `service replay <run-id>` as a script author runs it: a sync deployed and run by a real service
 * (API, Postgres, Temporal, the fake external API on loopback), then replayed locally from its
 * decoded history (GET /runs/:run_id/history) with the local script in its place.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyncRun } from '../../src/client/index.js';
import { startApiHarness, type ApiHarness } from '../kit/api.js';
import { eventually } from '../helpers/eventually.js';
import { collectPayloadTexts } from '../helpers/historyPayloads.js';
import { stack } from '../kit/stack.js';
import { runLocalCli } from './localCli.js';
import { json } from '../kit/upstream.js';
import { INTEGRATION, PROVIDER } from '../kit/fixtures.js';

const API_KEY = 'key-of-connection-r1-0123456789';
let h: ApiHarness;
let root: string;

const YAML = `integrations:
  ${INTEGRATION}:
    syncs:
      issues:
        description: Issues of the fake API
        output: Issue
        endpoint: GET /issues
        sync_type: full
    actions:
      close-issue:
        description: Closes an issue
        input: IssueRef
        output: Issue
        endpoint: POST /issues/close
models:
  IssueRef:
    id: string
  Issue:
    id: string
    title: string
`;

const SYNC = `import type { Issue, ServiceSync } from '../../models';

export default async function syncIssues(svc: ServiceSync): Promise<void> {
  const { owner } = await svc.getMetadata<{ owner?: string }>();
  await svc.log(\`syncing issues of \${owner ?? 'nobody'}\`);
  for (const page of [1, 2]) {
    const response = await svc.get<{ id: number; title: string }[]>({ endpoint: '/issues', params: { page } });
    if (response.data.length === 0) throw new Error(\`page \${page} is empty\`);
    await svc.batchSave(response.data.map((issue): Issue => ({ id: String(issue.id), title: issue.title })), 'Issue');
  }
}
`;

const ACTION = `import type { Issue, IssueRef, ServiceAction } from '../../models';

export default async function closeIssue(svc: ServiceAction, input: IssueRef): Promise<Issue> {
  await svc.log(\`closing \${input.id}\`);
  const response = await svc.post<{ id: number; title: string }>({ endpoint: \`/issues/\${input.id}/close\` });
  return { id: String(response.data.id), title: response.data.title };
}
`;

// Large enough (> 128 KiB) that the run's history holds only a claim check of the first page.
const LONG_BODY = 'x'.repeat(150_000);
let emptyPage2 = false;

const cli = (args: string[], env: Record<string, string> = {}) => runLocalCli(h, root, args, env);

function writeProject(sync = SYNC): void {
  const folder = join(root, 'service-integrations');
  mkdirSync(join(folder, INTEGRATION, 'syncs'), { recursive: true });
  writeFileSync(join(folder, 'service.yaml'), YAML);
  writeFileSync(join(folder, INTEGRATION, 'syncs', 'issues.ts'), sync);
  mkdirSync(join(folder, INTEGRATION, 'actions'), { recursive: true });
  writeFileSync(join(folder, INTEGRATION, 'actions', 'close-issue.ts'), ACTION);
}

/** Waits (generously) until the sync has `count` finished runs; returns them newest first. */
async function finishedRuns(count: number): Promise<SyncRun[]> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const { runs } = await h.api.syncs.runs({ provider_config_key: INTEGRATION, connection_id: 'r1' });
    if (runs.length >= count) return runs;
    if (Date.now() > deadline) throw new Error(`the sync finished ${runs.length} run(s), not ${count}, in 90 s`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/**
 * The run's history once its execution has closed. A run inside its sync entity (issue 31) is listed
 * by GET /sync/runs from the moment its finishSyncRun step wrote it, a step of the workflow task whose
 * completion brings the run's steps into Temporal's history: on a loaded machine that task can be
 * lost (timed out) and retried, and until then the history holds none of the run's steps.
 */
async function closedRunHistory(runId: string): Promise<Awaited<ReturnType<ApiHarness['api']['runs']['history']>>> {
  return eventually(
    async () => {
      const run = await h.api.runs.history(runId);
      return run.status === 'RUNNING' ? undefined : run;
    },
    90_000,
    `the execution of run ${runId} to close`,
  );
}

let succeeded: SyncRun;
let failed: SyncRun;
let shortLivedRun: string;

beforeAll(async () => {
  h = await startApiHarness();
  root = mkdtempSync(join(tmpdir(), 'service-replay-'));
  await h.api.integrations.create({ unique_key: INTEGRATION, provider: PROVIDER });
  h.fake.setHandler((request, response) => {
    const url = new URL(request.url ?? '/', 'http://x');
    if (request.headers.authorization !== `Bearer ${API_KEY}`) return json(response, 401, { error: 'no key' });
    if (request.method === 'GET' && url.pathname === '/api/issues') {
      const page = Number(url.searchParams.get('page'));
      if (page === 2 && emptyPage2) return json(response, 200, []);
      return json(response, 200, [
        { id: page * 10 + 1, title: `Issue ${page}.1`, ...(page === 1 ? { body: LONG_BODY } : {}) },
        { id: page * 10 + 2, title: `Issue ${page}.2` },
      ]);
    }
    const close = /^\/api\/issues\/(\d+)\/close$/.exec(url.pathname);
    if (request.method === 'POST' && close) return json(response, 200, { id: Number(close[1]), title: 'Closed one' });
    return json(response, 404, { error: 'not found' });
  });
  writeProject();
  const deployed = await cli(['deploy', '--yes']);
  expect(deployed.err).toBe('');
  expect(deployed.code).toBe(0);
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'r1',
    credentials: { type: 'API_KEY', apiKey: API_KEY },
    metadata: { owner: 'acme' },
  });
  [succeeded] = (await finishedRuns(1)) as [SyncRun];
  expect(succeeded.status).toBe('success');
  emptyPage2 = true;
  await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'r1', syncs: ['issues'] });
  [failed] = (await finishedRuns(2)) as [SyncRun];
  expect(failed.status).toBe('failed');
  // An action run of a connection the last test deletes.
  await h.api.connections.import({
    provider_config_key: INTEGRATION,
    connection_id: 'short-lived',
    credentials: { type: 'API_KEY', apiKey: API_KEY },
  });
  const shortLived = { connectionId: 'short-lived', providerConfigKey: INTEGRATION };
  expect(await h.api.actions.trigger(shortLived, { action_name: 'close-issue', input: { id: '8' } })).toMatchObject({
    ok: true,
  });
  shortLivedRun =
    (await h.api.logs.search({ sync: 'close-issue', connection_id: 'short-lived' })).logs[0]?.run_id ?? '';
}, 180_000);
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('GET /runs/:run_id/history', () => {
  it('answers the run decoded to its own environment only, credentials redacted', async () => {
    const run = await closedRunHistory(succeeded.run_id);
    // The run ran in its sync entity's execution (issue 31), which continued as new after it.
    expect(run.workflow_type).toBe('manageSync');
    expect(run.workflow_id).toBe(succeeded.run_id.replace(/:run:[^:]+$/, ''));
    expect(run.status).toBe('CONTINUED_AS_NEW');
    const payloads = collectPayloadTexts(run.history);
    // Decoded: the recorded answer of the fake API is readable (its body as the API sent it, a JSON
    // string in the step's result: src/runtime/httpAnswer.ts) ...
    const answered = JSON.stringify(`"title":"Issue 1.1","body":"${LONG_BODY}"`).slice(1, -1);
    expect(payloads.some((text) => text.includes(answered))).toBe(true);
    // That answer was claim-checked: the history in Temporal holds its hash only.
    const { rows } = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM payload_blobs');
    expect(Number(rows[0]?.n)).toBeGreaterThan(0);
    // ... and nothing is left encrypted or claim-checked.
    expect(payloads.some((text) => text.includes('binary/encrypted') || text.includes('postgres-claim'))).toBe(false);
    expect(payloads.length).toBeGreaterThan(10);
    // Another environment's key, no key, an id of another shape: nothing.
    await expect(h.apiB.runs.history(succeeded.run_id)).rejects.toMatchObject({ status: 404, code: 'unknown_run' });
    await expect(h.anonymous.runs.history(succeeded.run_id)).rejects.toMatchObject({ status: 401 });
    const entity = succeeded.run_id.replace(/:run:[^:]+$/, '');
    await expect(h.api.runs.history(entity)).rejects.toMatchObject({ status: 404 });
    await expect(h.api.runs.history(`${succeeded.run_id}x`)).rejects.toMatchObject({ status: 404 });
    const openapi = await h.api.openapi();
    expect(JSON.stringify(openapi)).toContain('/runs/{run_id}/history');
  });

  it("never answers the connection's credentials, even where the script put them in a step", async () => {
    // getConnection's recorded result holds the key; the API redacts it.
    writeProject(
      SYNC.replace(
        'const { owner }',
        'const connection = await svc.getConnection();\n  await svc.log(`have ${connection.connection_id}`);\n  const { owner }',
      ),
    );
    try {
      expect((await cli(['deploy', '--yes'])).code).toBe(0);
      await h.api.syncs.trigger({ provider_config_key: INTEGRATION, connection_id: 'r1', syncs: ['issues'] });
      const [withConnection] = (await finishedRuns(3)) as [SyncRun];
      // The run of the edited script (it fails at the empty page 2, after reading the connection).
      expect(withConnection.error?.message).toMatch(/page 2 is empty/);
      const run = await closedRunHistory(withConnection.run_id);
      const payloads = collectPayloadTexts(run.history);
      expect(payloads.some((text) => text.includes('"connection_id":"r1"') && text.includes('[redacted]'))).toBe(true);
      expect(payloads.some((text) => text.includes(API_KEY))).toBe(false);
    } finally {
      writeProject();
      expect((await cli(['deploy', '--yes'])).code).toBe(0);
    }
  });
});

describe('service replay', () => {
  it('replays a run with the unchanged local script and prints its steps', async () => {
    const result = await cli(['replay', succeeded.run_id]);
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    // The run's first step begins it and loads its script (run model version 4: one step, not two).
    expect(result.out).toMatch(/ {3}1 {2}beginRun, loadScript [0-9a-f]{12} {2}→ the local script/);
    expect(result.out).toMatch(/getMetadata {2}→ \{"owner":"acme"\}/);
    expect(result.out).toMatch(/GET \/issues\?page=1 {2}→ 200 \[\{"id":11,"title":"Issue 1.1","body":"x+…\n/);
    expect(result.out).toMatch(/batchSave Issue ×2 {2}→ \{"added":2/);
    expect(result.out).toMatch(/GET \/issues\?page=2 {2}→ 200/);
    expect(result.out).toMatch(/the recorded run completed/);
    expect(result.out).toMatch(/the local script repeats all \d+ steps of the recorded run/);
  });

  it('tells at which step an edited script diverges, and exits 1', async () => {
    writeProject(SYNC.replace("endpoint: '/issues'", "endpoint: '/tickets'"));
    try {
      const result = await cli(['replay', succeeded.run_id]);
      expect(result.code).toBe(1);
      expect(result.err).toMatch(
        /the local script diverges from the recorded run at step 3 \(the recorded run took 'GET \/issues\?page=1', the local script takes 'GET \/tickets\?page=1'\)/,
      );
      expect(result.out).toMatch(/✗ {3}3 {2}GET \/issues\?page=1/);
      // A script that takes a step of another kind: Temporal's own check says so too.
      writeProject(
        SYNC.replace('const { owner } = await svc.getMetadata<{ owner?: string }>();', 'const owner = "acme";'),
      );
      const other = await cli(['replay', succeeded.run_id, '--json']);
      expect(other.code).toBe(1);
      const report = JSON.parse(other.out) as { divergence: { step: number }; temporal: string | null };
      expect(report.divergence.step).toBe(2);
      expect(other.err).toMatch(/diverges from the recorded run at step 2/);
    } finally {
      writeProject();
    }
  });

  it('replays a failed run up to its failure', async () => {
    const result = await cli(['replay', failed.run_id]);
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/GET \/issues\?page=2 {2}→ 200 \[\]/);
    expect(result.out).toMatch(/the recorded run failed: .*page 2 is empty/);
    // A fix of the script ends the run otherwise: the replay says so.
    writeProject(SYNC.replace('throw new Error(`page ${page} is empty`)', 'break'));
    try {
      const fixed = await cli(['replay', failed.run_id]);
      expect(fixed.code).toBe(1);
      expect(fixed.err).toMatch(/diverges from the recorded run at step/);
    } finally {
      writeProject();
    }
  });

  it('stops at a debugger statement of the script under a debugger, with the values the run saw', async () => {
    writeProject(
      SYNC.replace('    if (response.data.length === 0)', '    debugger;\n    if (response.data.length === 0)'),
    );
    const out = join(root, 'probe.jsonl');
    const { workflowBundlePath } = stack();
    try {
      const child = await promisify(execFile)(
        process.execPath,
        [
          '--import',
          'tsx',
          '--import',
          fileURLToPath(new URL('../fixtures/debugger/probe.ts', import.meta.url)),
          fileURLToPath(new URL('../../bin/service.js', import.meta.url)),
          'replay',
          succeeded.run_id,
          '--root',
          root,
        ],
        {
          // Where `--import tsx` is found.
          cwd: fileURLToPath(new URL('../..', import.meta.url)),
          timeout: 120_000,
          env: {
            ...process.env,
            SERVICE_URL: h.baseUrl,
            SERVICE_SECRET_KEY: h.envA.secretKey,
            SERVICE_WORKFLOW_BUNDLE: workflowBundlePath,
            DEBUGGER_PROBE_OUT: out,
            DEBUGGER_PROBE_EXPRESSION: 'JSON.stringify(response.data.map((issue) => issue.title))',
          },
        },
      );
      expect(child.stdout).toMatch(/the local script repeats all \d+ steps/);
      expect(existsSync(out)).toBe(true);
      const pauses = readFileSync(out, 'utf8')
        .trim()
        .split('\n')
        .map((line) => JSON.parse(line) as { reason: string; name: string; value: string });
      expect(pauses.map(({ name, value }) => ({ name, value }))).toEqual([
        { name: 'syncIssues', value: '["Issue 1.1","Issue 1.2"]' },
        { name: 'syncIssues', value: '["Issue 2.1","Issue 2.2"]' },
      ]);
    } finally {
      writeProject();
    }
  });

  it('replays an action run, found by its log lines', async () => {
    const answer = await h.api.actions.trigger(
      { connectionId: 'r1', providerConfigKey: INTEGRATION },
      { action_name: 'close-issue', input: { id: '7' } },
    );
    expect(answer).toEqual({ ok: true, output: { id: '7', title: 'Closed one' } });
    const { logs } = await h.api.logs.search({ sync: 'close-issue', connection_id: 'r1' });
    const runId = logs[0]?.run_id ?? '';
    expect(runId).toMatch(new RegExp(`^action:${h.envA.id}:`));
    const result = await cli(['replay', runId]);
    expect(result.err).toBe('');
    expect(result.code).toBe(0);
    expect(result.out).toMatch(/replaying runAction .* with the local fake-api\/actions\/close-issue/);
    expect(result.out).toMatch(/POST \/issues\/7\/close {2}→ 200 \{"id":7,"title":"Closed one"\}/);
    expect(result.out).toMatch(/the recorded run completed: \{"id":"7","title":"Closed one"\}/);
    await expect(h.apiB.runs.history(runId)).rejects.toMatchObject({ status: 404 });
    // The action's script edited to close another issue diverges at that request.
    writeFileSync(
      join(root, 'service-integrations', INTEGRATION, 'actions', 'close-issue.ts'),
      ACTION.replace('/issues/${input.id}/close', '/issues/1/close'),
    );
    try {
      const edited = await cli(['replay', runId]);
      expect(edited.code).toBe(1);
      expect(edited.err).toMatch(/the local script takes 'POST \/issues\/1\/close'/);
    } finally {
      writeProject();
    }
  });

  it("refuses another environment's run, an unknown run and bad arguments clearly", async () => {
    const otherEnv = await cli(['replay', succeeded.run_id], { SERVICE_SECRET_KEY: h.envB.secretKey });
    expect(otherEnv.code).toBe(1);
    expect(otherEnv.err).toMatch(/run '.*': 404 unknown_run/);
    expect((await cli(['replay'])).code).toBe(2);
    const help = await cli(['replay', '--help']);
    expect(help.out).toMatch(/--inspect-brk/);
    expect(help.out).toMatch(/Examples:\n {2}npx service replay/);
  });

  it('says why a run of a deleted connection cannot be replayed', async () => {
    await h.api.connections.delete({ connectionId: 'short-lived', providerConfigKey: INTEGRATION });
    const result = await cli(['replay', shortLivedRun]);
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/its connection was deleted, so the service withholds the run's recorded values/);
  });
});
