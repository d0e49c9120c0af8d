/**
 * Issue 15: a deployed script has no authority beyond its own run. Each case attacks and checks the
 * outcome (the secret was not obtained, the victim's data is as it was, the bystanders completed),
 * not the mechanism.
 *
 * 1. A run that holds every workflow-side function (test/runtime/fixtures/attackerWorkflows.ts replaces
 *    runSync) calls each activity with another environment's scope; each workflow command it could
 *    aim at another environment (a signal, a cancellation request, a child start) fails its run
 *    scope_denied (src/temporal/commandPolicy.ts), and the victim is untouched.
 * 2. What one run does to its globals and built-in prototypes is not seen by any other run.
 * 3. Resource limits: each breach fails its own run with its own code; the worker lives on.
 */
import { randomUUID } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowFailedError } from '@temporalio/client';
import type { ConnectionScope } from '../../src/connections/types.js';
import { createPostgresRecordStore } from '../../src/records/postgresRecordStore.js';
import type { RunSyncInput } from '../../src/runtime/definitions.js';
import type { ConnectionRecord } from '../../src/runtime/public.js';
import { createPostgresScriptStore } from '../../src/runtime/scriptStore.js';
import { syncRunId } from '../../src/temporal/runAuthority.js';
import { createSyncControl } from '../../src/temporal/syncControl.js';
import { actionDefinition, syncDefinition, useRuntime } from '../kit/runtime.js';
import { TestConnections, ENVIRONMENT, INTEGRATION } from '../kit/testConnections.js';
import type { Victim } from './fixtures/attackerWorkflows.js';
import { deferCleanup } from '../kit/cleanup.js';
import { startHostileWorkers } from '../kit/hostileWorker.js';
import { bundle } from '../kit/scripts.js';

const ATTACKER_WORKFLOWS = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'attackerWorkflows.ts');
const VICTIM_ENV = 'victim-env';
const VICTIM_CONNECTION = 'victim-conn';

/** Each environment's connections carry a key of their own, so a stolen key shows whose it is. */
class PerEnvironmentKeys extends TestConnections {
  override async getConnection(scope: ConnectionScope): Promise<ConnectionRecord> {
    const record = await super.getConnection(scope);
    return { ...record, credentials: { type: 'API_KEY', apiKey: `secret-of-${scope.environmentId}` } };
  }
}

