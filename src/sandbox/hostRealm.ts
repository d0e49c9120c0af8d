/**
 * The workflow-thread side of the script sandbox (src/sandbox/sdkInternals.ts lists the SDK internals it
 * relies on). Bundled into the workflow code: it imports no Node module; it reaches the worker thread's
 * own realm at run time instead.
 *
 * The workflow sandbox is a `vm` context, and a few of its globals (URL, TextEncoder, assert, console)
 * are objects of the worker thread's own realm: from any of them, `.constructor` leads to that realm's
 * `Function`, and `Function('return process')()` to the process. `hostRealm()` closes that door once
 * per thread, before any script runs, by replacing the `constructor` of that realm's function
 * prototypes. It keeps for the runtime what it needs of that realm: a real clock, a fresh V8 context
 * per run (workflows/scriptRealm.ts), and a slot that says which run the thread is executing (read
 * after the worker died, src/temporal/scriptThreads.ts).
 *
 * Interface: `hostRealm()` (the thread's facilities, `HostRealm`) and `ScriptContext` (one run's realm).
 * `hostSetup` is exported for the contract test only.
 */
import { THREAD_MARK_BYTES, THREAD_MARKS_DATA_KEY } from '../runtime/definitions.js';
import { ACTIVATOR_SOURCE, VM_SHARED_MODULE } from './sdkInternals.js';

/** A script's own realm (workflows/scriptRealm.ts): a fresh V8 context that cannot compile code. */
export interface ScriptContext {
  /** Compiles and runs source in the realm, within a time limit (the bootstrap and the bundle's factory). */
  evaluate(source: string, filename: string, timeoutMs: number): unknown;
  /** Runs the realm's pending microtasks (the script's continuations) within a time limit. */
  drain(timeoutMs: number): void;
}

export interface HostRealm {
  /** A monotonic real clock in milliseconds (the sandbox's Date is the workflow's deterministic time). */
  now(): number;
  /** Marks the run whose script this thread is executing; '' when none. */
  mark(workflowId: string): void;
  /** A new realm for one run's script. */
  newScriptContext(): ScriptContext;
  /**
   * Tells the thread which promises are the workflow code's (the SDK attributes their unhandled
   * rejections to a run); any other promise's unhandled rejection, a script's, is dropped instead of
   * killing the thread.
   */
  trustPromises(prototype: object): void;
}

let host: HostRealm | undefined;
// The thread's facilities hang off its realm's Function.prototype under this registered symbol.
const REALM_KEY = 'integration-service.hostRealm';

/**
 * The worker thread's realm, sealed. Runs its setup in that realm (through a function constructor
 * reached from a host object) exactly once per thread; later calls and later sandboxes of the same
 * thread get the same facilities.
 */
export function hostRealm(): HostRealm {
  if (host) return host;
  const hostFunctionPrototype = Object.getPrototypeOf(URL) as Record<symbol, HostRealm | undefined> & {
    constructor: (source: string) => () => typeof hostSetup;
  };
  if ((hostFunctionPrototype as object) === Function.prototype) {
    throw new Error('expected the sandbox URL class to come from the worker thread realm');
  }
  // A thread already sealed (by the sandbox of another run, without reuseV8Context) kept its
  // facilities on that prototype; otherwise its function constructor is still there to run the setup.
  host = hostFunctionPrototype[Symbol.for(REALM_KEY)];
  if (!host) {
    const setup = hostFunctionPrototype.constructor(`return (${hostSetup.toString()})`)();
    host = setup({
      marksKey: THREAD_MARKS_DATA_KEY,
      markBytes: THREAD_MARK_BYTES,
      realmKey: REALM_KEY,
      vmShared: VM_SHARED_MODULE.source,
      activatorSource: ACTIVATOR_SOURCE,
    });
  }
  host.trustPromises(Promise.prototype);
  return host;
}

/** What hostSetup is told (plain strings and numbers: it runs in another realm). */
export interface HostSetupOptions {
  /** The worker_threads environment data key of the thread marks (src/sandbox/workerSide.ts). */
  marksKey: string;
  markBytes: number;
  /** The registered symbol the thread's facilities hang off. */
  realmKey: string;
  /** VM_SHARED_MODULE's source. */
  vmShared: string;
  /** ACTIVATOR_SOURCE. */
  activatorSource: string;
}

/**
 * Evaluated in the worker thread's realm (it is turned into source and compiled there): must not
 * close over anything of the sandbox. Exported for src/sandbox/sdkContract.test.ts.
 */
