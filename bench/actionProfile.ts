/**
 * Where an action's round trip goes (issue 31), against a bare workflow's on the same server and queue.
 * `npx tsx bench/actionProfile.ts [--runs N]`.
 *
 * Runs actions (syncControl.runAction, as the API does; with and without one `svc.get`) and bare
 * workflows (`floorNoop`) alternately, one at a time, with the production data converter, and splits
 * each round trip by the timestamps of its history and of this process:
 *
 * - client: `start` call returned, result received (the long poll answered);
 * - server (event times): execution started, first workflow task started (the worker polled it),
 *   workflow task completed, execution completed;
 * - worker (bench/lib/stepProbe.ts): the workflow activations, the codecs, the activities' bodies, and
 *   the `describe` calls the run authority makes (src/temporal/runAuthority.ts).
 *
 * Prints the median of each segment per kind, and the worker's spans per run (mean ms).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type proto from '@temporalio/proto';
import { Encryptor } from '../src/connections/encryption.js';
import { actionTaskQueue } from '../workflows/taskQueues.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { line, nowMs, summarize } from './lib/stats.js';
import { installStepProbe } from './lib/stepProbe.js';
import { bundle, productionConverter, serviceSyncControl, startRuntimeBench } from './syncHarness.js';

const { runs } = positiveIntegerFlags({ runs: 60 });

const probe = installStepProbe();
const production = productionConverter(new Encryptor([randomBytes(32)]));
const timedCodecs = (standard: Parameters<typeof production>[0]) => {
  const converter = production(standard);
  const codecs = converter.payloadCodecs ?? [];
  return { ...converter, payloadCodecs: probe.timeCodecs(codecs, ['encryption', 'claimCheck']) };
};
const bench = await startRuntimeBench({
  api: (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"pong":true}');
  },
  dataConverter: timedCodecs,
  clientDataConverter: production,
  activities: (activities) => probe.timeActivities(activities),
});
// The run authority's lookups go through this client's connection (bench/syncHarness.ts runtimeDeps).
const service = bench.client.connection.workflowService as unknown as Record<string, (...args: unknown[]) => unknown>;
const describe = service['describeWorkflowExecution']!.bind(service);
service['describeWorkflowExecution'] = (...args: unknown[]) =>
  probe.span('temporal: describeWorkflowExecution', () => describe(...args) as Promise<unknown>);

type Event = proto.temporal.api.history.v1.IHistoryEvent;
const ms = (event: Event | undefined): number =>
  event?.eventTime ? Number(event.eventTime.seconds) * 1000 + (event.eventTime.nanos ?? 0) / 1e6 : Number.NaN;

/** The segments of one round trip, ms. */
async function segments(workflowId: string, startedAt: number, startReturned: number, resultAt: number) {
  const history = await bench.client.workflow.getHandle(workflowId).fetchHistory();
  const events = history.events ?? [];
  const type = (name: string) =>
    events.filter((event) => String(event.eventType) === name || eventName(event) === name);
  const started = type('WorkflowExecutionStarted')[0];
  const taskStarted = type('WorkflowTaskStarted')[0];
  const taskCompleted = type('WorkflowTaskCompleted').at(-1);
  const closed = events.at(-1);
  // Wall clocks of this process and the server are the same machine's.
  const epochOffset = Date.now() - nowMs();
  return {
    'client → server: execution started': ms(started) - (startedAt + epochOffset),
    'start call returned (after started)': startReturned + epochOffset - ms(started),
    'started → worker polled the task': ms(taskStarted) - ms(started),
    'task started → task completed (worker)': ms(taskCompleted) - ms(taskStarted),
    'task completed → execution closed': ms(closed) - ms(taskCompleted),
    'closed → client has the result': resultAt + epochOffset - ms(closed),
    'workflow tasks': type('WorkflowTaskCompleted').length,
    'history events': events.length,
    total: resultAt - startedAt,
  };
}

