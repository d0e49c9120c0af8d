/**
 * What a run's workflow commands reach besides activity calls (docs/architecture.md "Threat model"): a
 * `runSync` replaced by an attacker that holds every workflow-side function
 * (test/runtime/fixtures/commandAttackers.ts) starts children that take another environment's
 * workflow ids and outlive the run, a cron child, calls an activity no script path calls, schedules
 * activities on the service's other task queues, and continues as a sync entity of another
 * environment's sync. Each case asserts what the victim should keep, so it fails while the attack works.
 * (Signals, cancellations and TERMINATE_IF_RUNNING children: test/runtime/isolation.test.ts.)
 */
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { WorkflowFailedError, type Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import type { SyncStatus } from '../../src/runtime/definitions.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionTaskQueue } from '../../workflows/taskQueues.js';
import { deferCleanup } from '../kit/cleanup.js';
import { startHostileWorkers } from '../kit/hostileWorker.js';
import { useLogScan } from '../connections/helpers/logScan.js';
import { syncDefinition, useRuntime } from '../kit/runtime.js';
import { bundle } from '../kit/scripts.js';
import { TestConnections, ENVIRONMENT, INTEGRATION } from '../kit/testConnections.js';
import type { CommandAttack, CommandVictim } from './fixtures/commandAttackers.js';

const ATTACKERS = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'commandAttackers.ts');
const VICTIM_ENV = 'victim-env';
const VICTIM_CONNECTION = 'victim-conn';
const HEALTH_ROWS = 100;

async function until<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, ms: number): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** A run's outcome: what it returned, or `failed <type>` (a refused command fails the run that sent it). */
async function outcomeOfRun(run: Promise<unknown>): Promise<string> {
  try {
    return `returned ${JSON.stringify(await run)}`;
  } catch (error) {
    const cause = error instanceof WorkflowFailedError ? error.cause : error;
    return `failed ${cause instanceof ApplicationFailure ? cause.type : String(cause)}`;
  }
}

async function terminate(client: Client, workflowId: string): Promise<void> {
  await client.workflow
    .getHandle(workflowId)
    .terminate('test over')
    .catch(() => undefined);
}

/** The worker of the attacker's workflows over the real stores, a victim with a deployed sync and records. */
async function hostileStack() {
  const connections = new TestConnections();
  const h = await useRuntime({ worker: false, connections: () => connections });
  const scripts = createPostgresScriptStore({ db: h.pool });
  const records = createPostgresRecordStore({ db: h.pool });
  const victimScope = { environmentId: VICTIM_ENV, integrationId: INTEGRATION, connectionId: VICTIM_CONNECTION };
  const victimHash = await scripts.put(
    bundle(`async function (svc) { await svc.batchSave([{ id: 'v2', title: 'synced' }], 'Issue'); }`),
    VICTIM_ENV,
  );
  await records.beginRun({ ...victimScope, syncName: 'issues', runId: 'victim-run' });
  await records.saveRecords({
    ...victimScope,
    syncName: 'issues',
    model: 'Issue',
    runId: 'victim-run',
    records: [{ id: 'v1', title: 'mine' }],
  });
  const taskQueue = await startHostileWorkers({
    workflowsPath: ATTACKERS,
    pool: h.pool,
    client: h.client,
    connections,
    actions: h.actions,
    records,
    connectionIds: [VICTIM_CONNECTION],
    queuePrefix: 'commands',
  });
  const victim: CommandVictim = {
    ...victimScope,
    syncName: 'issues',
    laterSyncName: 'later',
    scriptHash: victimHash,
    marker: `attacker-${randomUUID()}`,
    healthRows: HEALTH_ROWS,
  };
  const attackerRunId = syncRunId(
    { environmentId: ENVIRONMENT, integrationId: INTEGRATION, connectionId: 'attacker', syncName: 'evil' },
    randomUUID(),
  );
  return {
    h,
    records,
    victim,
    taskQueue,
    attackerRunId,
    victimControl: createSyncControl({ client: h.client, taskQueue }),
  };
}

