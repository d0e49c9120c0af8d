/**
 * Action round trip (issue 5). `npx tsx bench/action.ts [--runs N]`.
 *
 * Latency of an action as the API runs it (syncControl.runAction: start `runAction`, load the bundle by
 * hash, evaluate it, one `svc.get` to a fake API on loopback, return the output) against Temporal's
 * floor on the same server: a workflow that runs one no-op activity. Calls alternate, one at a time.
 * Prints p50 and p99 of both and the ratios (goal ≤ 1.5×).
 */
import { randomUUID } from 'node:crypto';
import { createSyncControl } from '../src/temporal/syncControl.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { formatGoal, formatSummary, line, summarize, timed } from './lib/stats.js';
import { bundle, startRuntimeBench } from './syncHarness.js';

const { runs } = positiveIntegerFlags({ runs: 200 });

const bench = await startRuntimeBench({
  api: (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"pong":true}');
  },
  extraActivities: { noop: () => Promise.resolve() },
});

try {
  console.log(`action round trip: ${runs} calls of each, alternating\n  (${bench.versions})`);
  const control = createSyncControl({ client: bench.client, taskQueue: bench.taskQueue });
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

  const floor: number[] = [];
  const action: number[] = [];
  const bare: number[] = [];
  for (let i = -10; i < runs; i++) {
    const f = await timed(() =>
      bench.client.workflow.execute('floorRoundTrip', {
        taskQueue: bench.taskQueue,
        workflowId: `floor-${randomUUID()}`,
      }),
    );
    const a = await timed(() => control.runAction({ definition: oneRequest, connectionId: 'bench', input: { n: i } }));
    const b = await timed(() => control.runAction({ definition: noRequest, connectionId: 'bench', input: { n: i } }));
    if (!a.result.ok || !b.result.ok) throw new Error('an action failed');
    // The first calls warm up connections and the workflow cache; they are not counted.
    if (i < 0) continue;
    floor.push(f.ms);
    action.push(a.ms);
    bare.push(b.ms);
  }
  const f = summarize(floor);
  const a = summarize(action);
  const b = summarize(bare);
  console.log(line('floor: workflow + one no-op activity', formatSummary(f)));
  console.log(line('action with one svc.get', formatSummary(a)));
  console.log(line('action without svc operations', formatSummary(b)));
  console.log(
    formatGoal({ label: 'p50 ratio action(svc.get) / floor', value: a.p50 / f.p50, goal: 1.5, kind: 'max', unit: '×' }),
  );
  console.log(
    formatGoal({ label: 'p99 ratio action(svc.get) / floor', value: a.p99 / f.p99, goal: 1.5, kind: 'max', unit: '×' }),
  );
} finally {
  await bench.close();
}
