/**
 * Every fact about the Temporal SDK's internals that the script sandbox relies on, in one place
 * (docs/architecture.md "Runaway scripts", "Threat model"). None of them is public API: an SDK upgrade
 * may change any, and src/sandbox/sdkContract.test.ts checks each against the installed SDK and names
 * the entry below and the file to update when one no longer holds.
 *
 * The sandbox module (src/sandbox/) is the only code that touches these internals:
 * - src/sandbox/hostRealm.ts: the workflow-thread side, bundled into the workflow code (no Node imports);
 * - src/sandbox/workerSide.ts: the worker-process side (Worker options, how a Worker failure or a
 *   workflow task failure is recognised, what the workflow threads are told before they start).
 *
 * This file imports nothing: it is read by both sides and by the contract test.
 */

/**
 * The SDK version these facts were checked against. package.json pins every `@temporalio/*` package
 * to exactly this version; the contract test fails when the installed one differs, so an upgrade
 * starts by rerunning it and updating this file.
 */
export const SDK_VERSION = '1.24.0';

/** The `@temporalio/*` packages the service depends on, all pinned to SDK_VERSION. */
export const SDK_PACKAGES = ['activity', 'client', 'common', 'testing', 'worker', 'workflow'] as const;

/**
 * The SDK module of the workflow threads that owns the promise hook and the unhandled-rejection
 * listener (`@temporalio/worker/lib/workflow/vm-shared.js`), matched against the thread's module cache.
 * Its export `globalHandlers` has `stopPromiseHook()` and `promiseHookInstalled`: the sandbox stops the
 * hook (it calls `promise.constructor.constructor(source)` on every promise of the isolate, a script
 * realm's included, and a throw there kills the thread).
 */
export const VM_SHARED_MODULE = /[\\/]@temporalio[\\/]worker[\\/]lib[\\/]workflow[\\/]vm-shared\.js$/;

/**
 * The one source the SDK compiles through a promise's function constructor (vm-shared.js
 * `getActivator`, called by its unhandled-rejection listener): the sandbox's sealed function
 * constructor still answers exactly this source, with a function compiled once.
 */
export const ACTIVATOR_SOURCE = 'return globalThis.__TEMPORAL_ACTIVATOR__';

/**
 * The Worker option that bounds one activation of a workflow (the isolate execution timeout). Read by
 * `Worker.create` (worker-options.js, default 5 s) and passed to the VM as `runInContext`'s timeout,
 * but absent from `WorkerOptions`' type in SDK 1.24.
 */
export const ISOLATE_TIMEOUT_OPTION = 'isolateExecutionTimeout';

/**
 * How the sandbox arranges a Worker's workflow threads (src/temporal/lanes.ts): `Worker.create` builds
 * its workflow creator with the protected static `createWorkflowCreator(bundle, compiledOptions,
 * logger)` of the class it was called on, so a subclass that overrides it builds one single-thread
 * creator (workflowThreadPoolSize 1) per thread and hands the Worker its own creator over them
 * (src/sandbox/workerSide.ts `workerClassWithThreads`). The creator and workflow interfaces are those
 * of `@temporalio/worker/lib/workflow/interface`.
 */
export const WORKFLOW_CREATOR_HOOK = 'createWorkflowCreator';

/**
 * How an activation interrupted by the isolate timeout shows in the failed workflow task the SDK
 * records (Node's vm message, `Script execution timed out after <ms>ms`).
 */
export const ISOLATE_TIMEOUT_FAILURE = /Script execution timed out/;

/**
 * How a Worker failure reads when a workflow thread died (memory exhaustion), as opposed to a lost
 * server: the SDK's threaded-vm.js messages (`Workflow Worker Thread exited …`) and Node's.
 */
export const THREAD_DEATH_FAILURE = /Workflow Worker Thread exited|ERR_WORKER_OUT_OF_MEMORY|memory limit/;

/**
 * The globals the SDK injects into every workflow sandbox from the workflow thread's own realm
 * (vm-shared.js `injectGlobals`). The sandbox reaches that realm through `URL` (its prototype is the
 * realm's Function.prototype) and seals it, because a script could reach it through any of them.
 */
export const HOST_REALM_GLOBALS = ['URL', 'URLSearchParams', 'TextEncoder', 'TextDecoder', 'assert', 'AbortController'];
