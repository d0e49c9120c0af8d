/**
 * A deploy's apply survives SIGKILL of its worker: two deploys over 600 connections (the first
 * starts a sync entity for each, the second changes its frequency), the worker process killed with
 * SIGKILL in the middle of each apply and started again. Each apply finishes, its version ends
 * `active` (never left `applying`), and every connection's entity is configured exactly once per
 * deploy: started once by the first, handed its new definition by exactly one `reconfigure` signal
 * by the second, even for the batch that was in flight at the kill. And a caller that stops waiting
 * (504 deploy_timeout) does not stop the apply.
 */
import { describe, expect, it } from 'vitest';
import type { Client } from '@temporalio/client';
import { APPLY_BATCHING, applyWorkflowId } from '../../src/deploy/plan.js';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import type { ApplyProgress } from '../../workflows/applyDeployment.js';
import type { WorkerChild } from '../kit/processWorker.js';
import { mapLimit } from '../../src/mapLimit.js';
import { deployEnvironment, request } from '../kit/apply.js';
import { deferCleanup } from '../kit/cleanup.js';

// A wave of the apply (APPLY_BATCHING: `parallel` calls of `size` connections), then two more calls.
const WAVE = APPLY_BATCHING.size * APPLY_BATCHING.parallel;
const CONNECTIONS = WAVE + 2 * APPLY_BATCHING.size;
async function until<T>(what: string, probe: () => Promise<T | undefined>, limitMs: number): Promise<T> {
  const deadline = Date.now() + limitMs;
  let lastError: unknown;
  for (;;) {
    // The workflow may not exist yet, or be between workers: try again.
    const value = await probe().catch((error: unknown) => {
      lastError = error;
      return undefined;
    });
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`${what}: not within ${limitMs} ms (last error: ${String(lastError)})`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function configurations(client: Client, ids: readonly string[]) {
  return mapLimit(ids, 8, async (workflowId) => {
    const history = await client.workflow.getHandle(workflowId).fetchHistory();
    const events = history.events ?? [];
    return {
      workflowId,
      starts: events.filter((event) => event.workflowExecutionStartedEventAttributes).length,
      reconfigures: events.filter(
        (event) => event.workflowExecutionSignaledEventAttributes?.signalName === 'reconfigure',
      ).length,
    };
  });
}

/** An environment with `count` connections of one integration, and deployments over it. */
describe('a deploy’s apply survives SIGKILL of its worker process', () => {
  it(`${CONNECTIONS} connections, a kill in each of two applies: both versions end active, each entity configured exactly once per deploy`, async () => {
    const { client, env, store, deployments, entityIds, startWorker, terminateEntities } = await deployEnvironment(
      CONNECTIONS,
      240_000,
    );
    let worker: WorkerChild = await startWorker();
    deferCleanup(async () => {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await terminateEntities();
    });

    const exists = (id: string): Promise<boolean> =>
      client.workflow
        .getHandle(id)
        .describe()
        .then(
          () => true,
          () => false,
        );
    /** Runs a deploy, kills the worker once the apply is past its first batch and `ready`, restarts it. */
    async function deployWithKill(
      runs: string,
      previousRunId: string | undefined,
      ready: () => Promise<boolean>,
    ): Promise<{ version: number; runId: string; killedAtDone: number; startedAtKill: number; recoveryMs: number }> {
      const applying = deployments.apply(env, request(runs));
      applying.catch(() => undefined);
      const handle = client.workflow.getHandle(applyWorkflowId(env));
      const atKill = await until(
        'the apply past its first batch',
        async () => {
          const { runId } = await handle.describe();
          if (runId === previousRunId) return undefined;
          const progress = await client.workflow
            .getHandle(applyWorkflowId(env), runId)
            .query<ApplyProgress>('progress');
          return progress.done > 0 && (await ready()) ? progress : undefined;
        },
        120_000,
      );
      worker.child.kill('SIGKILL');
      const killedAt = Date.now();
      await worker.exited;
      // Nothing starts an entity until the worker is back.
      const startedAtKill = (await mapLimit(entityIds, 8, exists)).filter(Boolean).length;
      // Killed in the middle: the apply had not finished, and its version was recorded, not active.
      expect(atKill.done).toBeLessThan(CONNECTIONS);
      const described = await handle.describe();
      expect(described.status.name).toBe('RUNNING');
      expect((await store.current(env))?.status).toBe('applying');
      worker = await startWorker();
      const { deployment } = await applying;
      return {
        version: deployment.version,
        runId: described.runId,
        killedAtDone: atKill.done,
        startedAtKill,
        recoveryMs: Date.now() - killedAt,
      };
    }

    // The first kill in the middle of the second wave's starts, so that its repeated calls meet entities
    // their first attempts started.
    const first = await deployWithKill('1h', undefined, () => exists(entityIds[WAVE + APPLY_BATCHING.size / 2]!));
    expect(first.startedAtKill).toBeGreaterThan(WAVE);
    expect(first.startedAtKill).toBeLessThan(CONNECTIONS);
    expect(first.version).toBe(1);
    expect(await store.current(env)).toMatchObject({ version: 1, status: 'active' });
    const afterFirst = await configurations(client, entityIds);
    // Every entity started once, and none re-configured by the batch repeated after the kill.
    expect(afterFirst.filter((entity) => entity.starts !== 1 || entity.reconfigures !== 0)).toEqual([]);

    const second = await deployWithKill('2h', first.runId, () => Promise.resolve(true));
    expect(second.version).toBe(2);
    expect(await store.current(env)).toMatchObject({ version: 2, status: 'active' });
    expect((await store.get(env, 1))?.status).toBe('superseded');
    const afterSecond = await configurations(client, entityIds);
    expect(afterSecond.filter((entity) => entity.starts !== 1 || entity.reconfigures !== 1)).toEqual([]);
    // And each holds the new definition.
    const frequencies = await mapLimit(entityIds, 8, async (id) =>
      client.workflow.getHandle(id).query<SyncStatus>('status'),
    );
    expect(frequencies.filter((status) => status.frequencyMs !== 2 * 3_600_000)).toEqual([]);

    // What the kills cost each apply: activity attempts repeated, workflow tasks that timed out.
    const repeats = await Promise.all(
      [first, second].map(async ({ runId }) => {
        const events = (await client.workflow.getHandle(applyWorkflowId(env), runId).fetchHistory()).events ?? [];
        return {
          activities: events.filter((event) => (event.activityTaskStartedEventAttributes?.attempt ?? 1) > 1).length,
          tasks: events.filter((event) => event.workflowTaskTimedOutEventAttributes).length,
        };
      }),
    );
    console.log(
      `[deploy crash] ${CONNECTIONS} connections; killed at ${first.killedAtDone} (${first.startedAtKill} entities started) and ${second.killedAtDone} done; ` +
        `versions active ${Math.round(first.recoveryMs / 100) / 10} s and ${Math.round(second.recoveryMs / 100) / 10} s after each kill; ` +
        `repeated activity attempts ${repeats.map((r) => r.activities).join(' and ')}, timed-out workflow tasks ${repeats.map((r) => r.tasks).join(' and ')}`,
    );
  }, 600_000);

  it('a caller that stops waiting does not stop the apply: 504, then 409 while it waits, then active once a worker serves it', async () => {
    const { client, env, store, deployments, waitingAtMost, entityIds, startWorker, terminateEntities } =
      await deployEnvironment(3, 3000);
    // No worker yet: the apply waits in Temporal, and the request stops waiting after 3 s.
    const timedOut: unknown = await deployments.apply(env, request('1h')).catch((error: unknown) => error);
    expect(timedOut).toMatchObject({ code: 'deploy_timeout', status: 504 });
    expect(await store.current(env)).toMatchObject({ version: 1, status: 'applying' });
    // The next deploy waits for that apply first, within the same limit, and records nothing.
    const refused: unknown = await deployments.apply(env, request('2h')).catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: 'deploy_in_progress', status: 409 });
    expect(await store.latestVersion(env)).toBe(1);

    const worker = await startWorker();
    try {
      // The first apply finishes on its own, and the next deploy goes through after it.
      await until(
        'version 1 active',
        async () => ((await store.current(env))?.status === 'active' ? true : undefined),
        120_000,
      );
      const { deployment } = await waitingAtMost(120_000).apply(env, request('2h'));
      expect(deployment).toMatchObject({ version: 2, status: 'active' });
      const statuses = await Promise.all(
        entityIds.map((id) => client.workflow.getHandle(id).query<SyncStatus>('status')),
      );
      expect(statuses.map((status) => status.frequencyMs)).toEqual([7_200_000, 7_200_000, 7_200_000]);
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await terminateEntities();
    }
  }, 300_000);
});
