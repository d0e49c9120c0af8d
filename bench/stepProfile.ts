/**
 * Where a sync's durable steps spend their time (issue 17), and what worker and data-converter
 * variants gain, compared in one run. `npx tsx bench/stepProfile.ts [--records N] [--page N]
 * [--bytes N] [--rounds N] [--variants a,b,…]`.
 *
 * The sync of bench/sync.ts (svc.paginate over a fake API on loopback, svc.batchSave per page) run as
 * production runs it: inside its sync entity's execution (`manageSync`, its 4 s workflow task timeout;
 * bench/syncHarness.ts runEntitySync), with the payload codecs of src/main.ts (encryption, then claim
 * check). Records are ~`--bytes` of JSON each.
 *
 * 1. Profile (variant `base`, first round): the per-page breakdown from bench/lib/stepProbe.ts:
 *    time in the worker's main thread per activation and per local activity, Core's time between
 *    them, the workflow thread's time inside the sandbox, the codecs, pg queries by kind, and the
 *    fake API's own time; then the local-activity markers per workflow task completion (count and
 *    bytes, read back from the run's history).
 * 2. Variants, `--rounds` times each, interleaved, each against a raw upsert of the same batches just
 *    before it (ratio = sync records/s ÷ raw records/s): see VARIANTS.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { DataConverter, PayloadCodec } from '@temporalio/common';
import proto from '@temporalio/proto';
import { DefaultLogger } from '@temporalio/worker';
import { Encryptor } from '../src/connections/encryption.js';
import { createEncryptionCodec } from '../src/runtime/payloadStorage.js';
import { connectTemporal } from '../src/temporal/connection.js';
import { cpuDelta, cpuSnapshot, parentOf, type CpuSnapshot } from './lib/cpu.js';
import { installStepProbe, type ProbeReport, type SpanStats } from './lib/stepProbe.js';
import { formatCount, line, nowMs, timed } from './lib/stats.js';
import { RAW_TABLE_SQL, rawUpsert, recordsApi, syntheticRecord } from './lib/syncRecords.js';
import { bundle, RunTimedOut, runEntitySync, startRuntimeBench, type WorkerVariant } from './syncHarness.js';

const { values: flags } = parseArgs({
  options: {
    records: { type: 'string', default: '10000' },
    page: { type: 'string', default: '100' },
    bytes: { type: 'string', default: '100' },
    rounds: { type: 'string', default: '2' },
    variants: { type: 'string', default: 'base' },
    'no-profile': { type: 'boolean', default: false },
    /** The variant whose first round is profiled. */
    'profile-variant': { type: 'string', default: 'base' },
  },
});
const number = (name: string, raw: string | undefined): number => {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`--${name} must be a positive integer, got ${raw}`);
  return n;
};
const records = number('records', flags.records);
const page = number('page', flags.page);
const bytes = number('bytes', flags.bytes);
const rounds = number('rounds', flags.rounds);
if (records > 50_000) throw new Error('--records is capped at 50,000 (issue 17: bounded benchmark runs)');

const probe = installStepProbe();
const encryptor = new Encryptor([randomBytes(32)]);
const encryption = createEncryptionCodec(encryptor);
/** The production converter (src/main.ts): encryption first, then the claim check; each codec timed. */
const production = (standard: DataConverter): DataConverter => ({
  ...standard,
  payloadCodecs: probe.timeCodecs([encryption, ...(standard.payloadCodecs ?? [])], ['encryption', 'claimCheck']),
});
const claimCheckOnly = (standard: DataConverter): DataConverter => ({
  ...standard,
  payloadCodecs: probe.timeCodecs(standard.payloadCodecs ?? [], ['claimCheck']),
});
const noCodecs = (standard: DataConverter): DataConverter => ({ ...standard, payloadCodecs: [] as PayloadCodec[] });
/**
 * The client's: sends plain payloads (so that workers of every variant can read a run's input) and
 * reads encrypted ones (the results of workers that encrypt).
 */
