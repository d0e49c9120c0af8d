/**
 * The README walk-through (docs/walkthrough.md), run as a user runs it: every fenced `sh` block of the
 * page, in order, in bash, against a real `npm start` child process and the example's fake tracker.
 * Blocks marked `background` are long-running commands (a terminal of their own); the others run one
 * after the other, sharing exported variables as one shell would.
 *
 * The only liberty taken with the page is the address of things: the test gives the service, the fake
 * tracker and the data folder free ports and places of their own (so it can run beside a developer's
 * `npm start`), by replacing those literals in the blocks. Postgres is a fresh, empty database on the
 * test run's server (the start command applies the migrations itself); Temporal is the dev server that
 * `npm start` starts, with its Web UI, as on a user's machine.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stack, uniqueName } from '../kit/stack.js';

const ROOT = resolve(import.meta.dirname, '../..');
const DOC = join(ROOT, 'docs/walkthrough.md');

interface Block {
  step: string;
  background: boolean;
  code: string;
}

/** The `sh` blocks of the page: ```sh step=<name> [background]. */
export function parseBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  for (const match of markdown.matchAll(/^```sh([^\n]*)\n([\s\S]*?)^```$/gm)) {
    const info = match[1] ?? '';
    const step = /\bstep=([\w-]+)/.exec(info)?.[1];
    if (step === undefined) throw new Error(`docs/walkthrough.md: a sh block has no step=… (${info.trim()})`);
    blocks.push({ step, background: /\bbackground\b/.test(info), code: match[2] ?? '' });
  }
  return blocks;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolvePort(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

/** A long-running command in its own process group, like a terminal of its own. */
interface Background {
  child: ChildProcess;
  output: () => string;
  /** How the command ended: its exit code, or the signal that ended it (bash ends by SIGINT after a Ctrl-C). */
  exited: Promise<string>;
}

function startBackground(code: string, env: NodeJS.ProcessEnv): Background {
  const child = spawn('bash', ['-c', `set -eo pipefail\n${code}`], { cwd: ROOT, env, detached: true });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<string>((resolveExit) =>
    child.once('exit', (code, signal) => resolveExit(signal ?? `exit ${code}`)),
  );
  return { child, output: () => output, exited };
}

async function waitForOutput(proc: Background, pattern: RegExp, timeoutMs: number, what: string): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = proc.output();
    if (pattern.test(text)) return text;
    if (proc.child.exitCode !== null) throw new Error(`${what} exited (${proc.child.exitCode}):\n${text}`);
    if (Date.now() > deadline) throw new Error(`${what} not ready after ${timeoutMs / 1000} s:\n${text}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Ctrl-C: SIGINT to the whole process group; SIGKILL when it does not end in time. */
async function interrupt(proc: Background, timeoutMs: number): Promise<string> {
  if (proc.child.exitCode !== null || proc.child.signalCode !== null || proc.child.pid === undefined) {
    return proc.exited;
  }
  try {
    process.kill(-proc.child.pid, 'SIGINT');
  } catch {
    return proc.exited;
  }
  const timer = new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), timeoutMs));
  const result = await Promise.race([proc.exited, timer]);
  if (result !== 'timeout') return result;
  try {
    process.kill(-proc.child.pid, 'SIGKILL');
  } catch {
    // already gone
  }
  return `killed after ${timeoutMs / 1000} s`;
}

async function adminQuery(sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: stack().postgresAdminUrl, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

const blocks = parseBlocks(readFileSync(DOC, 'utf8'));
let work: string;
let stateFile: string;
let databaseName: string;
const addresses = { api: 0, fake: 0, ui: '', dataDir: '' };
const background = new Map<string, Background>();
let serviceEnv: NodeJS.ProcessEnv;

/** The page's literal addresses, replaced by this run's. */
function localize(code: string): string {
  return code
    .replaceAll('127.0.0.1:3003', `127.0.0.1:${addresses.api}`)
    .replaceAll('http://127.0.0.1:8233', addresses.ui || 'http://127.0.0.1:8233')
    .replace(/\b4010\b/g, String(addresses.fake))
    .replaceAll('.service-data/', `${addresses.dataDir}/`)
    .replaceAll('/tmp/my-integrations', join(work, 'my-integrations'))
    .replaceAll('/tmp/tracker-', join(work, 'tracker-'));
}

/** Runs a block in bash with the variables the earlier blocks exported. */
function runBlock(block: Block): { status: number | null; stdout: string; stderr: string } {
  const script = `set -eo pipefail\nsource ${JSON.stringify(stateFile)}\n${localize(block.code)}\nexport -p > ${JSON.stringify(stateFile)}\n`;
  const result = spawnSync('bash', ['-c', script], {
    cwd: ROOT,
    env: baseEnv(),
    encoding: 'utf8',
    timeout: 120_000,
    killSignal: 'SIGKILL',
  });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

/** The environment of a fresh terminal: none of the service's variables from the test process. */
function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) {
    if (/^(SERVICE_|TEMPORAL_|DATABASE_|PORT$|HOST$|VITEST|NODE_ENV$)/.test(key)) continue;
    env[key] = value;
  }
  return env;
}

function json<T = Record<string, unknown>>(text: string): T {
  return JSON.parse(text) as T;
}

interface RecordsPage {
  records: ({ id: string; title?: string } & {
    _service_metadata: { last_action: string; deleted_at: string | null };
  })[];
  next_cursor: string | null;
}

/** What each step must show; a step of the page without an entry here fails the test. */
const checks: Record<string, (stdout: string) => void | Promise<void>> = {
  env: (out) => expect(json(out)).toEqual({ status: 'ok', database: 'ok' }),
  register: (out) => expect(json(out)).toMatchObject({ data: { unique_key: 'tracker', provider: 'issue-tracker' } }),
  deploy: (out) => {
    expect(out).toMatch(/built 3 scripts/);
    expect(out).toMatch(/\+ sync tracker\/issues/);
    expect(out).toMatch(/\+ sync tracker\/labels/);
    expect(out).toMatch(/\+ action tracker\/create-issue/);
    expect(out).toMatch(/deployed version 1\./);
  },
  connect: (out) => expect(json(out)).toMatchObject({ connection_id: 'alice', provider_config_key: 'tracker' }),
  'wait-first-sync': (out) => {
    const status = json<{ syncs: { name: string; status: string; latestResult: Record<string, { added: number }> }[] }>(
      out,
    );
    const byName = new Map(status.syncs.map((sync) => [sync.name, sync]));
    expect(byName.get('issues')).toMatchObject({ status: 'SUCCESS', latestResult: { Issue: { added: 5 } } });
    expect(byName.get('labels')).toMatchObject({ status: 'SUCCESS', latestResult: { Label: { added: 3 } } });
  },
  records: (out) => {
    const [issues, labels] = out
      .trim()
      .split('\n')
      .map((line) => json<RecordsPage>(line));
    expect(issues?.records.map((r) => r.id)).toEqual(['1', '2']);
    expect(issues?.next_cursor).toEqual(expect.any(String));
    expect(labels?.records.map((r) => r.id).sort()).toEqual(['bug', 'feature', 'wontfix']);
  },
  change: (out) => expect(out).toMatch(/"title":"Login page is fast now"/),
  trigger: (out) => expect(json<{ syncs: unknown[] }>(out).syncs).toHaveLength(2),
  changes: (out) => {
    const [issues, labels] = out
      .trim()
      .split('\n')
      .map((line) => json<RecordsPage>(line));
    const changed = new Map(issues?.records.map((r) => [r.id, r]));
    expect([...changed.keys()].sort()).toEqual(['1', '2']);
    expect(changed.get('1')).toMatchObject({ title: 'Login page is fast now', state: 'closed' });
    expect(changed.get('1')?._service_metadata.last_action).toBe('UPDATED');
    expect(changed.get('2')?._service_metadata).toMatchObject({
      last_action: 'DELETED',
      deleted_at: expect.any(String),
    });
    expect(labels?.records.map((r) => [r.id, r._service_metadata.last_action])).toEqual([['wontfix', 'DELETED']]);
  },
  action: async (out) => {
    expect(json(out)).toMatchObject({ id: '6', title: 'Write the docs', state: 'open' });
    // The action really reached the tracker: it lists the new issue.
    const listed = await fetch(`http://127.0.0.1:${addresses.fake}/issues?per_page=100`, {
      headers: { 'X-Api-Key': 'demo-key' },
    });
    expect(((await listed.json()) as { title: string }[]).map((issue) => issue.title)).toContain('Write the docs');
  },
  'action-error': (out) => {
    const [body, status] = out.trim().split('\n');
    expect(status).toBe('HTTP 422');
    const payload = { message: 'title must not be empty', field: 'title' };
    expect(json(body ?? '')).toEqual({
      error_type: 'action_script_failure',
      payload,
      error: { code: 'action_script_failure', message: expect.stringContaining('ActionError') as string, payload },
    });
  },
  reference: (out) => expect(out.trim().split('\n')).toEqual(['"/tracker/issues"', '"/tracker/labels"']),
  logs: (out) => {
    const messages = json<{ logs: { message: string }[] }>(out).logs.map((log) => log.message);
    expect(messages).toContain('created issue 6');
    expect(messages).toContain('full fetch: 5 saved, 0 deleted');
    expect(messages.some((m) => /^changes since .*: 1 saved, 1 deleted$/.test(m))).toBe(true);
  },
  'web-ui': (out) => {
    // The sync entities, their runs and the action runs, as the Web UI lists them.
    expect(out.trim().split('\n').length).toBeGreaterThanOrEqual(5);
  },
  init: (out) => expect(out).toMatch(/built 2 scripts/),
};

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'service-walkthrough-'));
  stateFile = join(work, 'shell-state.sh');
  writeFileSync(stateFile, '');
  addresses.api = await freePort();
  addresses.fake = await freePort();
  addresses.dataDir = join(work, 'service-data');
  databaseName = uniqueName('walkthrough');
  await adminQuery(`CREATE DATABASE ${databaseName}`);
  serviceEnv = {
    ...baseEnv(),
    // Postgres: a fresh empty database on the test run's server; Temporal: npm start's own dev server.
    DATABASE_URL: stack().postgresAdminUrl.replace(/\/postgres$/, `/${databaseName}`),
    SERVICE_DATA_DIR: addresses.dataDir,
    PORT: String(addresses.api),
  };
});

