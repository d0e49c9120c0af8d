/**
 * The apply workflow replays its recorded histories without non-determinism: those recorded before
 * applies paged in waves of parallel calls (the input's `batch`; commit fa2d688, 50 connections per
 * call, one at a time), kept in fixtures/applyHistories, and those the current code records here. Each
 * deploy covers both kinds of step: starting entities, then handing them a new definition by signal,
 * over more than one call's worth of connections.
 *
 * RECORD_APPLY_HISTORIES=1 writes the histories this run records into the fixtures (done once, with
 * the code before the waves).
 */
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import proto from '@temporalio/proto';
import type { Client } from '@temporalio/client';
import { describe, expect, it } from 'vitest';
import { APPLY_BATCHING, applyWorkflowId } from '../../src/deploy/plan.js';
import { expectReplays, type History } from '../helpers/replay.js';
import { useDatabase } from '../kit/db.js';
import { mapLimit } from '../../src/mapLimit.js';
import { deployEnvironment, request } from '../kit/apply.js';

const { temporal } = proto;

const FIXTURES = join(dirname(fileURLToPath(import.meta.url)), 'fixtures', 'applyHistories');
const RECORD = process.env['RECORD_APPLY_HISTORIES'] === '1';
// More than two calls' worth, before and after the waves.
const CONNECTIONS = 120;

/** Every execution of the environment's apply workflow (each deploy is one, continued-as-new runs too). */
async function applyHistories(client: Client, environmentId: string): Promise<History[]> {
  const workflowId = applyWorkflowId(environmentId);
  const runs: string[] = [];
  for await (const execution of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    runs.push(execution.runId);
  }
  const histories = await mapLimit(runs, 4, (runId) => client.workflow.getHandle(workflowId, runId).fetchHistory());
  // Oldest first, by the start event's time.
  return histories.sort(
    (a, b) => Number(a.events?.[0]?.eventTime?.seconds) - Number(b.events?.[0]?.eventTime?.seconds),
  );
}

describe('apply workflow: history compatibility', () => {
  it('replays the histories recorded before the waves, and those the current code records', async () => {
    const { client, env, deployments, startWorker, terminateEntities } = await deployEnvironment(CONNECTIONS, 240_000);
    const worker = await startWorker();
    try {
      await deployments.apply(env, request('1h'));
      await deployments.apply(env, request('2h'));
    } finally {
      worker.child.kill('SIGTERM');
      await worker.exited;
      await terminateEntities();
    }
    // Visibility lags a little behind the executions it lists.
    let recorded: History[] = [];
    for (const deadline = Date.now() + 60_000; recorded.length < 2 && Date.now() < deadline;) {
      recorded = await applyHistories(client, env);
      if (recorded.length < 2) await new Promise((resolve) => setTimeout(resolve, 200));
    }
    expect(recorded.length).toBeGreaterThanOrEqual(2);
    const workflowId = applyWorkflowId(env);
    if (RECORD) {
      rmSync(FIXTURES, { recursive: true, force: true });
      mkdirSync(FIXTURES, { recursive: true });
      recorded.forEach((history, index) => {
        // The history in Temporal's binary encoding (what the server sends), base64; replay needs the id.
        const encoded = Buffer.from(temporal.api.history.v1.History.encode(history).finish()).toString('base64');
        writeFileSync(
          join(FIXTURES, `${String(index).padStart(2, '0')}-apply.json`),
          `${JSON.stringify({ workflowId, history: encoded }, null, 2)}\n`,
        );
      });
    }

    const { pool } = await useDatabase();
    const replay = (histories: { workflowId: string; history: History }[]) => expectReplays(pool, histories);
    const activityCalls = (history: History, type: string): number =>
      (history.events ?? []).filter((event) => event.activityTaskScheduledEventAttributes?.activityType?.name === type)
        .length;

    // The current code pages by the input's batching: 120 connections are two calls of one wave.
    expect(recorded.map((history) => activityCalls(history, 'startSyncEntities'))).toEqual(
      recorded.map(() => Math.ceil(CONNECTIONS / APPLY_BATCHING.size)),
    );
    await replay(recorded.map((history) => ({ workflowId, history })));

    const fixtures = readdirSync(FIXTURES)
      .filter((file) => file.endsWith('.json'))
      .map((file) => {
        const saved = JSON.parse(readFileSync(join(FIXTURES, file), 'utf8')) as { workflowId: string; history: string };
        const history = temporal.api.history.v1.History.decode(Buffer.from(saved.history, 'base64'));
        expect(history.events?.[0]?.workflowExecutionStartedEventAttributes?.workflowType?.name, file).toBe(
          'applyDeployment',
        );
        return { workflowId: saved.workflowId, history };
      });
    // The fixtures page 50 at a time: three calls for 120 connections, in each of the two deploys.
    expect(fixtures.map(({ history }) => activityCalls(history, 'startSyncEntities'))).toEqual([3, 3]);
    const signalsSent = (history: History): number =>
      (history.events ?? []).filter((event) => event.signalExternalWorkflowExecutionInitiatedEventAttributes).length;
    // The first deploy starts every entity, the second hands each its new definition.
    expect(fixtures.map(({ history }) => signalsSent(history))).toEqual([0, CONNECTIONS]);
    await replay(fixtures);
  }, 300_000);
});