const client = (standard: DataConverter): DataConverter => ({
  ...standard,
  payloadCodecs: [
    { encode: async (payloads) => payloads, decode: (payloads) => encryption.decode(payloads) },
    ...(standard.payloadCodecs ?? []),
  ],
});

interface Variant extends WorkerVariant {
  describe: string;
  /** The script does not await batchSave before fetching the next page (all saves awaited at the end). */
  overlap?: boolean;
  /** Runs this many syncs at once (each of --records); figures are per page of all of them. */
  parallel?: number;
  env?: Record<string, string>;
}

const VARIANTS: Record<string, Variant> = {
  base: {
    describe: 'as production: encryption + claim check, isolate timeout 3 s, 2 threads',
    dataConverter: production,
  },
  'base-again': { describe: 'the same as base, later in each round (shows the noise)', dataConverter: production },
  'isolate-5s': {
    describe: 'isolateExecutionTimeout unset (SDK default 5 s)',
    dataConverter: production,
    tuning: { isolateExecutionTimeout: '5s' } as never,
  },
  'no-vm-timeout': {
    describe: 'no vm timeout at all (no watchdog thread per call)',
    dataConverter: production,
    env: { PROBE_VM_TIMEOUT: 'off' },
  },
  'no-promise-hook': {
    describe: 'no SDK promise hook (a stack trace per workflow promise, for the __stack_trace query)',
    dataConverter: production,
    env: { PROBE_PROMISE_HOOK: 'off' },
  },
  lean: {
    describe: 'no vm timeout, no promise hook, no codecs (what the SDK path costs without them)',
    dataConverter: noCodecs,
    env: { PROBE_VM_TIMEOUT: 'off', PROBE_PROMISE_HOOK: 'off' },
  },
  'lean-overlap': {
    describe: 'lean + overlap',
    dataConverter: noCodecs,
    env: { PROBE_VM_TIMEOUT: 'off', PROBE_PROMISE_HOOK: 'off' },
    overlap: true,
  },
  'no-reuse': { describe: 'reuseV8Context false', dataConverter: production, tuning: { reuseV8Context: false } },
  'threads-1': {
    describe: 'workflowThreadPoolSize 1',
    dataConverter: production,
    tuning: { workflowThreadPoolSize: 1 },
  },
  'no-encryption': { describe: 'claim check only (no encryption codec)', dataConverter: claimCheckOnly },
  'no-codecs': { describe: 'no payload codecs at all', dataConverter: noCodecs },
  'la-slots': {
    describe: 'maxConcurrentLocalActivityExecutions 10, maxCachedWorkflows 10',
    dataConverter: production,
    tuning: { maxConcurrentLocalActivityExecutions: 10, maxCachedWorkflows: 10 },
  },
  'parallel-2': {
    describe: 'two syncs at once on one workflow thread (globals swapped between them)',
    dataConverter: production,
    tuning: { workflowThreadPoolSize: 1 },
    parallel: 2,
  },
  overlap: {
    describe: 'script overlaps batchSave with the next get (not awaited)',
    dataConverter: production,
    overlap: true,
  },
  'overlap-no-codecs': { describe: 'overlap + no codecs', dataConverter: noCodecs, overlap: true },
};
const chosen = (flags.variants ?? 'base').split(',').map((name) => {
  const variant = VARIANTS[name];
  if (!variant) throw new Error(`unknown variant ${name}; known: ${Object.keys(VARIANTS).join(', ')}`);
  return [name, variant] as const;
});

const makeRecord = (n: number) => syntheticRecord(n, bytes);

const api = recordsApi(makeRecord);
let apiMs = 0;
// Core's refusals of a workflow task completion over gRPC's 4 MiB (issue 17): counted, printed once.
let completionsTooLarge = 0;
const logger = new DefaultLogger('WARN', (entry) => {
  const text = `${entry.message} ${JSON.stringify(entry.meta ?? {})}`;
  if (text.includes('larger than max')) {
    if (completionsTooLarge++ > 0) return;
  }
  process.stderr.write(`[${entry.level}] ${text.slice(0, 400)}\n`);
});
const bench = await startRuntimeBench({
  logger,
  api: (request, response) => {
    const started = nowMs();
    api(request, response);
    apiMs += nowMs() - started;
  },
  dataConverter: production,
  clientDataConverter: client,
  // Each activity's body, timed by name.
  activities: timeActivities,
});

