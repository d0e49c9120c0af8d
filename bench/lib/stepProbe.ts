/**
 * Where a durable step's time goes (issue 17): timing probes on the TS SDK worker's step path,
 * installed by monkey-patching the SDK's classes in this process before the Workers are created. The
 * SDK itself is not changed. What it measures, per span (count, total ms):
 *
 * - main thread: Core's poll and complete calls (as events, so the time Core takes between two of
 *   them is known), the worker's handling of one activation (codec decode, the round trip to the
 *   workflow thread, codec encode, the sink-call round trip), an activity's run (argument decode is
 *   before it, result encode inside it), and every pg query by kind;
 * - workflow threads (THREAD_PROBE, evaluated first in each thread): each request the thread
 *   handles, and each call into the sandbox (`vm` runInContext) by SDK function, with or without the
 *   timeout (node spawns a watchdog thread per timed call), and whether the call swapped the
 *   sandbox's globals to another workflow (reuseV8Context). `PROBE_VM_TIMEOUT=off` drops the timeout
 *   of those calls, to measure what the watchdog costs.
 *
 * Tied to the SDK's internals of 1.24 (file paths, method names): a later SDK may need changes here.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import workerThreads from 'node:worker_threads';
import type { PayloadCodec } from '@temporalio/common';
import { nowMs } from './stats.js';

const require = createRequire(import.meta.url);
const sdkLib = dirname(require.resolve('@temporalio/worker'));
// The SDK's internals, untyped: classes whose prototype methods are wrapped.
type Method = (...args: unknown[]) => unknown;
type Internal = Record<string, { prototype: Record<string, Method> }>;
const sdk = (path: string) => require(join(sdkLib, path)) as Internal;

export interface SpanStats {
  count: number;
  totalMs: number;
}

export interface ProbeReport {
  spans: Record<string, SpanStats>;
  /** Main-thread events in order: Core's answers and calls. */
  events: { name: string; at: number }[];
  /** Per workflow thread: spans as above, measured inside the thread. */
  threads: Record<string, Record<string, SpanStats>>;
  /** The workflow threads' ids in the operating system (for their CPU time in /proc). */
  osThreadIds: number[];
}

export interface StepProbe {
  reset(): void;
  span<T>(name: string, work: () => Promise<T>): Promise<T>;
  add(name: string, ms: number): void;
  /** Wraps each activity so that its body is timed as `activity body: <name>`. */
  timeActivities(activities: Record<string, unknown>): Record<string, unknown>;
  /** Wraps each codec so that its encode and decode are timed as `codec.<label>.encode|decode`. */
  timeCodecs(codecs: PayloadCodec[], labels: string[]): PayloadCodec[];
  report(): Promise<ProbeReport>;
}

const CHANNEL = 'integration-service.step-probe';

/**
 * Evaluated first in every workflow thread (a worker_threads Worker created with eval), with
 * `threadScript` the path of the SDK's thread script. `PROBE_PROMISE_HOOK=off` keeps the SDK from
 * installing its promise hook (which records a stack trace per workflow promise, for the
 * `__stack_trace` query), to measure what it costs.
 */