afterAll(async () => {
  for (const proc of background.values()) await interrupt(proc, 20_000);
  await adminQuery(`DROP DATABASE IF EXISTS ${databaseName} WITH (FORCE)`).catch(() => undefined);
  rmSync(work, { recursive: true, force: true });
  // What `service compile` wrote into the example (both are git-ignored there).
  rmSync(join(ROOT, 'examples/issue-tracker/service-integrations/build'), { recursive: true, force: true });
  rmSync(join(ROOT, 'examples/issue-tracker/service-integrations/models.ts'), { force: true });
});

const READY: Record<string, { pattern: RegExp; timeoutMs: number }> = {
  'start-service': { pattern: /^ready\. Ctrl-C stops everything\./m, timeoutMs: 180_000 },
  'start-fake-api': { pattern: /fake issue tracker listening on /, timeoutMs: 30_000 },
};

describe('docs/walkthrough.md, step by step', () => {
  it('has the steps the issue asks for, each with a check', () => {
    const steps = blocks.map((block) => block.step);
    expect(steps.slice(0, 2)).toEqual(['start-service', 'start-fake-api']);
    for (const step of ['deploy', 'register', 'connect', 'records', 'changes', 'action', 'reference', 'web-ui']) {
      expect(steps).toContain(step);
    }
    for (const block of blocks.filter((b) => !b.background)) expect(Object.keys(checks)).toContain(block.step);
    expect(new Set(steps).size).toBe(steps.length);
  });

  for (const block of blocks) {
    it(
      block.step,
      async () => {
        if (block.background) {
          const ready = READY[block.step];
          if (!ready) throw new Error(`no readiness pattern for the background step ${block.step}`);
          const started = startBackground(localize(block.code), serviceEnv);
          background.set(block.step, started);
          const output = await waitForOutput(started, ready.pattern, ready.timeoutMs, block.step);
          if (block.step === 'start-service') {
            expect(output).toMatch(new RegExp(`API\\s+http://127\\.0\\.0\\.1:${addresses.api}\\b`));
            expect(output).toMatch(/migrations applied \d+/);
            expect(output).toMatch(/secret key \S+/);
            const ui = /Web UI\s+(http:\/\/\S+)/.exec(output)?.[1];
            expect(ui).toBeDefined();
            addresses.ui = ui ?? '';
          }
          return;
        }
        const result = runBlock(block);
        if (result.status !== 0) {
          throw new Error(`step ${block.step} exited ${result.status}:\n${result.stdout}\n${result.stderr}`);
        }
        await checks[block.step]?.(result.stdout);
      },
      200_000,
    );
  }

  it('Ctrl-C stops everything cleanly; a restart keeps the key, the deployment and the records', async () => {
    const service = background.get('start-service');
    if (!service) throw new Error('the service was not started');
    const firstOutput = service.output();
    expect(['exit 0', 'SIGINT']).toContain(await interrupt(service, 60_000));
    expect(service.output()).toMatch(/stopped\.\s*$/);

    const start = blocks.find((block) => block.step === 'start-service');
    const again = startBackground(localize(start?.code ?? ''), serviceEnv);
    background.set('start-service', again);
    const output = await waitForOutput(again, /^ready\. Ctrl-C stops everything\./m, 180_000, 'the restart');
    expect(output).toMatch(/migrations up to date/);
    expect(/secret key (\S+)/.exec(output)?.[1]).toBe(/secret key (\S+)/.exec(firstOutput)?.[1]);

    const key = readFileSync(join(addresses.dataDir, 'dev-secret-key'), 'utf8').trim();
    const response = await fetch(`http://127.0.0.1:${addresses.api}/tracker/issues`, {
      headers: { Authorization: `Bearer ${key}`, 'Connection-Id': 'alice', 'Provider-Config-Key': 'tracker' },
    });
    expect(response.status).toBe(200);
    const page = (await response.json()) as RecordsPage;
    // Pages are in modification order: 3, 4, 5, then the changed 1 and 2.
    expect(page.records.map((r) => r.id).sort()).toEqual(['1', '2', '3', '4', '5']);
    expect(['exit 0', 'SIGINT']).toContain(await interrupt(again, 60_000));
    expect(again.output()).toMatch(/stopped\.\s*$/);
  }, 300_000);
});