function timeActivities(activities: Record<string, unknown>): Record<string, unknown> {
  return probe.timeActivities(activities);
}

const pages = Math.ceil(records / page);
// After each worker restart a short sync warms the new threads' JIT up (not measured).
const warmUpRecords = Math.min(records, 10 * page, 2000);
const paginate = (total: number) =>
  `svc.paginate({ endpoint: '/records', params: { total: ${total} }, paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items', limit: ${page}, limitNameInRequest: 'limit' } })`;
const scriptsFor = async (total: number) => ({
  sequential: await bench.scripts.put(
    bundle(
      `async function (svc) { for await (const items of ${paginate(total)}) { await svc.batchSave(items, 'Record'); } }`,
    ),
    'bench',
  ),
  overlap: await bench.scripts.put(
    bundle(`async function (svc) {
      const saves = [];
      for await (const items of ${paginate(total)}) saves.push(svc.batchSave(items, 'Record'));
      await Promise.all(saves);
    }`),
    'bench',
  ),
});
const scripts = { measured: await scriptsFor(records), warmUp: await scriptsFor(warmUpRecords) };

// Postgres is a daemon (pg_ctl), not a child: its postmaster is the parent of any backend.
const backend = await bench.pool.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
const postmaster = parentOf(backend.rows[0]!.pid);
const cpuRoots: Record<string, number> = postmaster === undefined ? {} : { postgres: postmaster };
await bench.pool.query(RAW_TABLE_SQL);
/** The same records in the same batches, one INSERT … ON CONFLICT per batch, as bench/sync.ts. */
async function rawRate(): Promise<number> {
  const connection = randomUUID();
  const { ms } = await timed(async () => {
    for (let start = 0; start < records; start += page) {
      await rawUpsert(
        bench.pool,
        connection,
        Array.from({ length: Math.min(page, records - start) }, (_, i) => makeRecord(start + i)),
      );
    }
  });
  return records / (ms / 1000);
}

/** A run that has not finished by then is reported stalled (and terminated) instead of awaited forever. */
const STALL_MS = 90_000;

class Stalled extends Error {}
type Execution = { workflowId: string; runId: string };

/** One run, as production runs a scheduled one: inside its sync entity's execution (bench/syncHarness.ts). */
async function runSync(variant: Variant, total = records): Promise<{ rate: number; execution: Execution }> {
  const connectionId = `bench-${randomUUID()}`;
  const script = total === records ? scripts.measured : scripts.warmUp;
  const definition = {
    environmentId: 'bench',
    integrationId: 'bench-api',
    syncName: 'records',
    syncType: 'incremental' as const,
    runsMs: 86_400_000,
    autoStart: true,
    trackDeletes: false,
    models: ['Record'],
    scriptHash: variant.overlap ? script.overlap : script.sequential,
    webhookSubscriptions: [],
  };
  let run: Awaited<ReturnType<typeof runEntitySync>>;
  try {
    run = await runEntitySync(bench, {
      definition,
      connectionId,
      options: { operationMode: 'local' },
      timeoutMs: STALL_MS,
    });
  } catch (error) {
    if (!(error instanceof RunTimedOut)) throw error;
    const timedOut = await workflowTaskTimeouts(error.execution);
    throw new Stalled(
      `stalled: not finished in ${STALL_MS / 1000} s (${timedOut} workflow tasks timed out; ${completionsTooLarge} completions refused as larger than gRPC's 4 MiB so far) — terminated`,
    );
  }
  const added = run.models['Record']?.added ?? 0;
  if (added !== total) throw new Error(`the sync added ${added} records, expected ${total}`);
  return { rate: total / (run.ms / 1000), execution: { workflowId: run.workflowId, runId: run.runId } };
}

