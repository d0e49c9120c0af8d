/**
 * Sync throughput (issues 5, 31). `npx tsx bench/sync.ts [--records N] [--page N] [--rounds N] [--normal]`.
 *
 * A sync script pages through a fake API on loopback with `svc.get` and saves each page with
 * `svc.batchSave` (every call a durable step: a local activity), run as production runs a scheduled
 * run (inside its sync entity's execution, `manageSync`: bench/syncHarness.ts runEntitySync), against a raw Postgres upsert of the
 * same records in the same batches from this one process, in the same run. Workers and client use the
 * production data converter (every payload encrypted, then claim-checked; src/service.ts), and the
 * step ledger encrypts what it keeps, as in production. `--rounds` times (default 3): the sync, then
 * the floor below, then the raw upsert again; each round's ratio compares the sync with the mean of
 * the raw runs just before and after it. Prints records/s of each, the ratios and their median. The
 * floor is Temporal's for those durable steps on the same server (a workflow that runs two local
 * activities that do nothing per page, workflows/floor.ts): with the raw upsert, the most any sync
 * with a durable fetch and a durable save per page could do here, the ceiling of sync ÷ raw. With
 * `--normal`, the same sync with operations as normal activities too, for comparison (slow: about
 * 500 records/s at pages of 100).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { loadavg } from 'node:os';
import { Encryptor } from '../src/connections/encryption.js';
import type { OperationMode } from '../src/runtime/definitions.js';
import { positiveIntegerFlags } from './lib/flags.js';
import { formatCount, line, summarize, timed } from './lib/stats.js';
import { RAW_TABLE_SQL, rawUpsert, recordsApi, syntheticRecord } from './lib/syncRecords.js';
import { bundle, productionConverter, runEntitySync, startRuntimeBench } from './syncHarness.js';

const normal = process.argv.includes('--normal');
const { records, page, rounds } = positiveIntegerFlags(
  { records: 50_000, page: 100, rounds: 3 },
  process.argv.slice(2).filter((arg) => arg !== '--normal'),
);

const makeRecord = (n: number) => syntheticRecord(n);

const production = productionConverter(new Encryptor([randomBytes(32)]));
const bench = await startRuntimeBench({
  api: recordsApi(makeRecord),
  extraActivities: { noop: () => Promise.resolve() },
  dataConverter: production,
  clientDataConverter: production,
});

try {
  console.log(`sync throughput: ${formatCount(records)} records, pages of ${page}\n  (${bench.versions})`);
  const scriptFor = async (total: number) =>
    bench.scripts.put(
      bundle(`async function (svc) {
      for await (const items of svc.paginate({ endpoint: '/records', params: { total: ${total} }, paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items', limit: ${page}, limitNameInRequest: 'limit' } })) {
        await svc.batchSave(items, 'Record');
      }
    }`),
      'bench',
    );
  const runSync = async (mode: OperationMode, total = records) => {
    const scriptHash = await scriptFor(total);
    const input = {
      definition: {
        environmentId: 'bench',
        integrationId: 'bench-api',
        syncName: `records-${mode}`,
        syncType: 'incremental' as const,
        runsMs: 86_400_000,
        autoStart: true,
        trackDeletes: false,
        models: ['Record'],
        scriptHash,
        webhookSubscriptions: [],
      },
      connectionId: `bench-${randomUUID()}`,
      options: { operationMode: mode },
    };
    // As production runs a scheduled run: inside its sync entity's execution (workflows/manageSync.ts).
    return runEntitySync(bench, input);
  };

  // Raw: the same records, the same batches, one INSERT … ON CONFLICT per batch into an equivalent
  // table, each time for a connection of its own (new rows, as the sync's).
  await bench.pool.query(RAW_TABLE_SQL);
  const rawRun = () =>
    timed(async () => {
      const connection = randomUUID();
      for (let start = 0; start < records; start += page) {
        await rawUpsert(
          bench.pool,
          connection,
          Array.from({ length: Math.min(page, records - start) }, (_, i) => makeRecord(start + i)),
        );
      }
    });
  const pages = Math.ceil(records / page);
  const floorRun = () =>
    timed(() =>
      bench.client.workflow.execute('floorSyncSteps', {
        taskQueue: bench.taskQueue,
        workflowId: `floor-${randomUUID()}`,
        args: [pages],
      }),
    );
  // The machine is shared: the raw side is measured before and after every sync, and each sync is
  // compared with the mean of the two, so load that comes and goes hits both sides of a ratio alike.
  const ratios: number[] = [];
  const ceilings: number[] = [];
  // Warm-up, not measured: the workflow threads, the JIT, the pools (the first run is much slower).
  await runSync('local', Math.min(records, 20 * page));
  await floorRun();
  let rawBefore = await rawRun();
  let local: Awaited<ReturnType<typeof runSync>> | undefined;
  for (let round = 1; round <= rounds; round++) {
    local = await runSync('local');
    const added = local.models['Record']?.added ?? 0;
    if (added !== records) throw new Error(`the sync added ${added} records, expected ${records}`);
    const floor = await floorRun();
    const rawAfter = await rawRun();
    const rawMs = (rawBefore.ms + rawAfter.ms) / 2;
    rawBefore = rawAfter;
    const rawRate = records / (rawMs / 1000);
    const localRate = records / (local.ms / 1000);
    const rawPageMs = rawMs / pages;
    const floorPageMs = floor.ms / pages;
    ratios.push(localRate / rawRate);
    ceilings.push(rawPageMs / (rawPageMs + floorPageMs));
    console.log(`round ${round} (load average ${loadavg()[0]!.toFixed(1)})`);
    console.log(line('raw upsert (pg, one process), mean around it', `${formatCount(rawRate)} records/s`));
    console.log(
      line(
        'sync, svc operations as local activities',
        `${formatCount(localRate)} records/s (${(local.ms / 1000).toFixed(2)} s, ${pages} pages)`,
      ),
    );
    console.log(line('ratio sync / raw', (localRate / rawRate).toFixed(3)));
    console.log(
      line(
        "Temporal's floor: 2 no-op local activities per page",
        `${formatCount(records / (floor.ms / 1000))} records/s (${floorPageMs.toFixed(2)} ms per page)`,
      ),
    );
    // A page costs at least the floor's two steps plus the raw upsert of its records.
    console.log(
      line(
        'ceiling of sync / raw: raw ÷ (raw + floor) per page',
        `${ceilings.at(-1)!.toFixed(3)} (${rawPageMs.toFixed(2)} ms ÷ (${rawPageMs.toFixed(2)} + ${floorPageMs.toFixed(2)}) ms)`,
      ),
    );
  }
  console.log(`median of ${rounds} round(s), pages of ${page}`);
  console.log(line('ratio sync / raw', summarize(ratios).p50.toFixed(3)));
  console.log(line('ceiling raw ÷ (raw + floor)', summarize(ceilings).p50.toFixed(3)));
  const localRate = records / (local!.ms / 1000);

  if (normal) {
    const normalRun = await runSync('normal');
    const normalRate = records / (normalRun.ms / 1000);
    console.log(
      line(
        'sync, svc operations as normal activities',
        `${formatCount(normalRate)} records/s (${(normalRun.ms / 1000).toFixed(2)} s)`,
      ),
    );
    console.log(line('ratio local / normal activities', (localRate / normalRate).toFixed(2)));
  }
} finally {
  await bench.close();
}
