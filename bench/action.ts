/**
 * Action round trip (issues 5, 31). `npx tsx bench/action.ts [--runs N]`.
 *
 * Latency of an action as the API runs it (syncControl.runAction: start `runAction` on the action
 * queue, load the bundle by hash, evaluate it, optionally one `svc.get` to a fake API on loopback,
 * return the output), with the production data converter (encryption, then claim check), against
 * Temporal's floors on the same server and the same queue: a bare workflow that returns at once
 * (`floorNoop`, the round trip of issue 31's goal: an action ≤ 1.3× it) and a workflow running one
 * no-op ordinary activity (`floorRoundTrip`, issue 5's floor). Calls alternate, one at a time, so
 * drift of the shared machine hits every kind alike. Prints p50 and p99 of each and the ratios.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Encryptor } from '../src/connections/encryption.js';
import { actionTaskQueue } from '../workflows/taskQueues.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { formatGoal, formatSummary, line, summarize, timed } from './lib/stats.js';
import { bundle, productionConverter, serviceSyncControl, startRuntimeBench } from './syncHarness.js';

const { runs } = positiveIntegerFlags({ runs: 200 });

const production = productionConverter(new Encryptor([randomBytes(32)]));
const bench = await startRuntimeBench({
  api: (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"pong":true}');
  },
  extraActivities: { noop: () => Promise.resolve() },
  dataConverter: production,
  clientDataConverter: production,
});

try {
  console.log(`action round trip: ${runs} calls of each, alternating\n  (${bench.versions})`);
  const control = serviceSyncControl(bench);
  const actionQueue = actionTaskQueue(bench.taskQueue);
  const definition = (name: string, scriptHash: string) => ({
    environmentId: 'bench',
    integrationId: 'bench-api',
    actionName: name,
    scriptHash,
  });
  const oneRequest = definition(
    'ping',
    await bench.scripts.put(
      bundle(
        `async function (svc, input) { const res = await svc.get({ endpoint: '/ping' }); return { ...res.data, n: input.n }; }`,
      ),
      'bench',
    ),
  );
  const noRequest = definition(
    'echo',
    await bench.scripts.put(bundle(`async function (svc, input) { return input; }`), 'bench'),
  );

  const samples = { bare: [] as number[], floor: [] as number[], action: [] as number[], echo: [] as number[] };
  for (let i = -10; i < runs; i++) {
    const bare = await timed(() =>
      bench.client.workflow.execute('floorNoop', { taskQueue: actionQueue, workflowId: `floor-${randomUUID()}` }),
    );
    const floor = await timed(() =>
      bench.client.workflow.execute('floorRoundTrip', { taskQueue: actionQueue, workflowId: `floor-${randomUUID()}` }),
    );
    const action = await timed(() =>
      control.runAction({ definition: oneRequest, connectionId: 'bench', input: { n: i } }),
    );
    const echo = await timed(() =>
      control.runAction({ definition: noRequest, connectionId: 'bench', input: { n: i } }),
    );
    if (!action.result.ok || !echo.result.ok) throw new Error('an action failed');
    // The first calls warm up connections and the workflow cache; they are not counted.
    if (i < 0) continue;
    samples.bare.push(bare.ms);
    samples.floor.push(floor.ms);
    samples.action.push(action.ms);
    samples.echo.push(echo.ms);
  }
  const bare = summarize(samples.bare);
  const floor = summarize(samples.floor);
  const action = summarize(samples.action);
  const echo = summarize(samples.echo);
  console.log(line('bare workflow (returns at once)', formatSummary(bare)));
  console.log(line('workflow + one no-op activity', formatSummary(floor)));
  console.log(line('action without svc operations', formatSummary(echo)));
  console.log(line('action with one svc.get', formatSummary(action)));
  for (const [label, summary] of [
    ['action (no svc)', echo],
    ['action (svc.get)', action],
  ] as const) {
    for (const p of ['p50', 'p99'] as const) {
      const value = summary[p] / bare[p];
      console.log(formatGoal({ label: `${p} ratio ${label} / bare`, value, goal: 1.3, kind: 'max', unit: '×' }));
    }
  }
  console.log(line('p50 ratio action (svc.get) / one-activity floor', `${(action.p50 / floor.p50).toFixed(2)}×`));
} finally {
  await bench.close();
}