// History reads on a connection of their own: one page (one batch of events) of a run's history can
// exceed gRPC's default 4 MiB for a received message.
const historyConnection = await connectTemporal({ address: bench.temporalAddress }, undefined, {
  'grpc.max_receive_message_length': 64 * 1024 * 1024,
});

/** A run's history, page by page. */
async function historyEvents(execution: Execution): Promise<proto.temporal.api.history.v1.IHistoryEvent[]> {
  const events: proto.temporal.api.history.v1.IHistoryEvent[] = [];
  let nextPageToken: Uint8Array | undefined;
  do {
    const response = await historyConnection.workflowService.getWorkflowExecutionHistory({
      namespace: bench.client.options.namespace,
      execution,
      maximumPageSize: 100,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    events.push(...(response.history?.events ?? []));
    nextPageToken = response.nextPageToken?.length ? response.nextPageToken : undefined;
  } while (nextPageToken);
  return events;
}

async function workflowTaskTimeouts(execution: Execution): Promise<number> {
  const { EventType } = proto.temporal.api.enums.v1;
  return (await historyEvents(execution)).filter(
    (event) => event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
  ).length;
}

async function useVariant(variant: Variant): Promise<void> {
  for (const [key, value] of Object.entries({ PROBE_VM_TIMEOUT: 'on', PROBE_PROMISE_HOOK: 'on', ...variant.env }))
    process.env[key] = value;
  await bench.restartWorkers({ ...variant, activities: timeActivities });
  await runSync(variant, warmUpRecords);
}

/** Local-activity markers per workflow task completion, from the run's history. */
async function markersPerCompletion(execution: Execution) {
  const events = await historyEvents(execution);
  const { temporal } = proto;
  const EventType = temporal.api.enums.v1.EventType;
  const completions: { markers: number; bytes: number }[] = [];
  let current = { markers: 0, bytes: 0 };
  let inTask = false;
  for (const event of events) {
    if (event.eventType === EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED) {
      inTask = true;
      current = { markers: 0, bytes: 0 };
      completions.push(current);
    } else if (event.eventType === EventType.EVENT_TYPE_MARKER_RECORDED && inTask) {
      current.markers++;
      current.bytes += temporal.api.history.v1.HistoryEvent.encode(event).finish().length;
    }
  }
  return completions;
}

/** worker process / Temporal / Postgres CPU ms per page. */
function cpuSummary(cpu: CpuSnapshot, pagesRun = pages): string {
  const of = (prefix: string) =>
    [...cpu].filter(([key]) => key.startsWith(prefix)).reduce((sum, [, ms]) => sum + ms, 0);
  const worker = cpu.get('worker process (all threads)') ?? 0;
  const temporalMs = of('child: temporal');
  const postgres = of('postgres');
  return `worker ${(worker / pagesRun).toFixed(1)} + temporal ${(temporalMs / pagesRun).toFixed(1)} + pg ${(postgres / pagesRun).toFixed(1)} = ${((worker + temporalMs + postgres) / pagesRun).toFixed(1)}`;
}

function printCpu(cpu: CpuSnapshot): void {
  console.log('  CPU ms per page (user + system, /proc):');
  for (const [key, ms] of [...cpu].filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1])) {
    console.log(`  ${(ms / pages).toFixed(2).padStart(7)}  ${key}`);
  }
}
function printProfile(report: ProbeReport, syncRate: number): void {
  const perPage = (ms: number) => (ms / pages).toFixed(2).padStart(7);
  const pageMs = (records / syncRate / pages) * 1000;
  console.log(`\nper page of ${page} (2 steps: svc.get + svc.batchSave), ms; whole page ${pageMs.toFixed(2)} ms`);
  // The step cycle from Core's events: activation in the worker, Core to the LA, LA in the worker, Core back.
  const gaps = new Map<string, SpanStats>();
  const addGap = (name: string, ms: number) => {
    const gap = gaps.get(name) ?? { count: 0, totalMs: 0 };
    gap.count++;
    gap.totalMs += ms;
    gaps.set(name, gap);
  };
  const events = report.events;
  for (let i = 1; i < events.length; i++) {
    const [previous, event] = [events[i - 1]!, events[i]!];
    const pair = `${previous.name} ⇒ ${event.name}`;
    addGap(pair, event.at - previous.at);
  }
  console.log('  step cycle (main thread events, consecutive pairs):');
  for (const [name, gap] of [...gaps].sort((a, b) => b[1].totalMs - a[1].totalMs)) {
    console.log(`  ${perPage(gap.totalMs)}  ${name} (n=${gap.count}, mean ${(gap.totalMs / gap.count).toFixed(3)} ms)`);
  }
  console.log('  main-thread spans:');
  for (const [name, span] of Object.entries(report.spans).sort((a, b) => b[1].totalMs - a[1].totalMs)) {
    console.log(
      `  ${perPage(span.totalMs)}  ${name} (n=${span.count}, mean ${(span.totalMs / span.count).toFixed(3)} ms)`,
    );
  }
  console.log(`  ${perPage(apiMs)}  fake API handler (server side, in this process)`);
  for (const [thread, spans] of Object.entries(report.threads)) {
    const entries = Object.entries(spans).sort((a, b) => b[1].totalMs - a[1].totalMs);
    if (entries.length === 0) continue;
    console.log(`  workflow ${thread}:`);
    for (const [name, span] of entries) {
      console.log(
        `  ${perPage(span.totalMs)}  ${name} (n=${span.count}, mean ${(span.totalMs / span.count).toFixed(3)} ms)`,
      );
    }
  }
}