describe("a run's workflow commands reach nothing of another environment's", () => {
  // The ids a refused command names are the script's choice (it can put what it read there): the
  // worker's log must not repeat them.
  const logScan = useLogScan();
  it('children with ids of the victim, children that outlive the run, unchecked activities, other queues', async () => {
    const { h, victim, taskQueue, attackerRunId, victimControl } = await hostileStack();
    const laterEntity = `sync:${VICTIM_ENV}:${INTEGRATION}:${VICTIM_CONNECTION}:later`;
    const applyId = `deploy:${VICTIM_ENV}`;
    const cronId = `${attackerRunId}-cronChild:cron`;
    logScan.secret(cronId);
    deferCleanup(async () => {
      for (const id of [laterEntity, applyId, cronId]) await terminate(h.client, id);
    });

    // Each attack in a run of its own: a refused command ends the run that sent it.
    const attacks: CommandAttack[] = [
      'squatVictimEntity',
      'squatVictimDeploy',
      'cronChild',
      'victimConnectionOnActionQueue',
      'victimConnectionOnWatchQueue',
      'healthCheckRows',
    ];
    const outcomes: Record<string, string> = {};
    for (const attack of attacks) {
      outcomes[attack] = await outcomeOfRun(
        h.client.workflow.execute('runSync', {
          taskQueue,
          workflowId: `${attackerRunId}-${attack}`,
          args: [{ victim, attack }],
          workflowExecutionTimeout: '3 minutes',
        }),
      );
    }
    console.log('[commands] hostile runs:', outcomes);

    // 1. The victim's sync entity, started as the service starts it after the attack (a deploy that adds
    // the sync, a new connection): it must be the service's entity, and run the victim's sync.
    await victimControl.ensureSync(
      syncDefinition({ environmentId: VICTIM_ENV, syncName: 'later', scriptHash: victim.scriptHash }),
      VICTIM_CONNECTION,
    );
    // An inbound webhook for that sync, handed to the entity as the API's inbound route does.
    await victimControl
      .deliverWebhook(
        { ...victim, syncName: 'later' },
        { type: 'issue.created', payload: { body: 'victim-webhook-body' }, receivedAt: new Date().toISOString() },
      )
      .catch(() => undefined);
    const entity = await h.client.workflow.getHandle(laterEntity).describe();
    // What the execution at the victim's entity id was handed, if it is the attacker's.
    const handedToSquatter = await h.client.workflow
      .getHandle(laterEntity)
      .query<unknown[]>('received')
      .catch(() => []);
    console.log('[commands] handed to the execution at the victim entity id:', JSON.stringify(handedToSquatter));
    const entityStatus = await until<SyncStatus | string>(
      'the victim entity ran',
      () =>
        victimControl
          .status({ ...victim, syncName: 'later' })
          .catch((error: unknown) => `status failed: ${String(error)}`),
      (status) => typeof status !== 'string' && status.latestResult !== null,
      60_000,
    );
    console.log('[commands] the victim entity:', entity.type, entity.parentExecution, entityStatus);
    // 2. The victim's next deploy starts its apply workflow as src/deploy/deployments.ts does.
    const apply = await h.client.workflow
      .start('applyDeployment', {
        taskQueue: actionTaskQueue(taskQueue),
        workflowId: applyId,
        args: [{ environmentId: VICTIM_ENV, version: 1, steps: [] }],
      })
      .then(
        () => 'started',
        (error: unknown) => `refused: ${(error as Error).name}`,
      );
    console.log("[commands] the victim's deploy apply:", apply);
    // 3. What the attacker's run started is gone with it.
    const cron = await h.client.workflow
      .getHandle(cronId)
      .describe()
      .then(
        (description) => description.status.name,
        () => 'none',
      );
    // 4. Rows written by the unchecked health-check activity.
    const healthRows = await h.pool.query<{ n: string; bytes: string }>(
      `SELECT count(*) AS n, coalesce(sum(length(token)), 0) AS bytes FROM health_checks WHERE token LIKE $1`,
      [`${victim.marker}%`],
    );
    console.log('[commands] cron child:', cron, 'health rows:', healthRows.rows[0]);

    expect.soft({ type: entity.type, parent: entity.parentExecution?.workflowId }).toEqual({
      type: 'manageSync',
      parent: undefined,
    });
    expect.soft(typeof entityStatus === 'string' ? entityStatus : entityStatus.latestResult).not.toBeNull();
    expect.soft(typeof entityStatus === 'string' ? entityStatus : typeof entityStatus.latestResult).toBe('object');
    expect.soft(apply).toBe('started');
    // Neither the victim's sync definition nor its inbound webhook's body reaches the attacker.
    expect.soft(JSON.stringify(handedToSquatter)).not.toContain('victim-webhook-body');
    expect.soft(JSON.stringify(handedToSquatter)).not.toContain(victim.scriptHash);
    expect.soft({ cronChildAfterRun: cron }).not.toEqual({ cronChildAfterRun: 'RUNNING' });
    expect.soft({ healthRows: Number(healthRows.rows[0]!.n) }).toEqual({ healthRows: 0 });
    // Every attack refused: the command ones fail their run, the activity ones are refused to the script.
    for (const attack of attacks) {
      expect.soft({ attack, outcome: outcomes[attack] }).toEqual({
        attack,
        outcome: expect.stringMatching(/^failed scope_denied$|^returned "refused: scope_denied"$/) as unknown,
      });
    }
  }, 240_000);

  it('a thousand abandoned children in one completion: none outlives the run, a victim action is not held up', async () => {
    const { h, taskQueue, attackerRunId, victim } = await hostileStack();
    const FLOOD = 1000;
    deferCleanup(async () => {
      for (let i = 0; i < FLOOD; i += 50) {
        await Promise.all(
          Array.from({ length: Math.min(50, FLOOD - i) }, (_, j) =>
            terminate(h.client, `${attackerRunId}:flood:${i + j}`),
          ),
        );
      }
    });
    const control = createSyncControl({ client: h.client, taskQueue });
    const victimAction = await createPostgresScriptStore({ db: h.pool }).put(
      bundle(`async function (svc, input) { return { echoed: input.n }; }`),
      VICTIM_ENV,
    );
    const runVictimAction = async () => {
      const started = Date.now();
      const result = await control.runAction({
        definition: {
          environmentId: VICTIM_ENV,
          integrationId: INTEGRATION,
          actionName: 'echo',
          scriptHash: victimAction,
        },
        connectionId: victim.connectionId,
        input: { n: 1 },
      });
      return { result, ms: Date.now() - started };
    };
    const before = await runVictimAction();
    const started = Date.now();
    const attack = h.client.workflow.execute<(input: unknown) => Promise<{ started: number }>>('runSync', {
      taskQueue,
      workflowId: attackerRunId,
      args: [{ flood: FLOOD }],
      workflowExecutionTimeout: '3 minutes',
    });
    const during = await runVictimAction();
    const flooded = await outcomeOfRun(attack);
    const attackMs = Date.now() - started;
    const after = await runVictimAction();
    const survivors = await Promise.all(
      [0, FLOOD / 2, FLOOD - 1].map((i) =>
        h.client.workflow
          .getHandle(`${attackerRunId}:flood:${i}`)
          .describe()
          .then(
            (description) => description.status.name,
            () => 'none',
          ),
      ),
    );
    console.log('[commands] flood:', flooded, `in ${attackMs} ms; victim action before/during/after (ms):`, [
      before.ms,
      during.ms,
      after.ms,
    ]);
    console.log('[commands] flood children after the run closed (first, middle, last):', survivors);
    expect(during.result).toEqual({ ok: true, output: { echoed: 1 } });
    expect(flooded).toBe('failed scope_denied');
    expect
      .soft({ childrenAfterRun: survivors })
      .toEqual({ childrenAfterRun: expect.not.arrayContaining(['RUNNING']) as unknown });
  }, 300_000);

  it("continue-as-new into a sync entity with another environment's sync: nothing of the victim's is written", async () => {
    const { h, records, victim, taskQueue, attackerRunId } = await hostileStack();
    deferCleanup(() => terminate(h.client, attackerRunId));
    const run = h.client.workflow.execute('runSync', {
      taskQueue,
      workflowId: attackerRunId,
      args: [{ victim, attack: 'continueAsManageSync' }],
    });
    // The continue-as-new into another type is refused: the run fails, and never lives on as an entity.
    expect(await outcomeOfRun(run)).toBe('failed scope_denied');
    const after = await h.client.workflow.getHandle(attackerRunId).describe();
    console.log('[commands] the attacker run after its continue-as-new:', after.type, after.status.name);
    expect({ type: after.type, status: after.status.name }).toEqual({ type: 'runSync', status: 'FAILED' });
    // Nothing of the victim's written: its records as they were, no run of its sync recorded, no logs.
    const stored = await records.listRecords({ ...victim, model: 'Issue' });
    expect(stored.records.map((record) => record['id'])).toEqual(['v1']);
    const runs = await h.pool.query('SELECT 1 FROM sync_runs WHERE environment_id = $1', [VICTIM_ENV]);
    expect(runs.rowCount).toBe(0);
    const logs = await h.pool.query('SELECT 1 FROM script_logs WHERE environment_id = $1', [VICTIM_ENV]);
    expect(logs.rowCount).toBe(0);
  }, 240_000);
});