export function hostSetup(options: HostSetupOptions): HostRealm {
  const { marksKey, markBytes, realmKey: key, activatorSource } = options;
  /* eslint-disable */
  const g = globalThis as any;
  const proc = g.process;
  const hrtime = proc.hrtime.bigint;
  // The slot is a file of fixed size, rewritten in place: it outlives a process that V8 aborts. It
  // names the run executing now and the run whose last stretch of script grew the heap the most:
  // memory runs out at whatever allocation comes last, often in another run or in the SDK, while
  // the run that filled the heap is the one that allocated most.
  // The folder and this process's file prefix, set by the worker process before its threads started.
  const { threadId, getEnvironmentData } = proc.getBuiltinModule('node:worker_threads');
  const marks = getEnvironmentData(marksKey) as { dir?: unknown; owner?: unknown } | undefined;
  const dir = typeof marks?.dir === 'string' ? marks.dir : '';
  let write = (_text: string) => {};
  if (dir) {
    const fs = proc.getBuiltinModule('node:fs');
    const record = g.Buffer.alloc(markBytes);
    try {
      const owner = typeof marks?.owner === 'string' && marks.owner ? marks.owner : `${proc.pid}-0`;
      const fd = fs.openSync(`${dir}/${owner}-${threadId}`, 'w');
      write = (text: string) => {
        record.fill(0x20);
        record.write(text, 0, markBytes - 1, 'utf8');
        fs.writeSync(fd, record, 0, markBytes, 0);
      };
      write('');
    } catch (error) {
      // Without its file the thread runs scripts all the same; only the blame for a death is lost.
      console.warn(`[worker] thread marks disabled: ${(error as Error).message}`);
    }
  }
  const v8 = proc.getBuiltinModule('node:v8');
  const vm = proc.getBuiltinModule('node:vm');
  const heapUsed = () => v8.getHeapStatistics().used_heap_size as number;
  const drainSource = new vm.Script('undefined', { filename: 'script-drain' });
  // Compiled code, once per thread: the realm's bootstrap (the same text every run) and the last
  // scripts. A vm.Script is code only, bound to no context (V8's unbound script): each run still
  // evaluates it in its own fresh context, which creates every object, closure and global anew; what
  // is shared is the bytecode, which no script can reach or change. Saves the per-run compile
  // (docs/operations.md "Where a worker's CPU goes per run"). A few entries, the oldest dropped first.
  const compiled = new Map<string, unknown>();
  const COMPILED_MAX = 16;
  const compile = (source: string, filename: string) => {
    const key = `${filename}\u0000${source}`;
    let script = compiled.get(key);
    if (script) {
      compiled.delete(key);
    } else {
      script = new vm.Script(source, { filename });
      if (compiled.size >= COMPILED_MAX) compiled.delete(compiled.keys().next().value as string);
    }
    compiled.set(key, script);
    return script as { runInContext: (context: unknown, options: object) => unknown };
  };
  // A context of its own per run: no code generation from strings (eval, Function), its own
  // microtask queue (drained only when the run says so, inside the run's activation). The sandbox
  // object has no prototype: a global the script looks up and misses must not reach this realm's
  // Object.prototype (the classic `this.constructor.constructor` route out of a vm context).
  const newScriptContext = () => {
    const context = vm.createContext(Object.create(null), {
      name: 'script',
      microtaskMode: 'afterEvaluate',
      codeGeneration: { strings: false, wasm: false },
    });
    return Object.freeze({
      evaluate: (source: string, filename: string, timeoutMs: number) =>
        compile(String(source), String(filename)).runInContext(
          context,
          timeoutMs > 0 ? { timeout: timeoutMs, displayErrors: false } : { displayErrors: false },
        ),
      drain: (timeoutMs: number) => {
        drainSource.runInContext(
          context,
          timeoutMs > 0 ? { timeout: timeoutMs, displayErrors: false } : { displayErrors: false },
        );
      },
    });
  };
  // The SDK's promise hook (stack traces for the workflow's __stack_trace query) runs for every promise
  // of the isolate, a script realm's included, and calls `promise.constructor.constructor(source)`:
  // in a realm that cannot compile code that throws, and a script can make it throw on purpose (a
  // constructor getter), and a throw in a promise hook kills the thread. So it is stopped; the query
  // loses its promise chains. The hook lives in the SDK's vm-shared module, found in the thread's
  // module cache (test/runtime/sandbox.test.ts fails when an SDK upgrade moves it).
  const vmShared = new RegExp(options.vmShared);
  const moduleCache = (proc.getBuiltinModule('node:module') as { _cache: Record<string, { exports?: any }> })._cache;
  let hookStopped = false;
  for (const file of Object.keys(moduleCache)) {
    if (!vmShared.test(file)) continue;
    const handlers = moduleCache[file]?.exports?.globalHandlers;
    if (handlers && typeof handlers.stopPromiseHook === 'function') {
      handlers.stopPromiseHook();
      handlers.stopPromiseHook = () => undefined;
      handlers.promiseHookInstalled = false;
      hookStopped = true;
    }
  }
  if (!hookStopped) {
    throw new Error(
      "the Temporal SDK's workflow promise hook was not found (vm-shared.js globalHandlers): scripts cannot run " +
        'safely on this SDK version (src/sandbox/sdkInternals.ts VM_SHARED_MODULE; docs/architecture.md "Threat model")',
    );
  }
  // The SDK's listener attributes an unhandled rejection to the workflow whose realm made the promise
  // and kills the thread when it cannot. A script's promise belongs to no workflow realm (and its
  // constructor is the script's to forge), so only the workflow realms' own promises, and this realm's,
  // reach the SDK's listener; a script's unhandled rejection is dropped, as a browser would log it.
  const trusted = new WeakSet<object>([(Promise as { prototype: object }).prototype]);
  const sdkListeners = proc.listeners('unhandledRejection');
  proc.removeAllListeners('unhandledRejection');
  proc.on('unhandledRejection', (reason: unknown, promise: object) => {
    const prototype = Object.getPrototypeOf(promise);
    if (prototype === null || !trusted.has(prototype)) return;
    for (const listener of sdkListeners) listener.call(proc, reason, promise);
  });
  let current = '';
  let heapAtResume = 0;
  let heaviest = { workflowId: '', grew: 0 };
  const realm = Object.freeze({
    newScriptContext,
    trustPromises: (prototype: object) => {
      trusted.add(prototype);
    },
    now: () => Number(hrtime()) / 1e6,
    mark: (id: string) => {
      // One line of a plain id: a script calling this cannot write a line of its own.
      const workflowId = String(id)
        .replace(/[\r\n]/g, ' ')
        .slice(0, (markBytes >> 1) - 32);
      if (workflowId === current) return;
      if (current) {
        // Heap growth between this run's resume and now: what its stretch of script allocated
        // (less what a collection freed meanwhile). The record decays, so that an old peak does not
        // stay blamed forever.
        const grew = heapUsed() - heapAtResume;
        if (grew > heaviest.grew * 0.99) heaviest = { workflowId: current, grew };
        else heaviest.grew *= 0.99;
      }
      current = workflowId;
      if (workflowId) heapAtResume = heapUsed();
      write(`${workflowId}\n${heaviest.workflowId}\n${Math.round(heaviest.grew)}`);
    },
  });
  // Reachable by scripts too (they can read a prototype): the clock is harmless, and a script that
  // marks another run can only mislead the blame for a death that it causes itself.
  Object.defineProperty(Function.prototype, Symbol.for(key), { value: realm });
  // Seal: no function constructor of this realm is reachable from a function of it any more. The one
  // source the SDK itself compiles this way (vm-shared.js getActivator, on every promise it tracks for
  // stack traces) is still answered, with a function compiled once; it reads a global of the sandbox
  // and yields nothing outside one.
  const activator = Function(activatorSource);
  const blocked = {
    Function(...args: unknown[]) {
      if (args.length === 1 && args[0] === activatorSource) return activator;
      throw new EvalError('scripts cannot compile code of the worker: use svc for everything outside the script');
    },
  }.Function;
  const prototypes = [
    Function.prototype,
    Object.getPrototypeOf(async function () {}),
    Object.getPrototypeOf(function* () {}),
    Object.getPrototypeOf(async function* () {}),
  ];
  for (const prototype of prototypes) {
    Object.defineProperty(prototype, 'constructor', { value: blocked, writable: false, configurable: false });
  }
  // What a script can reach of this realm (through the sandbox's URL, TextEncoder, assert, console,
  // AbortController and the errors they throw) must not let it plant a getter that this realm's code
  // later calls with `process` (a prototype-pollution gadget), or an Error.prepareStackTrace that
  // sees other runs' frames. Host timers are refused: their callbacks would run outside any
  // activation, where no timeout interrupts them.
  const refuse = {
    timeout() {
      throw new EvalError('AbortSignal.timeout is not available to scripts: use svc');
    },
  }.timeout;
  const signal = g.AbortSignal;
  for (const name of ['timeout', 'any']) {
    if (typeof signal?.[name] === 'function') {
      Object.defineProperty(signal, name, { value: refuse, writable: false, configurable: false });
    }
  }
  const ErrorClass = g.Error;
  Object.defineProperty(ErrorClass, 'prepareStackTrace', {
    value: ErrorClass.prepareStackTrace,
    writable: false,
    configurable: false,
  });
  // A getter planted on Object.prototype is the usual gadget: the realm's code reads options and
  // settings objects through it. Only that prototype is frozen: freezing the others too (Error,
  // Array, Promise, the function prototypes, the injected classes) broke the SDK's replay of a
  // recorded history in this realm (measured: test/runtime/crash.test.ts).
  Object.freeze(Object.prototype);

  return realm;
  /* eslint-enable */
}
