/**
 * What a worker process logs about failed runs (issue 19): an action that refuses with ActionError (a
 * normal 422 for the caller) is one line at INFO, without a stack; a run that fails unexpectedly is still
 * a WARN with its failure type. Neither shows the script's message (issue 16): a script that puts the
 * credential it read into its failure, in any of seven ways, leaves no trace of it in the worker's output. The worker runs in its own process with the logger the service installs
 * (src/temporal/logger.ts into src/log.ts's JSON lines, as src/main.ts does) and the bundle the service runs
 * (src/temporal/workflowBundle.ts), at INFO so that the INFO line can be seen.
 */
import { describe, expect } from 'vitest';
import { rootActionId, syncRunId } from '../../src/temporal/runAuthority.js';
import { WITHHELD } from '../../src/temporal/logger.js';
import { createSyncControl, type SyncControl } from '../../src/temporal/syncControl.js';
import { eventually } from '../helpers/eventually.js';
import { randomUUID } from 'node:crypto';
import type { RunSyncInput } from '../../src/runtime/definitions.js';
import { runtimeTestWith, type RuntimeHarness } from '../kit/index.js';
import { actionDefinition, syncDefinition } from '../kit/runtime.js';
import { startWorkerProcess, type WorkerChild } from '../kit/processWorker.js';
import { bundle } from '../kit/scripts.js';
import { json } from '../kit/upstream.js';

// The connections' credential in this worker: a script reads it with svc.getConnection().
const KEY = 'tok_9fQ2-zX7/leak+me';

/**
 * `runtime` without workers of its own, its fake API answering `{}`; `worker`: the worker process on its
 * task queue at INFO with the connections' credential, stopped when the file ends.
 */
const it = runtimeTestWith({ worker: false, upstream: (_request, response) => json(response, 200, {}) }).extend<{
  worker: WorkerChild;
}>({
  worker: [
    async ({ runtime, upstream }, use) => {
      const worker = await startWorkerProcess({
        databaseUrl: runtime.dbUrl,
        taskQueue: runtime.taskQueue,
        apiBaseUrl: upstream.url,
        env: { WORKER_LOG_LEVEL: 'info', WORKER_API_KEY: KEY },
      });
      try {
        await use(worker);
      } finally {
        worker.child.kill('SIGTERM');
        await worker.exited;
      }
    },
    { scope: 'file' },
  ],
});

const controlOf = (h: RuntimeHarness): SyncControl => createSyncControl({ client: h.client, taskQueue: h.taskQueue });

interface Fields {
  level: string;
  message: string;
  [field: string]: unknown;
}
/** A line of the worker's log: its fields, and the line as written. */
type Entry = Fields & { raw: string };