describe('a script has no authority beyond its own run', () => {
  it("a run holding every workflow-side function gets nothing of another environment's", async () => {
    const connections = new PerEnvironmentKeys();
    const h = await useRuntime({ worker: false, connections: () => connections });
    const scripts = createPostgresScriptStore({ db: h.pool });
    const records = createPostgresRecordStore({ db: h.pool });
    // The victim: a deployed bundle, a record and metadata of its own.
    const victimScope = { environmentId: VICTIM_ENV, integrationId: INTEGRATION, connectionId: VICTIM_CONNECTION };
    const victimSync = { ...victimScope, syncName: 'issues' };
    const victimHash = await scripts.put(bundle(`async function (svc) { await svc.log('victim'); }`), VICTIM_ENV);
    await records.beginRun({ ...victimSync, runId: 'victim-run' });
    await records.saveRecords({
      ...victimSync,
      model: 'Issue',
      runId: 'victim-run',
      records: [{ id: 'v1', title: 'mine' }],
    });
    connections.metadata.set(VICTIM_CONNECTION, { owner: 'victim' });
    // The attacker's own bundle (deployed to its environment): hands back whatever getConnection gives.
    const attackerScriptHash = await scripts.put(
      bundle(`async function (svc) { return await svc.getConnection(); }`),
      ENVIRONMENT,
    );

    // The victim's action, which hands its caller the connection: the victim's API ran it once on the
    // attacker's worker (which held it, src/temporal/runningExecutions.ts), and it closed.
    const actionScriptHash = await scripts.put(
      bundle(`async function (svc) { return { revealed: await svc.getConnection() }; }`),
      VICTIM_ENV,
    );

    const taskQueue = await startHostileWorkers({
      workflowsPath: ATTACKER_WORKFLOWS,
      pool: h.pool,
      client: h.client,
      connections,
      actions: h.actions,
      records,
      connectionIds: [VICTIM_CONNECTION],
      queuePrefix: 'hostile',
    });

    const rootActionId = `action:${VICTIM_ENV}:${INTEGRATION}:${VICTIM_CONNECTION}:reveal:${randomUUID()}`;
    const victimControl = createSyncControl({ client: h.client, taskQueue });
    const genuine = await victimControl.runAction(
      {
        definition: {
          environmentId: VICTIM_ENV,
          integrationId: INTEGRATION,
          actionName: 'reveal',
          scriptHash: actionScriptHash,
        },
        connectionId: VICTIM_CONNECTION,
        input: {},
      },
      { workflowId: rootActionId },
    );
    // The genuine action is the victim's to run.
    expect(JSON.stringify(genuine)).toContain(`secret-of-${VICTIM_ENV}`);

    // A root action of the victim's that waits (a durable timer) while the attack runs: the action
    // Worker of this process holds it (src/temporal/runningExecutions.ts) under its own run id.
    const waitingActionHash = await scripts.put(
      bundle(
        `async function (svc) { await new Promise((resolve) => setTimeout(resolve, 60000)); return { revealed: await svc.getConnection() }; }`,
      ),
      VICTIM_ENV,
    );
    const runningRootActionId = `action:${VICTIM_ENV}:${INTEGRATION}:${VICTIM_CONNECTION}:wait:${randomUUID()}`;
    const runningAction = victimControl.runAction(
      {
        definition: {
          environmentId: VICTIM_ENV,
          integrationId: INTEGRATION,
          actionName: 'wait',
          scriptHash: waitingActionHash,
        },
        connectionId: VICTIM_CONNECTION,
        input: {},
      },
      { workflowId: runningRootActionId, timeoutMs: 170_000 },
    );
    const victimAnswer = runningAction.catch((error: unknown) => ({ thrown: String(error) }));
    const victimRunning = h.client.workflow.getHandle(runningRootActionId);
    deferCleanup(async () => {
      await victimRunning.terminate('test over').catch(() => undefined);
      const late = await Promise.race([
        victimAnswer,
        new Promise((resolve) => setTimeout(() => resolve('no answer in 30 s'), 30_000)),
      ]);
      console.log("[isolation] the victim's API call for its running action answered:", late);
    });
    // Held: its first workflow task completed and its timer started.
    for (let tries = 0; ; tries++) {
      const history = await victimRunning.fetchHistory().catch(() => undefined);
      if (history?.events?.some((event) => event.timerStartedEventAttributes)) break;
      if (tries > 600) throw new Error(`the victim's waiting action ${runningRootActionId} never started its timer`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const victimRunId = (await victimRunning.describe()).runId;

    // Two sync entities of the victim's, started as the service starts them (the victim's bundle, once a
    // day): one the attacker signals, one whose cancellation it requests. The first has run once and is idle.
    const signalledSync = { ...victimScope, syncName: 'watched' };
    const cancelledSync = { ...victimScope, syncName: 'cancelled' };
    const signalledEntityId = await victimControl.ensureSync(
      syncDefinition({ environmentId: VICTIM_ENV, syncName: 'watched', scriptHash: victimHash }),
      VICTIM_CONNECTION,
    );
    const cancelledEntityId = await victimControl.ensureSync(
      syncDefinition({ environmentId: VICTIM_ENV, syncName: 'cancelled', scriptHash: victimHash }),
      VICTIM_CONNECTION,
    );
    deferCleanup(async () => {
      for (const id of [signalledEntityId, cancelledEntityId]) {
        await h.client.workflow
          .getHandle(id)
          .terminate('test over')
          .catch(() => undefined);
      }
    });
    let signalledBefore = await victimControl.status(signalledSync);
    for (let tries = 0; signalledBefore.status !== 'idle' || signalledBefore.latestResult === null; tries++) {
      if (tries > 600)
        throw new Error(`the victim's entity ${signalledEntityId} never ran: ${JSON.stringify(signalledBefore)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
      signalledBefore = await victimControl.status(signalledSync);
    }
    const cancelledEntityRunId = (await h.client.workflow.getHandle(cancelledEntityId).describe()).runId;

    // Another running root action of the victim's, whose cancellation the attacker requests.
    const cancelledRootActionId = `action:${VICTIM_ENV}:${INTEGRATION}:${VICTIM_CONNECTION}:wait:${randomUUID()}`;
    const cancelledAction = victimControl
      .runAction(
        {
          definition: {
            environmentId: VICTIM_ENV,
            integrationId: INTEGRATION,
            actionName: 'wait',
            scriptHash: waitingActionHash,
          },
          connectionId: VICTIM_CONNECTION,
          input: {},
        },
        { workflowId: cancelledRootActionId, timeoutMs: 170_000 },
      )
      .catch((error: unknown) => ({ thrown: String(error) }));
    const cancelledHandle = h.client.workflow.getHandle(cancelledRootActionId);
    deferCleanup(async () => {
      await cancelledHandle.terminate('test over').catch(() => undefined);
    });
    for (let tries = 0; ; tries++) {
      const history = await cancelledHandle.fetchHistory().catch(() => undefined);
      if (history?.events?.some((event) => event.timerStartedEventAttributes)) break;
      if (tries > 600) throw new Error(`the victim's waiting action ${cancelledRootActionId} never started its timer`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const cancelledActionRunId = (await cancelledHandle.describe()).runId;

    const victim: Victim = {
      ...victimSync,
      scriptHash: victimHash,
      attackerScriptHash,
      actionScriptHash,
      rootActionId,
      runningRootActionId,
      signalledSyncName: signalledSync.syncName,
      cancelledSyncName: cancelledSync.syncName,
      cancelledRootActionId,
    };
    // Started as the service starts a sync run of the attacker's own environment.
    const outcomes = await h.client.workflow.execute<(input: { victim: Victim }) => Promise<Record<string, string>>>(
      'runSync',
      {
        taskQueue,
        workflowId: syncRunId(
          { environmentId: ENVIRONMENT, integrationId: INTEGRATION, connectionId: 'attacker', syncName: 'evil' },
          randomUUID(),
        ),
        args: [{ victim }],
        workflowExecutionTimeout: '3 minutes',
      },
    );
    console.log('[isolation] hostile run:', outcomes);

    // Each attack by a workflow command (a signal, a cancellation request, a child start) in a run of its
    // own: the worker refuses the completion that carries it (src/temporal/commandPolicy.ts), so the run
    // fails scope_denied and the command never reaches Temporal. Before (s5/h31act, s5/h31sig), each of
    // these took: see the victim's outcomes below.
    const commandAttacks = [
      'signalReconfigureVictimSync',
      'signalTriggerVictimSync',
      'signalPauseVictimSync',
      'cancelVictimSync',
      'cancelVictimRunningAction',
      'childApplyOfVictim',
      'childActionClaimingVictim',
      'childActionReusingVictimRootId',
      'childActionReusingRunningVictimRootId',
      'childActionTerminatingRunningVictimRootId',
      'childSyncRunOfVictim',
      'childEntityOfVictim',
      'childActionTerminatingWithOwnShape',
    ];
    const commandOutcomes = await Promise.all(
      commandAttacks.map(async (command) => {
        const outcome = await h.client.workflow
          .execute<(input: { victim: Victim; command: string }) => Promise<Record<string, string>>>('runSync', {
            taskQueue,
            workflowId: syncRunId(
              { environmentId: ENVIRONMENT, integrationId: INTEGRATION, connectionId: 'attacker', syncName: 'evil' },
              randomUUID(),
            ),
            args: [{ victim, command }],
            workflowExecutionTimeout: '2 minutes',
          })
          .then(
            (result) => `completed: ${JSON.stringify(result)}`,
            (error: unknown) =>
              error instanceof WorkflowFailedError && error.cause instanceof ApplicationFailure
                ? `failed ${error.cause.type}: ${error.cause.message}`
                : `failed: ${String(error)}`,
          );
        return { command, outcome };
      }),
    );
    console.log('[isolation] command attacks:', commandOutcomes);
    for (const { command, outcome } of commandOutcomes) {
      expect({ command, outcome }).toEqual({
        command,
        outcome: expect.stringMatching(/^failed scope_denied: /) as unknown,
      });
    }

    // The victim's entities and action, signalled and cancelled by id (s5/h31sig): what the victim keeps.
    // Soft, so that each is measured; a signal delivered is handled within the 3 s waited here.
    // Before the command policy (s5/h31sig): Temporal delivers a workflow's signals and cancellation
    // requests to any execution of the namespace by id, and the victim's workflows do not ask who sent
    // them. Measured then: reconfigure took (the victim's frequency became the attacker's 60 s, its bundle the
    // attacker's: the next run failed script_not_found, so every run of the victim's sync fails until it
    // redeploys); trigger ran the victim's sync (executions 1 -> 2); pause paused it; the cancel request
    // ended the victim's sync entity (CANCELLED); on the victim's running action it cancelled the
    // script's timer and the action then hung (RUNNING, no further event, no answer to the victim's API
    // call 75 s later, past its 60 s timer).
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const signalledAfter = await victimControl.status(signalledSync);
    const cancelledEntityAfter = await h.client.workflow.getHandle(cancelledEntityId, cancelledEntityRunId).describe();
    const cancelledActionAfter = await h.client.workflow
      .getHandle(cancelledRootActionId, cancelledActionRunId)
      .describe();
    const victimOutcomes = {
      signalledSync: {
        paused: signalledAfter.paused,
        frequencyMs: signalledAfter.frequencyMs,
        executions: signalledAfter.executions,
        finishedAt: signalledAfter.finishedAt,
        status: signalledAfter.status,
      },
      // What the run the trigger started ran (the attacker's bundle, handed over by reconfigure?).
      signalledSyncLatest: { result: signalledAfter.latestResult, error: signalledAfter.latestError },
      cancelledSyncEntity: cancelledEntityAfter.status.name,
      cancelledAction: cancelledActionAfter.status.name,
    };
    console.log('[isolation] the victim after signals and cancellations:', victimOutcomes, 'before:', signalledBefore);
    expect.soft(victimOutcomes.signalledSync).toEqual({
      paused: false,
      frequencyMs: signalledBefore.frequencyMs,
      executions: signalledBefore.executions,
      finishedAt: signalledBefore.finishedAt,
      status: 'idle',
    });
    expect.soft(victimOutcomes.cancelledSyncEntity).toBe('RUNNING');
    expect.soft(victimOutcomes.cancelledAction).toBe('RUNNING');
    // Whether Temporal recorded the attacker's request against the victim's action, and what the
    // victim's API call answers once its 60 s timer fires.
    const cancelledActionEvents = (await cancelledHandle.fetchHistory()).events ?? [];
    console.log(
      "[isolation] the victim's action: cancel requested in its history:",
      cancelledActionEvents.some((event) => event.workflowExecutionCancelRequestedEventAttributes),
    );
    const cancelledActionAnswer = await Promise.race([
      cancelledAction,
      new Promise((resolve) => setTimeout(() => resolve('no answer in 75 s'), 75_000)),
    ]);
    console.log(
      "[isolation] the victim's API call for the action whose cancellation was requested answered:",
      cancelledActionAnswer,
    );
    const cancelledActionEnd = await h.client.workflow
      .getHandle(cancelledRootActionId, cancelledActionRunId)
      .describe();
    const endEvents = (await cancelledHandle.fetchHistory()).events ?? [];
    console.log(
      "[isolation] the victim's action after the wait:",
      cancelledActionEnd.status.name,
      endEvents.map((event) => Object.keys(event).find((key) => key.endsWith('EventAttributes'))),
    );
    expect.soft(JSON.stringify(cancelledActionAnswer)).toContain(`secret-of-${VICTIM_ENV}`);

    for (const [attack, outcome] of Object.entries(outcomes)) {
      expect({ attack, outcome }).toEqual({ attack, outcome: expect.stringMatching(/^(refused|failed): /) as unknown });
    }
    // Refused for the reason that matters, not by accident.
    for (const attack of [
      'getConnection',
      'httpRequest',
      'getMetadata',
      'setMetadata',
      'saveRecordsAsSelf',
      'saveRecordsAsVictimRun',
      'clearRecords',
      'beginRun',
      'beginRunLoadingVictimScript',
      'countRecords',
      'environmentVariables',
      'resolveAction',
      'writeLogs',
      'watchRun',
      'recordSyncRun',
      'recordWebhookDeliveries',
      'deployStopVictimSync',
      'deployEraseVictimRecords',
      'deployStartVictimSync',
      'deployActivate',
      'deployListConnections',
    ]) {
      expect({ attack, outcome: outcomes[attack] }).toEqual({ attack, outcome: 'refused: scope_denied' });
    }
    expect(outcomes['loadVictimScript']).toBe('refused: script_not_found');
    // The outcome: no secret of the victim's anywhere, and its data as it was.
    expect(JSON.stringify(outcomes)).not.toContain(`secret-of-${VICTIM_ENV}`);
    expect(JSON.stringify(commandOutcomes)).not.toContain(`secret-of-${VICTIM_ENV}`);
    const stored = await records.listRecords({ ...victimScope, model: 'Issue' });
    expect(stored.records.map((record) => record['id'])).toEqual(['v1']);
    expect(connections.metadata.get(VICTIM_CONNECTION)).toEqual({ owner: 'victim' });
    // The victim's runs: the first run of each of its two genuine entities, nothing forged, nothing triggered.
    const runs = await h.pool.query<{ sync_name: string }>(
      'SELECT sync_name FROM sync_runs WHERE environment_id = $1 ORDER BY sync_name',
      [VICTIM_ENV],
    );
    expect(runs.rows.map((row) => row.sync_name)).toEqual(['cancelled', 'watched']);
    const logs = await h.pool.query(`SELECT 1 FROM script_logs WHERE message = 'forged'`);
    expect(logs.rowCount).toBe(0);
    // Before the command policy (s5/h31act): the child started with TERMINATE_IF_RUNNING terminated the
    // victim's running action, and the victim's API call for it gave no answer. Now it runs to its end.
    // The victim's own caller gets its answer (the 60 s timer fired), and its run is the one that ended.
    expect(JSON.stringify(await runningAction)).toContain(`secret-of-${VICTIM_ENV}`);
    const victimNow = await h.client.workflow.getHandle(runningRootActionId, victimRunId).describe();
    expect({ victimAction: victimNow.status.name }).toEqual({ victimAction: 'COMPLETED' });
  }, 240_000);

  it('what a run does to its globals and built-in prototypes is seen by no other run', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    // Plants every hook it can: a thenable Object.prototype, wrapped built-ins that copy what passes
    // through them, a global, a hoard of buffers kept alive through a prototype.
    const planter = await h.scripts.put(
      bundle(`async function () {
        const stolen = (globalThis.stolen = []);
        const push = Array.prototype.push;
        const stringify = JSON.stringify;
        let busy = false;
        const keep = (value) => {
          if (busy) return;
          busy = true;
          try { push.call(stolen, stringify(value)); } catch {} finally { busy = false; }
        };
        Object.defineProperty(Object.prototype, 'then', { get() { keep(this); return undefined; }, configurable: true });
        const parse = JSON.parse; JSON.parse = function (text) { keep(text); return parse(text); };
        Array.prototype.push = function (...items) { keep(items); return push.apply(this, items); };
        const then = Promise.prototype.then; Promise.prototype.then = function (...args) { keep('then'); return then.apply(this, args); };
        Object.prototype.hoard = [new ArrayBuffer(32 * 1024 * 1024), new ArrayBuffer(32 * 1024 * 1024)];
        Array.prototype.polluted = 'yes';
        return { planted: true };
      }`),
    );
    // Another environment's run: receives a secret and reads its connection.
    const victim = await createPostgresScriptStore({ db: h.pool }).put(
      bundle(
        `async function (svc, input) { const connection = await svc.getConnection(); return { got: input.secret.length, key: connection.credentials.apiKey.length }; }`,
      ),
      VICTIM_ENV,
    );
    const reader = await h.scripts.put(
      bundle(`async function () {
        return {
          stolen: globalThis.stolen ?? null,
          then: typeof Object.prototype.then,
          hoard: typeof Object.prototype.hoard,
          polluted: [].polluted ?? null,
          parse: JSON.parse.toString().includes('native code'),
          push: Array.prototype.push.toString().includes('native code'),
          promiseThen: Promise.prototype.then.toString().includes('native code'),
        };
      }`),
    );
    const victimDefinition = { ...actionDefinition('victim', victim), environmentId: VICTIM_ENV };
    const clean = {
      stolen: null,
      then: 'undefined',
      hoard: 'undefined',
      polluted: null,
      parse: true,
      push: true,
      promiseThen: true,
    };
    // In sequence on the same worker, then all at once, a few times over: whatever thread and
    // context each lands on, nothing crosses.
    for (let round = 0; round < 3; round++) {
      expect(
        await control.runAction({ definition: actionDefinition('planter', planter), connectionId: 'c', input: {} }),
      ).toEqual({ ok: true, output: { planted: true } });
      expect(
        await control.runAction({
          definition: victimDefinition,
          connectionId: 'v',
          input: { secret: 'prod-secret-123' },
        }),
      ).toEqual({ ok: true, output: { got: 15, key: 'secret-key'.length } });
      expect(
        await control.runAction({ definition: actionDefinition('reader', reader), connectionId: 'c', input: {} }),
      ).toEqual({ ok: true, output: clean });
    }
    const together = await Promise.all([
      control.runAction({ definition: actionDefinition('planter', planter), connectionId: 'c', input: {} }),
      ...Array.from({ length: 4 }, () =>
        control.runAction({ definition: victimDefinition, connectionId: 'v', input: { secret: 'prod-secret-123' } }),
      ),
      ...Array.from({ length: 4 }, () =>
        control.runAction({ definition: actionDefinition('reader', reader), connectionId: 'c', input: {} }),
      ),
    ]);
    for (const outcome of together.slice(5)) expect(outcome).toEqual({ ok: true, output: clean });
    expect(JSON.stringify(together)).not.toContain('prod-secret-123');
  }, 180_000);
});

describe('resource limits: each breach fails its own run with its own code, and the worker lives on', () => {
  it('syncs: records and bytes per batchSave, bytes per record, buffer memory, log lines', async () => {
    const h = await useRuntime();
    const sync = async (name: string, source: string) => {
      const scriptHash = await h.scripts.put(bundle(source));
      const input: RunSyncInput = {
        definition: syncDefinition({ syncName: name, models: ['Row'], scriptHash }),
        connectionId: 'limits',
        mode: 'incremental',
      };
      const started = Date.now();
      const outcome = await h.client.workflow
        .execute('runSync', {
          taskQueue: h.taskQueue,
          workflowId: syncRunId({ ...input.definition, connectionId: input.connectionId }, randomUUID()),
          args: [input],
          // Generous: the log flood writes 19 MiB of lines, minutes on a loaded machine.
          workflowExecutionTimeout: '6 minutes',
        })
        .then(
          () => 'completed',
          (error: unknown) =>
            error instanceof WorkflowFailedError
              ? `failed: ${(error.cause as { type?: string } | undefined)?.type}`
              : String(error),
        );
      return { outcome, seconds: (Date.now() - started) / 1000 };
    };
    const cases: Record<string, [string, string]> = {
      'batch too large': [
        `async function (svc) { await svc.batchSave(Array.from({ length: 10001 }, (_, i) => ({ id: i })), 'Row'); }`,
        'failed: batch_too_large',
      ],
      'record too large': [
        `async function (svc) { await svc.batchSave([{ id: 1, blob: 'x'.repeat(2 * 1024 * 1024) }], 'Row'); }`,
        'failed: record_too_large',
      ],
      'call too large': [
        `async function (svc) { await svc.batchSave(Array.from({ length: 20 }, (_, i) => ({ id: i, blob: 'x'.repeat(1000 * 1000) })), 'Row'); }`,
        'failed: payload_too_large',
      ],
      '4 GiB buffer': [
        `async function () { new Uint8Array(4 * 1024 * 1024 * 1024).fill(7); }`,
        'failed: script_memory_limit',
      ],
      'hoarded buffers': [
        `async function () { const kept = []; for (let i = 0; i < 10; i++) kept.push(new ArrayBuffer(50 * 1024 * 1024)); }`,
        'failed: script_memory_limit',
      ],
      // Lines of 8 MiB: the realm cuts each before the bridge to the run. Sent whole, 100 of them (one
      // flush) spent the run's 1 s loop budget in JSON copies (1 MiB lines did at CI load: script_timeout).
      'log flood': [
        `async function (svc) { const line = 'y'.repeat(8 * 1024 * 1024); for (let i = 0; i < 300; i++) await svc.log(line); }`,
        'completed',
      ],
    };
    for (const [name, [source, expected]] of Object.entries(cases)) {
      const { outcome, seconds } = await sync(name.replace(/ /g, '-'), source);
      console.log(`[limits] ${name}: ${outcome} in ${seconds.toFixed(1)} s`);
      expect({ name, outcome }).toEqual({ name, outcome: expected });
    }
    // Log lines are cut at the call: 300 lines of 64 KiB, not of 1 MiB.
    const lines = await h.pool.query<{ n: string; longest: number }>(
      `SELECT count(*) AS n, max(length(message)) AS longest FROM script_logs WHERE script_name = 'log-flood'`,
    );
    expect(Number(lines.rows[0]!.n)).toBe(300);
    expect(lines.rows[0]!.longest).toBeLessThanOrEqual(64 * 1024);
    // The same worker still runs syncs.
    expect((await sync('after', `async function (svc) { await svc.batchSave([{ id: 1 }], 'Row'); }`)).outcome).toBe(
      'completed',
    );
    expect(h.worker.getState()).toBe('RUNNING');
  }, 600_000);

  it('actions: results that cannot be serialized fail at once; triggerAction nests a bounded depth; stray promises harm no one', async () => {
    const h = await useRuntime();
    const control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
    const action = async (name: string, source: string, input: unknown = {}) => {
      const definition = actionDefinition(name, await h.scripts.put(bundle(source)));
      h.actions.set(name, definition);
      const started = Date.now();
      const outcome = await control.runAction({ definition, connectionId: 'c', input }).then(
        (result) => (result.ok ? 'ok' : 'action_error'),
        (error: unknown) => (error as { code?: string }).code,
      );
      return { outcome, seconds: (Date.now() - started) / 1000 };
    };
    const bigint = await action('bigint', `async function () { return { n: 10n }; }`);
    const cyclic = await action('cyclic', `async function () { const a = {}; a.self = a; return a; }`);
    expect(bigint.outcome).toBe('result_not_serializable');
    expect(cyclic.outcome).toBe('result_not_serializable');
    // At once: not retried until the action's timeout.
    expect(bigint.seconds).toBeLessThan(30);
    expect(cyclic.seconds).toBeLessThan(30);

    const recursive = await action(
      'recurse',
      `async function (svc, input) { return svc.triggerAction('recurse', { n: (input?.n ?? 0) + 1 }); }`,
    );
    console.log(`[limits] recursion: ${recursive.outcome} in ${recursive.seconds.toFixed(1)} s`);
    expect(recursive.outcome).toBe('action_depth_exceeded');
    const nested = await h.client.workflow.count(`WorkflowType = 'runAction' AND TaskQueue = '${h.taskQueue}-actions'`);
    // The API's run, four levels below it, and the one refused at the fifth never started.
    expect(nested.count).toBeLessThanOrEqual(2 + 5);

    // An unhandled rejection, and a promise whose constructor throws when looked at, used to kill the
    // workflow thread (the SDK looks both up); they are the script's business alone now.
    const stray = await action(
      'stray',
      `async function () {
        Promise.reject(new Error('nobody handles this'));
        let settle; const p = new Promise((resolve) => { settle = resolve; });
        Object.defineProperty(p, 'constructor', { get() { throw new Error('boom'); } });
        class Sneaky extends Promise {}
        Object.defineProperty(Sneaky, 'constructor', { get() { throw new Error('boom'); } });
        new Sneaky(() => {});
        settle(1);
        await new Promise((resolve) => setTimeout(resolve, 10));
        return { done: true };
      }`,
    );
    expect(stray.outcome).toBe('ok');
    expect((await action('bystander', `async function (svc, input) { return input; }`, { n: 1 })).outcome).toBe('ok');
    expect(h.actionWorker.getState()).toBe('RUNNING');
  }, 240_000);
});