const THREAD_PROBE = String.raw`
((threadScript) => {
  const vm = require('node:vm');
  if (process.env.PROBE_PROMISE_HOOK === 'off') {
    const shared = require(require('node:path').join(require('node:path').dirname(threadScript), 'vm-shared.js'));
    shared.globalHandlers.setPromiseHook = () => {};
  }
  const { parentPort, threadId, BroadcastChannel } = require('node:worker_threads');
  const now = () => Number(process.hrtime.bigint()) / 1e6;
  const noTimeout = process.env.PROBE_VM_TIMEOUT === 'off';
  let osTid = 0;
  try {
    osTid = Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop());
  } catch {}
  let spans = {};
  const add = (name, ms) => {
    const span = spans[name] || (spans[name] = { count: 0, totalMs: 0 });
    span.count++;
    span.totalMs += ms;
  };
  const holders = new WeakMap();
  const original = vm.Script.prototype.runInContext;
  vm.Script.prototype.runInContext = function (context, options) {
    let label = 'vm.other';
    const args = context && context.__temporal_args;
    if (Array.isArray(args)) {
      const [holder, fn] = args;
      const swapped = holders.get(context) !== undefined && holders.get(context) !== holder;
      holders.set(context, holder);
      label = 'vm.' + String(fn) + (swapped ? ' (globals swapped)' : '');
    }
    const timed = options && options.timeout !== undefined;
    if (noTimeout && timed) {
      options = { ...options };
      delete options.timeout;
    }
    const started = now();
    try {
      return original.call(this, context, options);
    } finally {
      const ms = now() - started;
      add(label, ms);
      add(timed && !noTimeout ? 'vm.all calls (with timeout)' : 'vm.all calls (no timeout)', ms);
    }
  };
  const received = new Map();
  const on = parentPort.on.bind(parentPort);
  parentPort.on = (event, handler) => {
    if (event !== 'message') return on(event, handler);
    return on(event, (request) => {
      if (request && request.requestId !== undefined) {
        received.set(request.requestId, { at: now(), type: request.input && request.input.type });
      }
      return handler(request);
    });
  };
  const post = parentPort.postMessage.bind(parentPort);
  parentPort.postMessage = (message, transfer) => {
    const request = message && received.get(message.requestId);
    if (request) {
      received.delete(message.requestId);
      add('thread.' + request.type, now() - request.at);
    }
    return post(message, transfer);
  };
  const channel = new BroadcastChannel(${JSON.stringify(CHANNEL)});
  channel.unref();
  channel.onmessage = ({ data }) => {
    if (data === 'reset') spans = {};
    if (data === 'report') channel.postMessage({ threadId, osTid, spans });
  };
})`;

