/**
 * The production topology (src/devstack/topology.ts, `npm run topology`): the real Temporal server
 * v1.29.1 on Postgres persistence, one SERVICE_ROLE=api process and two SERVICE_ROLE=worker processes,
 * each an OS process of its own, driven through the API as an application drives it. Three things a
 * deployment must survive, each with exact counts: a SIGKILLed worker's run taken over by the other; a
 * Temporal server crash mid-sync; a rolling upgrade to a second worker build whose workflow code
 * changed behind `patched()`, while runs are in flight.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client, type Connection } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../../src/client/index.js';
import { createEnvironmentStore } from '../../src/connections/environmentStore.js';
import { startTopology, type ServiceProcess, type Topology } from '../../src/devstack/topology.js';
import { Encryptor } from '../../src/connections/encryption.js';
import { createDataConverter } from '../../src/runtime/payloadStorage.js';
import { buildWorkflowBundle, saveWorkflowBundle } from '../../src/temporal/workflowBundle.js';
import { eventually } from '../helpers/eventually.js';
import { deployPagedApi, expectExact, FakeApi, finishedRun, trigger } from '../kit/pagedApi.js';
import { stack, uniqueName } from '../kit/stack.js';
import { useDatabase } from '../kit/db.js';
import { connectTemporal } from '../../src/temporal/connection.js';

const V2_ENTRY = resolve(import.meta.dirname, 'fixtures', 'workflowsV2.ts');

let topology: Topology;
let api: ReturnType<typeof createClient>;
let temporal: Client;
let temporalConnection: Connection;
let pool: Awaited<ReturnType<typeof useDatabase>>['pool'];
const fake = new FakeApi();
const scratch = mkdtempSync(join(tmpdir(), 'topology-test-'));

beforeAll(async () => {
  await fake.start();
  const database = await useDatabase();
  pool = database.pool;
  const providersFile = fake.writeProvidersFile(scratch);
  // The first build, prebuilt once as `npm run bundle:workflows` makes it (workers load it at start).
  saveWorkflowBundle(await buildWorkflowBundle(), join(scratch, 'v1', 'workflow-bundle.js'));
  topology = await startTopology({
    dataDir: join(scratch, 'state'),
    postgres: { url: database.url, adminUrl: stack().postgresAdminUrl },
    temporalDatabasePrefix: uniqueName('temporal'),
    taskQueue: uniqueName('tq'),
    env: {
      SERVICE_PROVIDERS_FILE: providersFile,
      SERVICE_OUTBOUND_ALLOW: new URL(fake.url).host,
      SERVICE_LOG_LEVEL: 'silent',
      SERVICE_WORKFLOW_BUNDLE: join(scratch, 'v1', 'workflow-bundle.js'),
    },
  });
  const { secretKey } = await createEnvironmentStore({ db: pool }).create({ name: 'topology' });
  api = createClient({ baseUrl: topology.apiUrl, secretKey });
  temporalConnection = await connectTemporal({ address: topology.temporal.address });
  temporal = new Client({
    connection: temporalConnection,
    namespace: topology.temporal.namespace,
    dataConverter: createDataConverter({
      db: pool,
      encryptor: new Encryptor([Buffer.from(topology.encryptionKey, 'base64')]),
    }),
  });
  await deployPagedApi(api, ['kill', 'restart', 'up1', 'up2', 'up3', 'after']);
}, 600_000);

afterAll(async () => {
  await temporalConnection?.close();
  await topology?.stop();
  await fake.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

/**
 * The sync entities' executions (a run runs inside its entity's execution, one execution per run), of
 * one connection or all, newest first, with the pids of the workers that took their workflow tasks.
 */
async function runExecutions(connection?: string): Promise<{ workflowId: string; runId: string; pids: number[] }[]> {
  const found: { workflowId: string; runId: string; pids: number[] }[] = [];
  for await (const execution of temporal.workflow.list({ query: "WorkflowType = 'manageSync'" })) {
    if (connection !== undefined && !execution.workflowId.includes(`:${connection}:`)) continue;
    const history = await temporal.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory();
    const pids = (history.events ?? [])
      .map((event) => event.workflowTaskStartedEventAttributes?.identity)
      .filter((identity): identity is string => Boolean(identity))
      .map((identity) => Number(identity.split('@')[0]));
    found.push({ workflowId: execution.workflowId, runId: execution.runId, pids });
  }
  return found;
}

/** Waits for a condition with a generous limit (a loaded 2-core machine). */
async function until(what: string, condition: () => boolean, timeoutMs = 120_000): Promise<void> {
  await eventually(() => Promise.resolve(condition() ? true : undefined), timeoutMs, what);
}

function alive(process: ServiceProcess): boolean {
  return process.child.exitCode === null && process.child.signalCode === null;
}