function eventName(event: Event): string {
  // eventType is the enum number; the names below are those the segments use.
  const names: Record<number, string> = {
    1: 'WorkflowExecutionStarted',
    2: 'WorkflowExecutionCompleted',
    5: 'WorkflowTaskScheduled',
    6: 'WorkflowTaskStarted',
    7: 'WorkflowTaskCompleted',
  };
  return names[Number(event.eventType)] ?? '';
}

try {
  console.log(`action profile: ${runs} runs of each kind, alternating\n  (${bench.versions})`);
  const control = serviceSyncControl(bench);
  const queue = actionTaskQueue(bench.taskQueue);
  const definition = (name: string, code: string) =>
    bench.scripts.put(bundle(code), 'bench').then((scriptHash) => ({
      environmentId: 'bench',
      integrationId: 'bench-api',
      actionName: name,
      scriptHash,
    }));
  const echo = await definition('echo', `async function (svc, input) { return input; }`);
  const ping = await definition(
    'ping',
    `async function (svc, input) { const res = await svc.get({ endpoint: '/ping' }); return { ...res.data, n: input.n }; }`,
  );
  const kinds = {
    bare: async (workflowId: string, marks: number[]) => {
      const handle = await bench.client.workflow.start('floorNoop', { taskQueue: queue, workflowId });
      marks.push(nowMs());
      await handle.result();
    },
    // syncControl.runAction starts and waits in one call: its start is not timed apart.
    'action (no svc)': async (workflowId: string) => {
      await control.runAction({ definition: echo, connectionId: 'bench', input: { n: 1 } }, { workflowId });
    },
    'action (svc.get)': async (workflowId: string) => {
      await control.runAction({ definition: ping, connectionId: 'bench', input: { n: 1 } }, { workflowId });
    },
  };
  const results = new Map<string, Record<string, number>[]>();
  const spans = new Map<string, Map<string, number>>();
  for (let i = -5; i < runs; i++) {
    for (const [kind, run] of Object.entries(kinds)) {
      const id = randomUUID();
      const workflowId =
        kind === 'bare'
          ? `floor-${id}`
          : `action:bench:bench-api:bench:${kind.includes('get') ? 'ping' : 'echo'}:${id}`;
      probe.reset();
      const marks: number[] = [];
      const startedAt = nowMs();
      await run(workflowId, marks);
      const resultAt = nowMs();
      if (i < 0) continue;
      const report = await probe.report();
      const perKind = spans.get(kind) ?? new Map<string, number>();
      for (const [name, span] of Object.entries(report.spans)) {
        perKind.set(name, (perKind.get(name) ?? 0) + span.totalMs);
      }
      for (const [thread, threadSpans] of Object.entries(report.threads)) {
        void thread;
        for (const [name, span] of Object.entries(threadSpans)) {
          perKind.set(`workflow thread: ${name}`, (perKind.get(`workflow thread: ${name}`) ?? 0) + span.totalMs);
        }
      }
      spans.set(kind, perKind);
      const split = await segments(workflowId, startedAt, marks[0] ?? Number.NaN, resultAt);
      results.set(kind, [...(results.get(kind) ?? []), split]);
    }
  }
  for (const [kind, list] of results) {
    console.log(`\n${kind}: medians over ${list.length} runs (ms)`);
    for (const key of Object.keys(list[0] ?? {})) {
      const values = list.map((split) => split[key] ?? Number.NaN).filter((value) => !Number.isNaN(value));
      if (values.length === 0) continue;
      console.log(line(key, summarize(values).p50.toFixed(2)));
    }
    console.log(`  worker-side spans, mean ms per run:`);
    for (const [name, total] of [...(spans.get(kind) ?? new Map<string, number>())].sort((a, b) => b[1] - a[1])) {
      if (total / list.length < 0.05) continue;
      console.log(line(`  ${name}`, (total / list.length).toFixed(2)));
    }
  }
} finally {
  await bench.close();
}