/** The figures of one run, per page (ms), for the variants table. */
function pageMetrics(
  report: ProbeReport,
  rate: number,
  raw: number,
  cpu: CpuSnapshot,
  pagesRun: number,
): Record<string, number> {
  const gap = (from: string, to: string) => {
    let total = 0;
    for (let i = 1; i < report.events.length; i++) {
      if (report.events[i - 1]!.name === from && report.events[i]!.name === to) {
        total += report.events[i]!.at - report.events[i - 1]!.at;
      }
    }
    return total / pagesRun;
  };
  const spans = (prefix: string) =>
    Object.entries(report.spans)
      .filter(([name]) => name.startsWith(prefix))
      .reduce((sum, [, span]) => sum + span.totalMs, 0) / pagesRun;
  const threadSpans = (prefix: string) =>
    Object.values(report.threads)
      .flatMap((threadSpans) => Object.entries(threadSpans))
      .filter(([name]) => name.startsWith(prefix))
      .reduce((sum, [, span]) => sum + span.totalMs, 0) / pagesRun;
  const cpuOf = (prefix: string) =>
    [...cpu].filter(([key]) => key.startsWith(prefix)).reduce((sum, [, ms]) => sum + ms, 0) / pagesRun;
  return {
    ratio: rate / raw,
    'rec/s': rate,
    page: (records / rate / pagesRun) * 1000,
    activation: gap('core→activation', 'activation completion→core'),
    'thread rt': spans('activation: thread round trip'),
    'in vm': threadSpans('vm.all calls'),
    LA: gap('core→activity task', 'activity completion→core'),
    'LA body': spans('activity body'),
    codecs: spans('codec.'),
    'core→LA': gap('activation completion→core', 'core→activity task'),
    'core→act': gap('activity completion→core', 'core→activation'),
    'cpu wkr': cpuOf('worker process (all'),
    'cpu wf thr': cpuOf('worker process: workflow'),
    'cpu pg': cpuOf('postgres'),
    'cpu tmprl': cpuOf('child: temporal'),
  };
}