export function installStepProbe(): StepProbe {
  let spans = new Map<string, SpanStats>();
  let events: { name: string; at: number }[] = [];
  const add = (name: string, ms: number) => {
    const span = spans.get(name) ?? { count: 0, totalMs: 0 };
    span.count++;
    span.totalMs += ms;
    spans.set(name, span);
  };
  const event = (name: string) => events.push({ name, at: nowMs() });
  async function span<T>(name: string, work: () => Promise<T>): Promise<T> {
    const started = nowMs();
    try {
      return await work();
    } finally {
      add(name, nowMs() - started);
    }
  }
  const wrapAsync = (owner: Record<string, Method>, method: string, name: string) => {
    const original = owner[method] as (...args: unknown[]) => Promise<unknown>;
    owner[method] = function (this: unknown, ...args: unknown[]) {
      return span(name, () => original.apply(this, args));
    };
  };

  // Core: the four calls of the step path, as events (the gaps between them are Core's time).
  const { native } = require('@temporalio/core-bridge') as { native: Record<string, Method> };
  const coreCalls: Record<string, string> = {
    workerPollWorkflowActivation: 'core→activation',
    workerPollActivityTask: 'core→activity task',
    workerCompleteWorkflowActivation: 'activation completion→core',
    workerCompleteActivityTask: 'activity completion→core',
  };
  for (const [fn, name] of Object.entries(coreCalls)) {
    const original = native[fn]!;
    const isPoll = fn.startsWith('workerPoll');
    native[fn] = (...args: unknown[]) => {
      if (!isPoll) event(name);
      const started = nowMs();
      const result = original(...args) as Promise<unknown>;
      return result.then((value) => {
        if (isPoll) event(name);
        else add(`core call: ${name}`, nowMs() - started);
        return value;
      });
    };
  }

  const { Worker } = sdk('worker.js');
  wrapAsync(Worker!.prototype, 'handleActivation', 'activation: total');
  const { WorkflowCodecRunner } = sdk('workflow-codec-runner.js');
  wrapAsync(WorkflowCodecRunner!.prototype, 'decodeActivation', 'activation: codec decode');
  wrapAsync(WorkflowCodecRunner!.prototype, 'encodeCompletion', 'activation: codec encode');
  const { VMWorkflowThreadProxy } = sdk('workflow/threaded-vm.js');
  wrapAsync(VMWorkflowThreadProxy!.prototype, 'activate', 'activation: thread round trip (activate)');
  wrapAsync(VMWorkflowThreadProxy!.prototype, 'getAndResetSinkCalls', 'activation: thread round trip (sink calls)');
  const { Activity } = sdk('activity.js');
  wrapAsync(Activity!.prototype, 'run', 'activity: run (body + result encode)');

  // pg: every query by its first words (the ledger, the store's statements, the claim check).
  const pgClient = (require('pg') as Internal)['Client']!.prototype;
  const query = pgClient['query']!;
  pgClient['query'] = function (this: unknown, ...args: unknown[]) {
    const config = args[0] as { text?: string } | string;
    const text = typeof config === 'string' ? config : config?.text;
    if (typeof text !== 'string') return query.apply(this, args);
    const label = `pg: ${sqlLabel(text)}`;
    const started = nowMs();
    const done = () => add(label, nowMs() - started);
    // The pool's own query() passes a callback; a client's awaits a promise.
    const callback = args[args.length - 1];
    if (typeof callback === 'function') {
      args[args.length - 1] = (...results: unknown[]) => {
        done();
        return (callback as (...r: unknown[]) => unknown)(...results);
      };
      return query.apply(this, args);
    }
    const result = query.apply(this, args);
    // A submittable (COPY FROM STDIN) is a stream: done when it finishes.
    const stream = result as { once?: (event: string, listener: () => void) => void } | undefined;
    if (result === config && typeof stream?.once === 'function') {
      stream.once('finish', done);
      return result;
    }
    if (typeof (result as Promise<unknown>)?.then !== 'function') return result;
    return (result as Promise<unknown>).then(
      (value) => {
        done();
        return value;
      },
      (error: unknown) => {
        done();
        throw error;
      },
    );
  };

  // Workflow threads: each evaluates THREAD_PROBE before the SDK's thread script.
  const OriginalWorker = workerThreads.Worker;
  const Patched = function (filename: string | URL, options?: workerThreads.WorkerOptions) {
    if (typeof filename === 'string' && filename.endsWith('workflow-worker-thread.js')) {
      const script = JSON.stringify(filename);
      return new OriginalWorker(`${THREAD_PROBE}(${script});\nrequire(${script});`, { ...options, eval: true });
    }
    return new OriginalWorker(filename, options);
  } as unknown as typeof workerThreads.Worker;
  (workerThreads as { Worker: typeof workerThreads.Worker }).Worker = Patched;

  const channel = new BroadcastChannel(CHANNEL);
  channel.unref();

  return {
    reset() {
      spans = new Map();
      events = [];
      channel.postMessage('reset');
    },
    span,
    add,
    timeActivities(activities) {
      return Object.fromEntries(
        Object.entries(activities).map(([name, fn]) => [
          name,
          typeof fn === 'function'
            ? (...args: unknown[]) =>
                span(`activity body: ${name}`, () => (fn as (...a: unknown[]) => Promise<unknown>)(...args))
            : fn,
        ]),
      );
    },
    timeCodecs(codecs, labels) {
      return codecs.map((codec, index) => ({
        encode: (payloads) => span(`codec.${labels[index]}.encode`, () => codec.encode(payloads)),
        decode: (payloads) => span(`codec.${labels[index]}.decode`, () => codec.decode(payloads)),
      }));
    },
    async report() {
      const threads: ProbeReport['threads'] = {};
      const osThreadIds: number[] = [];
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 500);
        channel.onmessage = (message) => {
          const {
            threadId,
            osTid,
            spans: threadSpans,
          } = (message as MessageEvent).data as {
            threadId: number;
            osTid: number;
            spans: Record<string, SpanStats>;
          };
          threads[`thread ${threadId}`] = threadSpans;
          osThreadIds.push(osTid);
          if (Object.keys(threads).length >= 4) {
            clearTimeout(timer);
            resolve();
          }
        };
        channel.postMessage('report');
      });
      return { spans: Object.fromEntries(spans), events: [...events], threads, osThreadIds };
    },
  };
}

/** A query's kind: its first words. */
function sqlLabel(text: string): string {
  return text.replace(/\s+/g, ' ').trim().slice(0, 56);
}