describe('the production topology', () => {
  it('a SIGKILLed worker’s run is taken over by the other worker, every record stored once', async () => {
    fake.hold('kill', 5);
    await trigger(api, 'kill');
    await until('page 6 of the run', () => fake.pagesSeen('kill') >= 6);
    // The worker running it: the one that took its latest workflow task.
    const running = await eventually(
      async () => (await runExecutions('kill'))[0],
      60_000,
      'the sync entity execution of the run',
    );
    const owner = running.pids.at(-1);
    const victim = topology.workers.find((worker) => worker.child.pid === owner);
    const survivor = topology.workers.find((worker) => worker !== victim)!;
    expect(victim, `the run's worker pid ${owner} is one of the topology's workers`).toBeDefined();
    const requestsAtKill = fake.requests('kill');
    victim!.child.kill('SIGKILL');
    const killedAt = Date.now();
    await victim!.exited;
    fake.open('kill');
    await until('a request after the kill', () => fake.requests('kill') > requestsAtKill);
    const resumedMs = Date.now() - killedAt;
    const run = await finishedRun(api, 'kill');
    const doneMs = Date.now() - killedAt;
    const repeated = await expectExact(fake, pool, 'kill', run, 1);
    // The run's execution continued as new once the run was recorded: the newest one's first task.
    const after = await eventually(
      async () => (await runExecutions('kill')).find((execution) => execution.pids.length > 0),
      60_000,
      'a workflow task of the sync entity after the run',
    );
    expect(after.pids.at(-1)).toBe(survivor.child.pid);
    expect(alive(survivor) && alive(topology.api)).toBe(true);
    console.log(
      `[topology] worker killed at page ${requestsAtKill}: requests resumed ${resumedMs} ms after the kill on the other worker, ` +
        `run done ${doneMs} ms after it; ${repeated} page fetched twice`,
    );
    // The topology has two workers again for what follows.
    topology.workers = [survivor, await topology.startWorker({ name: 'worker-3' })];
  }, 600_000);

  it('survives a Temporal server crash mid-sync: every process lives, the run completes exactly', async () => {
    await trigger(api, 'restart');
    await until('page 8 of the run', () => fake.pagesSeen('restart') >= 8);
    const started = Date.now();
    await topology.temporal.restart({ signal: 'SIGKILL' });
    const downMs = Date.now() - started;
    const run = await finishedRun(api, 'restart');
    // A page in flight when the server went may be fetched again once (its step was not recorded yet).
    const repeated = await expectExact(fake, pool, 'restart', run, 1);
    for (const process of [topology.api, ...topology.workers]) expect(alive(process), process.name).toBe(true);
    console.log(
      `[topology] Temporal server killed and back in ${downMs} ms; run exact, ${repeated} page fetched twice`,
    );
  }, 600_000);

  it('rolling upgrade: a second worker build (manageSync changed behind patched()) replaces the first while runs are in flight; every run completes', async () => {
    const v2Bundle = join(scratch, 'v2', 'workflow-bundle.js');
    saveWorkflowBundle(await buildWorkflowBundle(V2_ENTRY), v2Bundle);
    const inFlight = ['up1', 'up2', 'up3'];
    for (const connection of inFlight) fake.hold(connection, 5);
    for (const connection of inFlight) await trigger(api, connection);
    await until('page 6 of every run', () => inFlight.every((connection) => fake.pagesSeen(connection) >= 6));
    const oldWorkers = topology.workers;
    const newWorkers = [
      await topology.startWorker({ name: 'worker-v2-a', env: { SERVICE_WORKFLOW_BUNDLE: v2Bundle } }),
      await topology.startWorker({ name: 'worker-v2-b', env: { SERVICE_WORKFLOW_BUNDLE: v2Bundle } }),
    ];
    // The new build is up; every old worker is told to stop (SIGTERM: it drains, SIGKILL after 30 s as
    // an orchestrator would) while the runs are held, then the runs are released: each finishes the
    // step it was in on the old build and goes on on the new one. (Releasing them before the second
    // old worker stopped let that worker finish every run on an idle machine: nothing moved.)
    const stopping = oldWorkers.map((worker) => worker.stop('SIGTERM'));
    for (const connection of inFlight) fake.open(connection);
    await Promise.all(stopping);
    topology.workers = newWorkers;
    const newPids = new Set(newWorkers.map((worker) => worker.child.pid));
    const repeats: number[] = [];
    for (const connection of inFlight)
      repeats.push(await expectExact(fake, pool, connection, await finishedRun(api, connection), 1));
    // A run after the upgrade runs the new code: the patch's marker and memo are in its history.
    await trigger(api, 'after');
    await expectExact(fake, pool, 'after', await finishedRun(api, 'after'), 0);

    const executions = await runExecutions();
    const newest = executions.find((execution) => execution.pids.every((pid) => newPids.has(pid)))!;
    const description = await temporal.workflow.getHandle(newest.workflowId, newest.runId).describe();
    expect(description.memo).toEqual({ build: 'v2' });
    const moved = executions.filter(
      (execution) => execution.pids.some((pid) => !newPids.has(pid)) && execution.pids.some((pid) => newPids.has(pid)),
    );
    // The runs held on the first build went on on the second: their workflow tasks were taken by both.
    expect(moved.length).toBeGreaterThanOrEqual(1);
    // Every history, old build's parts included, replays on the new build without non-determinism.
    const histories = await Promise.all(
      executions.map(async (execution) => ({
        workflowId: execution.workflowId,
        history: await temporal.workflow.getHandle(execution.workflowId, execution.runId).fetchHistory(),
      })),
    );
    const replays = Worker.runReplayHistories(
      { workflowBundle: { codePath: v2Bundle }, dataConverter: temporal.options.dataConverter },
      histories,
    );
    for await (const result of replays) expect(result.error, result.workflowId).toBeUndefined();
    console.log(
      `[topology] rolling upgrade: ${inFlight.length} runs in flight; ${moved.length} sync entity executions had workflow tasks on both builds; ` +
        `pages fetched twice: ${repeats.join(', ')}; ${histories.length} histories replayed on the new build`,
    );
    for (const process of [topology.api, ...newWorkers]) expect(alive(process), process.name).toBe(true);
  }, 900_000);
});
