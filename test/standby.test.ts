/**
 * `npm start`'s worker (SERVICE_ROLE=all): the API in one process, the worker in a supervised child,
 * and a warm standby child that takes over when the worker is SIGKILLed mid-sync (src/main.ts
 * `superviseWorker`). Each kill: the run resumes on the standby, only the page in flight may be fetched
 * twice, every record is stored once, and a new standby is prepared for the next kill. The time from
 * the kill to the run's next request is printed (docs/architecture.md "Recovery").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Connection } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/client/index.js';
import { createEnvironmentStore } from '../src/connections/environmentStore.js';
import { freePort } from '../src/devstack/process.js';
import { connectTemporal } from '../src/temporal/connection.js';
import { eventually } from './helpers/eventually.js';
import { deployPagedApi, expectExact, FakeApi, finishedRun, trigger } from './kit/pagedApi.js';
import { productionEnv, startService, type ServiceProcess } from './helpers/serviceProcess.js';
import { stack } from './kit/stack.js';
import { useDatabase } from './kit/db.js';

const fake = new FakeApi();
const scratch = mkdtempSync(join(tmpdir(), 'standby-test-'));
let service: ServiceProcess;
let api: ReturnType<typeof createClient>;
let pool: Awaited<ReturnType<typeof useDatabase>>['pool'];
let connection: Connection;
let taskQueue: string;

beforeAll(async () => {
  await fake.start();
  const database = await useDatabase();
  pool = database.pool;
  const port = await freePort();
  const env = productionEnv(database.url, {
    PORT: String(port),
    SERVICE_PROVIDERS_FILE: fake.writeProvidersFile(scratch),
    SERVICE_OUTBOUND_ALLOW: new URL(fake.url).host,
    SERVICE_DATA_DIR: join(scratch, 'data'),
    SERVICE_THREAD_MARKS_DIR: join(scratch, 'marks'),
  });
  taskQueue = env['TEMPORAL_TASK_QUEUE']!;
  service = startService(env);
  await service.waitFor(/^ready\. Ctrl-C stops everything\./m, 300_000, 'the service to be ready');
  const { secretKey } = await createEnvironmentStore({ db: pool }).create({ name: 'standby' });
  api = createClient({ baseUrl: `http://127.0.0.1:${port}`, secretKey });
  connection = await connectTemporal({ address: stack().temporalAddress });
  await deployPagedApi(api, ['first', 'second']);
}, 600_000);

afterAll(async () => {
  service?.interrupt();
  await service?.exited;
  await connection?.close();
  await fake.stop();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

/** Pids of the processes polling the sync task queue now (identity `pid@host`, the SDK's default). */
async function pollerPids(): Promise<number[]> {
  const answer = await connection.workflowService.describeTaskQueue({
    namespace: stack().temporalNamespace,
    taskQueue: { name: taskQueue, kind: proto.temporal.api.enums.v1.TaskQueueKind.TASK_QUEUE_KIND_NORMAL },
    taskQueueType: proto.temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (answer.pollers ?? []).map((poller) => Number((poller.identity ?? '').split('@')[0]));
}

function standbysReady(): number {
  return (service.output().match(/standby ready \(pid \d+\)/g) ?? []).length;
}

describe("npm start's warm standby worker", () => {
  it('takes over a SIGKILLed worker’s run at once, twice: every record stored once, only the page in flight fetched twice', async () => {
    const recoveries: number[] = [];
    const killed = new Set<number>();
    for (const [kill, id] of ['first', 'second'].entries()) {
      // A standby is ready (the first is prepared once the first worker polls, the next once the
      // standby that took over polls).
      await eventually(
        async () => (standbysReady() > kill ? true : undefined),
        300_000,
        `standby ${kill + 1} to be ready`,
      );
      // The run's request for page 6 is held, so that no other request is in flight at the kill: the
      // next request is the standby's.
      fake.hold(id, 5);
      await trigger(api, id);
      await eventually(async () => (fake.pagesSeen(id) >= 6 ? true : undefined), 120_000, `page 6 of ${id}`);
      const [active, ...others] = await pollerPids().then((pids) => pids.filter((pid) => !killed.has(pid)));
      // One process polls: the standby waits without polling.
      expect(others, 'pollers besides the active worker').toEqual([]);
      const requestsAtKill = fake.requests(id);
      process.kill(active!, 'SIGKILL');
      killed.add(active!);
      const killedAt = Date.now();
      fake.open(id);
      await eventually(
        async () => (fake.requests(id) > requestsAtKill ? true : undefined),
        120_000,
        `a request of ${id} after the kill`,
      );
      recoveries.push(fake.times.get(id)![requestsAtKill]! - killedAt);
      await expectExact(fake, pool, id, await finishedRun(api, id), 1);
      // The run went on in the standby, which was already running before the kill.
      const [successor] = await pollerPids().then((pids) => pids.filter((pid) => !killed.has(pid)));
      expect(successor).toBeDefined();
      expect(service.output()).toContain(`standby ready (pid ${successor})`);
    }
    expect(service.output().match(/the standby takes over/g)).toHaveLength(2);
    console.log(`[standby] requests resumed ${recoveries.join(', ')} ms after each SIGKILL of the worker`);
  }, 900_000);
});
