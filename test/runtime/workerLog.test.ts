/**
 * What a worker process logs about failed runs (issue 19): an action that refuses with ActionError (a
 * normal 422 for the caller) is one line at INFO, without a stack; a run that fails unexpectedly is still
 * a WARN with its error. The worker runs in its own process with the logger the service installs
 * (src/temporal/logger.ts, as src/main.ts does) and the bundle the service runs (src/temporal/workflowBundle.ts),
 * at INFO so that the INFO line can be seen.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rootActionId } from '../../src/temporal/runAuthority.js';
import { createSyncControl, type SyncControl } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { actionDefinition, bundle, json, startFakeApi, useRuntime, type RuntimeHarness } from './helpers.js';
import { startWorkerProcess, type WorkerChild } from './processWorker.js';

let h: RuntimeHarness;
let control: SyncControl;
let worker: WorkerChild;

beforeAll(async () => {
  h = await useRuntime({ worker: false });
  control = createSyncControl({ client: h.client, taskQueue: h.taskQueue });
  const api = await startFakeApi((_request, response) => json(response, 200, {}));
  worker = await startWorkerProcess({
    databaseUrl: h.dbUrl,
    taskQueue: h.taskQueue,
    apiBaseUrl: api.url,
    env: { WORKER_LOG_LEVEL: 'INFO' },
  });
});

afterAll(async () => {
  worker.child.kill('SIGTERM');
  await worker.exited;
});

/** The log entries (one timestamped line and its continuation lines) the worker wrote about one workflow. */
const entriesAbout = (workflowId: string): string[] =>
  worker
    .output()
    .split(/\n(?=\d{4}-\d\d-\d\dT)/)
    .filter((entry) => entry.includes(workflowId));

describe('the worker log of failed runs', () => {
  it('logs an ActionError as one INFO line without a stack trace', async () => {
    const refusing = await h.scripts.put(
      bundle(`async function (svc, input) { throw new ActionError({ message: 'issue is locked', issue: input.n }); }`),
    );
    const definition = actionDefinition('refuse', refusing);
    const workflowId = rootActionId({ ...definition, connectionId: 'c1' }, 'expected-failure-log');
    const outcome = await control.runAction({ definition, connectionId: 'c1', input: { n: 7 } }, { workflowId });
    expect(outcome).toMatchObject({ ok: false, body: { error_type: 'action_script_failure' } });
    const entries = await eventually(async () => {
      const found = entriesAbout(workflowId).filter((entry) => /Workflow failed/.test(entry));
      return found.length > 0 ? found : undefined;
    }, 15_000);
    expect(entries).toHaveLength(1);
    const entry = entries[0]?.trim() ?? '';
    expect(entry.split('\n')).toHaveLength(1);
    expect(entry).toMatch(
      /\[INFO\] Workflow failed as expected: action_script_failure: runAction action:\S+:expected-failure-log: issue is locked$/,
    );
  });

  it('still logs an unexpected failure (a script that throws a TypeError) as a WARN with its error', async () => {
    const broken = await h.scripts.put(bundle(`async function (svc) { null.boom(); }`));
    const definition = actionDefinition('broken', broken);
    const workflowId = rootActionId({ ...definition, connectionId: 'c1' }, 'unexpected-failure-log');
    await expect(
      control.runAction({ definition, connectionId: 'c1', input: {} }, { workflowId }),
    ).rejects.toMatchObject({ code: 'script_error' });
    const entry = await eventually(
      async () => entriesAbout(workflowId).find((candidate) => /\[WARN\] Workflow failed/.test(candidate)),
      15_000,
    );
    expect(entry).toContain("TypeError: Cannot read properties of null (reading 'boom')");
    expect(entry).toContain('failureType'); // the attribute is there, the type is not an expected one
  });
});
