/**
 * SIGTERM to a worker process (`SERVICE_ROLE=worker`, src/main.ts), as Kubernetes and `docker stop`
 * send it, in the middle of a sync run's request: the process drains (the request in flight finishes,
 * its step completes) and exits 0 on its own, and the other worker process carries the run to its end
 * with every record exactly once. Two worker processes of the service over the test run's Temporal and
 * a database of this file; the API's composition in this process deploys and imports the connection.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/client/index.js';
import { createService } from '../src/service.js';
import { loadSettings } from '../src/settings.js';
import { eventually } from './helpers/eventually.js';
import { stack, uniqueName } from './kit/stack.js';
import { useDatabase } from './kit/db.js';
import { deferCleanup } from './kit/cleanup.js';
import { startFakeUpstream } from './kit/upstream.js';
import { bundle } from './kit/scripts.js';

const REPO = fileURLToPath(new URL('../', import.meta.url));
const TSX_LOADER = pathToFileURL(join(REPO, 'node_modules/tsx/dist/loader.mjs')).href;
const INTEGRATION = 'pages';
const dir = mkdtempSync(join(tmpdir(), 'worker-shutdown-'));
const children: ChildProcess[] = [];

afterAll(async () => {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

const YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      items:
        description: Three pages of items
        output: Item
        endpoint: GET /items
        sync_type: full
        runs: 1h
models:
  Item:
    id: string
`;

const SYNC = bundle(`async function (svc) {
  for (let page = 1; page <= 3; page++) {
    const res = await svc.get({ endpoint: '/items', params: { page } });
    await svc.batchSave(res.data.items, 'Item');
  }
}`);

interface WorkerProcess {
  child: ChildProcess;
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** src/main.ts as a worker process; resolves once it says it is ready. */
async function startWorker(env: Record<string, string>): Promise<WorkerProcess> {
  const child = spawn(process.execPath, ['--import', TSX_LOADER, join(REPO, 'src/main.ts')], {
    env: { ...process.env, ...env, SERVICE_ROLE: 'worker' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const early = exited.then(({ code, signal }) => {
    throw new Error(`the worker exited (${code ?? signal}) before it was ready:\n${output}`);
  });
  await Promise.race([
    eventually(async () => (/^ready\./m.test(output) ? true : undefined), 180_000, 'the worker to be ready'),
    early,
  ]);
  early.catch(() => undefined);
  return { child, output: () => output, exited };
}

describe('a worker process that gets SIGTERM during a request', () => {
  it('lets the request finish, exits 0, and the other worker completes the run exactly', async () => {
    const { pool, url } = await useDatabase();
    const { temporalAddress, temporalNamespace } = stack();
    const taskQueue = uniqueName('shutdown');

    // Page 2 is held on its first request until the test lets it go: the worker gets SIGTERM then.
    let releasePage2: () => void = () => undefined;
    const page2Held = new Promise<void>((resolve) => (releasePage2 = resolve));
    let page2Arrived: () => void = () => undefined;
    const page2Requested = new Promise<void>((resolve) => (page2Arrived = resolve));
    const page2Answers: { finished: boolean }[] = [];
    const requests: string[] = [];
    const answer = (response: ServerResponse, page: number): void => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ items: [{ id: `${page}a` }, { id: `${page}b` }] }));
    };
    const fake = await startFakeUpstream((request, response) => {
      const page = Number(new URL(request.url ?? '/', 'http://x').searchParams.get('page'));
      requests.push(`page ${page}`);
      if (page !== 2) return answer(response, page);
      const state = { finished: false };
      page2Answers.push(state);
      response.on('finish', () => (state.finished = true));
      if (page2Answers.length > 1) return answer(response, page);
      page2Arrived();
      void page2Held.then(() => answer(response, page));
    });
    const fakePort = new URL(fake.url).port;

    const providers = join(dir, 'providers.yaml');
    writeFileSync(
      providers,
      `${INTEGRATION}:\n  display_name: Pages\n  auth_mode: API_KEY\n  api_key: { in: header, name: Authorization, format: 'Bearer \${apiKey}' }\n  base_url: http://127.0.0.1:${fakePort}\n`,
    );
    const key = randomBytes(32);
    const env = {
      DATABASE_URL: url,
      DATABASE_POOL_SIZE: '5',
      TEMPORAL_ADDRESS: temporalAddress,
      TEMPORAL_NAMESPACE: temporalNamespace,
      TEMPORAL_TASK_QUEUE: taskQueue,
      SERVICE_ENCRYPTION_KEY: key.toString('base64'),
      SERVICE_PROVIDERS_FILE: providers,
      SERVICE_OUTBOUND_ALLOW: `127.0.0.1:${fakePort}`,
      SERVICE_THREAD_MARKS_DIR: join(dir, 'marks'),
    };
    // Both at once: each bundles the workflow code at start.
    const [first, second] = await Promise.all([startWorker(env), startWorker(env)]);
    const byPid = new Map([first, second].map((worker) => [worker.child.pid, worker]));

    // The API of the service in this process, from the workers' own settings (same database, key,
    // providers and task queue): environment, integration, deployment, connection.
    const service = await createService(loadSettings({ ...env, SERVICE_ROLE: 'api', PORT: '0' }), {
      db: pool,
      log: () => undefined,
      apiDeps: { logger: { info: () => undefined, error: () => undefined } },
    });
    deferCleanup(() => service.stop());
    await service.start();
    const { temporal } = service;
    const { connections, deployments, syncs } = service.parts;
    const { environment, secretKey } = await connections.environments.create({ name: 'shutdown' });
    const api = createClient({ baseUrl: service.apiUrl ?? '', secretKey });
    await api.integrations.create({ unique_key: INTEGRATION, provider: INTEGRATION });
    await deployments.apply(
      environment.id,
      { yaml: YAML, scripts: [{ integration: INTEGRATION, kind: 'sync', name: 'items', code: SYNC }] },
      { allowDestructive: false },
    );
    await api.connections.import({
      provider_config_key: INTEGRATION,
      connection_id: 'c1',
      credentials: { type: 'API_KEY', apiKey: 'k-shutdown' },
    });

    // The run is at page 2: find the worker process executing it (its identity is pid@host).
    await eventually(() => page2Requested.then(() => true), 120_000, 'the request for page 2');
    const runId = await eventually(
      async () => {
        for await (const run of temporal.workflow.list({
          // The run runs inside its sync entity's execution (one execution per run).
          query: `WorkflowType = 'manageSync' AND TaskQueue = '${taskQueue}' AND ExecutionStatus = 'Running'`,
        }))
          return run.workflowId;
        return undefined;
      },
      30_000,
      'the run in visibility',
    );
    const identity = await eventually(
      async () => {
        const history = await temporal.workflow.getHandle(runId).fetchHistory();
        const started = (history.events ?? []).filter((event) => event.workflowTaskStartedEventAttributes);
        return started.at(-1)?.workflowTaskStartedEventAttributes?.identity ?? undefined;
      },
      30_000,
      'the identity of the worker running it',
    );
    const running = byPid.get(Number(identity.split('@')[0]));
    expect(running, `identity ${identity}`).toBeDefined();
    const other = running === first ? second : first;

    const signalledAt = Date.now();
    running!.child.kill('SIGTERM');
    // The request is still in flight when its answer comes, a moment after the signal.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    releasePage2();
    const exit = await running!.exited;
    const exitMs = Date.now() - signalledAt;

    const ref = { environmentId: environment.id, integrationId: INTEGRATION, connectionId: 'c1', syncName: 'items' };
    const result = await eventually(
      async () => (await syncs.status(ref)).latestResult ?? undefined,
      120_000,
      'the run to finish',
    );
    const runMs = Date.now() - signalledAt;
    console.log(
      `[worker shutdown] SIGTERM → exit ${exitMs} ms (${JSON.stringify(exit)}); run done ${runMs} ms after the signal; page 2 answered ${page2Answers.length}× (first finished: ${page2Answers[0]?.finished}); requests ${requests.join(', ')}`,
    );
    expect(exit).toEqual({ code: 0, signal: null });
    expect(running!.output()).toMatch(/stopping…[\s\S]*stopped\.\s*$/);
    // The held request was answered in full to the worker that sent it, not cut off by the shutdown.
    expect(page2Answers[0]?.finished).toBe(true);
    expect(result.models['Item']).toEqual({ added: 6, updated: 0, deleted: 0, unchanged: 0 });
    expect(result.recordCounts).toEqual({ Item: 6 });
    // The other worker is still running and served the rest.
    expect(other.child.exitCode).toBeNull();
  }, 600_000);
});