try {
  console.log(
    `step profile: ${formatCount(records)} records of ~${bytes} bytes, pages of ${page}, ${rounds} round(s)\n  (${bench.versions})`,
  );
  const results = new Map<string, Record<string, number>[]>();
  for (let round = 0; round < rounds; round++) {
    for (const [name, variant] of chosen) {
      try {
        await useVariant(variant);
      } catch (error) {
        if (!(error instanceof Stalled)) throw error;
        console.log(line(`${name} round ${round + 1}`, `warm-up ${error.message}`));
        continue;
      }
      const profile = round === 0 && name === flags['profile-variant'] && !flags['no-profile'];
      const raw = await rawRate();
      const workflowThreads = new Set((await probe.report()).osThreadIds);
      probe.reset();
      apiMs = 0;
      const cpuBefore = cpuSnapshot(workflowThreads, cpuRoots);
      const windowStart = nowMs();
      const copies = variant.parallel ?? 1;
      let runs: Awaited<ReturnType<typeof runSync>>[];
      try {
        runs = await Promise.all(Array.from({ length: copies }, () => runSync(variant)));
      } catch (error) {
        if (!(error instanceof Stalled)) throw error;
        console.log(line(`${name} round ${round + 1}`, error.message));
        continue;
      }
      const rate = (copies * records) / ((nowMs() - windowStart) / 1000);
      const execution = runs[0]!.execution;
      // For --cpu-prof: the measured window on the monotonic clock the profiles use (µs).
      if (profile)
        console.log(`  measured window (hrtime µs): ${Math.round(windowStart * 1000)}–${Math.round(nowMs() * 1000)}`);
      const cpu = cpuDelta(cpuBefore, cpuSnapshot(workflowThreads, cpuRoots));
      const report = await probe.report();
      if (profile) {
        printProfile(report, rate);
        printCpu(cpu);
        const completions = await markersPerCompletion(execution);
        const withMarkers = completions.filter((c) => c.markers > 0);
        const maxBytes = Math.max(0, ...withMarkers.map((c) => c.bytes));
        const maxMarkers = Math.max(0, ...withMarkers.map((c) => c.markers));
        console.log(
          `  markers per workflow task completion: ${withMarkers.length} completions with markers, ` +
            `max ${maxMarkers} markers / ${formatCount(maxBytes / 1024)} KiB, mean ${(withMarkers.reduce((s, c) => s + c.markers, 0) / Math.max(1, withMarkers.length)).toFixed(0)} markers / ${formatCount(withMarkers.reduce((s, c) => s + c.bytes, 0) / Math.max(1, withMarkers.length) / 1024)} KiB\n`,
        );
      }
      const metrics = pageMetrics(report, rate, raw, cpu, pages * copies);
      results.set(name, [...(results.get(name) ?? []), metrics]);
      console.log(
        line(
          `${name} round ${round + 1}`,
          `${formatCount(rate)} records/s, ratio ${(rate / raw).toFixed(3)} (raw ${formatCount(raw)}/s), CPU ms/page ${cpuSummary(cpu, pages * copies)}`,
        ),
      );
    }
  }
  console.log(`\nvariants, mean over ${rounds} round(s); ms per page of ${page} unless named otherwise:`);
  const columns = Object.keys(results.values().next().value?.[0] ?? {});
  console.log(`  ${'variant'.padEnd(18)}${columns.map((c) => c.padStart(10)).join('')}`);
  for (const [name] of chosen) {
    const list = results.get(name);
    if (!list) {
      console.log(`  ${name.padEnd(18)}stalled in every round`);
      continue;
    }
    const cells = columns.map((column) => {
      const value = list.reduce((sum, metrics) => sum + (metrics[column] ?? 0), 0) / list.length;
      return (
        column === 'ratio' ? value.toFixed(3) : column === 'rec/s' ? formatCount(value) : value.toFixed(2)
      ).padStart(10);
    });
    console.log(`  ${name.padEnd(18)}${cells.join('')}`);
  }
  for (const [name, variant] of chosen) console.log(`  ${name}: ${variant.describe}`);
} finally {
  await historyConnection.close();
  await bench.close();
}