/** The log entries (JSON lines) the worker wrote about one workflow. */
const entriesAbout = (worker: WorkerChild, workflowId: string): Entry[] =>
  worker
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{') && line.includes(workflowId))
    .map((raw) => ({ ...(JSON.parse(raw) as Fields), raw }));

/** The entry of a run's failure, if the worker wrote it yet. */
const failureOf = (worker: WorkerChild, workflowId: string): Entry | undefined =>
  entriesAbout(worker, workflowId).find((entry) => entry.message.startsWith('Workflow failed'));

describe('the worker log of failed runs', () => {
  it('logs an ActionError as one INFO line without a stack trace', async ({ runtime: h, worker }) => {
    const control = controlOf(h);
    const refusing = await h.scripts.put(
      bundle(`async function (svc, input) { throw new ActionError({ message: 'issue is locked', issue: input.n }); }`),
    );
    const definition = actionDefinition('refuse', refusing);
    const workflowId = rootActionId({ ...definition, connectionId: 'c1' }, 'expected-failure-log');
    const outcome = await control.runAction({ definition, connectionId: 'c1', input: { n: 7 } }, { workflowId });
    expect(outcome).toMatchObject({ ok: false, body: { error_type: 'action_script_failure' } });
    const entry = await eventually(async () => failureOf(worker, workflowId), 15_000);
    expect(
      entriesAbout(worker, workflowId).filter((found) => found.message.startsWith('Workflow failed')),
    ).toHaveLength(1);
    expect(entry.level).toBe('info');
    // The script's message ('issue is locked') went to the caller; the log does not repeat it.
    expect(entry.message).toMatch(
      /^Workflow failed as expected: action_script_failure: runAction action:\S+:expected-failure-log \(message withheld from the worker log .*\)$/,
    );
    // No error object, so no stack trace.
    expect(entry).not.toHaveProperty('error');
    expect(entry.raw).not.toContain('issue is locked');
  });

  it('still logs an unexpected failure (a script that throws a TypeError) as a WARN with its type', async ({
    runtime: h,
    worker,
  }) => {
    const control = controlOf(h);
    const broken = await h.scripts.put(bundle(`async function (svc) { null.boom(); }`));
    const definition = actionDefinition('broken', broken);
    const workflowId = rootActionId({ ...definition, connectionId: 'c1' }, 'unexpected-failure-log');
    await expect(
      control.runAction({ definition, connectionId: 'c1', input: {} }, { workflowId }),
    ).rejects.toMatchObject({ code: 'script_error' });
    const entry = await eventually(async () => failureOf(worker, workflowId), 15_000);
    expect([entry.level, entry.message]).toEqual(['warn', 'Workflow failed']);
    // Its type, not its message: the message of a script's error is the script's text.
    expect(entry['failureType']).toBe('script_error'); // the attribute is there, the type is not an expected one
    // The failure crossed a thread by structured clone: its class is a plain Error by then.
    expect(entry['error']).toBe(`Error: ${WITHHELD}`);
    expect(entry.raw).not.toContain('Cannot read properties of null');
  });

  it('never shows a credential the script read, whatever way its failure carries it', async ({
    runtime: h,
    worker,
  }) => {
    const control = controlOf(h);
    const read = `const key = (await svc.getConnection()).credentials.apiKey;`;
    const leaks: Record<string, string> = {
      thrown: `throw new Error('the token is ' + key);`,
      actionError: `throw new ActionError({ message: key, token: key });`,
      typeError: `const nothing = null; nothing[key]();`,
      value: `throw key;`,
      errorName: `const error = new Error('x'); error.name = key; throw error;`,
      forgedCode: `throw { name: 'OperationError', code: key, message: key };`,
      encoded: `throw new Error(encodeURIComponent(key) + ' ' + JSON.stringify({ key }));`,
    };
    const workflowIds: string[] = [];
    for (const [name, leak] of Object.entries(leaks)) {
      const hash = await h.scripts.put(bundle(`async function (svc) { ${read} ${leak} }`));
      const definition = actionDefinition(name, hash);
      const workflowId = rootActionId({ ...definition, connectionId: 'c1' }, `leak-${name}`);
      workflowIds.push(workflowId);
      // Failed runs, as an ActionError outcome or a rejection: either way the run has ended and was logged.
      await control.runAction({ definition, connectionId: 'c1', input: {} }, { workflowId }).catch(() => undefined);
    }
    // And a sync run (the other workflow type that runs a script).
    const hash = await h.scripts.put(bundle(`async function (svc) { ${read} throw new Error('sync got ' + key); }`));
    const input: RunSyncInput = {
      definition: syncDefinition({ syncName: 'leaky', scriptHash: hash }),
      connectionId: 'c1',
      mode: 'incremental',
    };
    const syncId = syncRunId({ ...input.definition, connectionId: 'c1' }, randomUUID());
    workflowIds.push(syncId);
    await expect(
      h.client.workflow.execute<(i: RunSyncInput) => Promise<unknown>>('runSync', {
        taskQueue: h.taskQueue,
        workflowId: syncId,
        args: [input],
        workflowExecutionTimeout: '2 minutes',
      }),
    ).rejects.toThrow();

    // Every run's failure is logged (so the lines below are the ones that would have leaked) …
    const entries = await eventually(async () => {
      const found = workflowIds.map((workflowId) => failureOf(worker, workflowId));
      return found.every((entry) => entry !== undefined) ? found : undefined;
    }, 30_000);
    for (const entry of entries) expect(entry.raw).toMatch(/withheld from the worker log/);
    expect([entries[0]?.level, entries[0]?.message, entries[0]?.['failureType']]).toEqual([
      'warn',
      'Workflow failed',
      'script_error',
    ]);
    expect(entries[1]?.level).toBe('info');
    expect(entries[1]?.message).toMatch(/^Workflow failed as expected: action_script_failure: runAction /);
    // … and nothing the worker wrote holds the credential in any spelling.
    const output = worker.output();
    for (const form of [
      KEY,
      encodeURIComponent(KEY),
      JSON.stringify(KEY).slice(1, -1),
      Buffer.from(KEY).toString('base64'),
    ]) {
      expect(output).not.toContain(form);
    }
  });
});
