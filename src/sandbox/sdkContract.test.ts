/**
 * The contract between the script sandbox and the Temporal SDK's internals (src/sandbox/sdkInternals.ts).
 * Each check names the internal and the file to update when an SDK upgrade breaks it. No Temporal
 * server or database: the SDK's own modules are loaded, run in a worker thread as the SDK's workflow
 * threads run them, and a replay Worker runs a workflow that never ends.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker as Thread } from 'node:worker_threads';
// CommonJS without named exports that Node's ESM loader sees: the default import is the module.
import proto from '@temporalio/proto';
import { bundleWorkflowCode, Worker, type WorkerOptions } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { THREAD_MARK_BYTES, THREAD_MARKS_DATA_KEY } from '../runtime/definitions.js';
import { hostSetup, type HostSetupOptions } from './hostRealm.js';
import {
  ACTIVATOR_SOURCE,
  HOST_REALM_GLOBALS,
  ISOLATE_TIMEOUT_FAILURE,
  SDK_PACKAGES,
  SDK_VERSION,
  THREAD_DEATH_FAILURE,
  VM_SHARED_MODULE,
  WORKFLOW_CREATOR_HOOK,
} from './sdkInternals.js';
import { isIsolateTimeout, isThreadDeath, sandboxWorkerOptions, shareThreadMarks } from './workerSide.js';

const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const require = createRequire(import.meta.url);
const INTERNALS = 'src/sandbox/sdkInternals.ts';

/** The failure message of a broken contract: which internal, and where the code relying on it lives. */
function broken(internal: string, file: string, what: string): string {
  return `Temporal SDK internal changed: ${internal} (${INTERNALS}; update ${file}): ${what}`;
}

function sdkFile(path: string): string {
  return require.resolve(`@temporalio/worker/lib/${path}`);
}

describe('the Temporal SDK the sandbox was checked against', () => {
  it(`is installed and pinned at exactly ${SDK_VERSION}, every package`, () => {
    const manifest = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
      devDependencies: Record<string, string>;
    };
    for (const name of SDK_PACKAGES) {
      // @temporalio/testing is a devDependency (the dev stack's last resort); the others run the service.
      const pinned = manifest.dependencies[`@temporalio/${name}`] ?? manifest.devDependencies[`@temporalio/${name}`];
      expect(
        pinned,
        broken('SDK_VERSION', 'package.json', `@temporalio/${name} is "${pinned}", not exactly ${SDK_VERSION}`),
      ).toBe(SDK_VERSION);
      const entry = require.resolve(`@temporalio/${name}`);
      const installed = (
        JSON.parse(
          readFileSync(join(entry.slice(0, entry.lastIndexOf(`${name}`) + name.length), 'package.json'), 'utf8'),
        ) as {
          version: string;
        }
      ).version;
      expect(
        installed,
        broken(
          'SDK_VERSION',
          'every src/sandbox file',
          `@temporalio/${name} ${installed} is installed; rerun this test and check each internal`,
        ),
      ).toBe(SDK_VERSION);
    }
  });

  it('keeps the source and modules the sandbox names', async () => {
    const vmSharedPath = sdkFile('workflow/vm-shared.js');
    expect(
      vmSharedPath,
      broken('VM_SHARED_MODULE', 'src/sandbox/hostRealm.ts', `vm-shared.js moved to ${vmSharedPath}`),
    ).toMatch(VM_SHARED_MODULE);
    const vmShared = readFileSync(vmSharedPath, 'utf8');
    // getActivator compiles exactly this source through a promise's function constructor; the seal
    // answers only that source.
    expect(
      vmShared.includes(`ctor('${ACTIVATOR_SOURCE}')`) && vmShared.includes('promise.constructor.constructor'),
      broken(
        'ACTIVATOR_SOURCE',
        'src/sandbox/hostRealm.ts',
        'vm-shared.js getActivator no longer compiles that source',
      ),
    ).toBe(true);
    const shared = require(vmSharedPath) as Record<string, unknown> & {
      globalHandlers?: Record<string, unknown>;
    };
    expect(
      {
        stopPromiseHook: typeof shared.globalHandlers?.['stopPromiseHook'],
        promiseHookInstalled: typeof shared.globalHandlers?.['promiseHookInstalled'],
        setUnhandledRejectionHandler: typeof shared['setUnhandledRejectionHandler'],
        injectGlobals: typeof shared['injectGlobals'],
      },
      broken('VM_SHARED_MODULE', 'src/sandbox/hostRealm.ts', 'vm-shared.js exports changed'),
    ).toEqual({
      stopPromiseHook: 'function',
      promiseHookInstalled: 'boolean',
      setUnhandledRejectionHandler: 'function',
      injectGlobals: 'function',
    });
    // The lanes (src/temporal/lanes.ts) replace the workflow creator through this hook: Worker.create
    // must build its creator by calling it on the class it was called on, or the lanes are bypassed.
    const workerSource = readFileSync(sdkFile('worker.js'), 'utf8');
    expect(
      typeof (Worker as unknown as Record<string, unknown>)[WORKFLOW_CREATOR_HOOK] === 'function' &&
        workerSource.includes(`await this.${WORKFLOW_CREATOR_HOOK}(bundle, compiledOptions, logger)`),
      broken(
        'WORKFLOW_CREATOR_HOOK',
        'src/sandbox/workerSide.ts',
        'Worker.create no longer builds its workflow creator with this.createWorkflowCreator',
      ),
    ).toBe(true);
    const threadedVm = readFileSync(sdkFile('workflow/threaded-vm.js'), 'utf8');
    expect(
      THREAD_DEATH_FAILURE.test(threadedVm),
      broken(
        'THREAD_DEATH_FAILURE',
        'src/sandbox/workerSide.ts',
        "threaded-vm.js no longer says 'Workflow Worker Thread exited'",
      ),
    ).toBe(true);
    expect(
      isThreadDeath(new Error('Workflow Worker Thread exited prematurely: Error [ERR_WORKER_OUT_OF_MEMORY]')),
    ).toBe(true);
    expect(isThreadDeath(new Error('14 UNAVAILABLE: connection refused'))).toBe(false);
    // Deep imports outside the sandbox: the watchdog and the decoded history read failures and
    // payloads with the SDK's codec helpers.
    const helpers = (await import('@temporalio/common/lib/internal-non-workflow/index.js')) as Record<string, unknown>;
    for (const name of [
      'decodeOptionalFailureToOptionalError',
      'decode',
      'visit',
      'walkGetWorkflowExecutionHistoryResponse',
    ]) {
      expect(
        typeof helpers[name],
        `Temporal SDK internal changed: @temporalio/common/lib/internal-non-workflow ${name} (update src/temporal/runaway.ts, src/temporal/decodedHistory.ts)`,
      ).toBe('function');
    }
  });
});

interface SealReport {
  urlIsHostRealm: boolean;
  injected: Record<string, boolean>;
  hookInstalledBefore: boolean;
  hookInstalledAfter: boolean;
  probes: Record<string, string>;
  markFile: string;
}

/**
 * What the SDK's workflow thread does (reusable-vm.js: the unhandled-rejection listener, the promise
 * hook, a vm context with the injected globals), then what hostRealm() does in it, then the probes.
 * CommonJS source run by a worker thread: its realm is sealed, not this test's.
 */
const THREAD_SOURCE = String.raw`
const { parentPort, workerData } = require('node:worker_threads');
const vm = require('node:vm');
const shared = require(workerData.vmSharedPath);
shared.setUnhandledRejectionHandler(() => undefined);
shared.globalHandlers.install();
const report = { probes: {}, injected: {} };
report.hookInstalledBefore = shared.globalHandlers.promiseHookInstalled;
const context = vm.createContext({}, { microtaskMode: 'afterEvaluate' });
shared.injectGlobals(context);
const inSandbox = (source) => vm.runInContext(source, context);
report.urlIsHostRealm = inSandbox('Object.getPrototypeOf(URL) !== Function.prototype') && Object.getPrototypeOf(inSandbox('URL')) === Function.prototype;
for (const name of workerData.hostGlobals) report.injected[name] = inSandbox('typeof ' + name) !== 'undefined';
const setup = inSandbox('URL.constructor(' + JSON.stringify('return (' + workerData.setupSource + ')') + ')()');
const realm = setup(workerData.options);
report.hookInstalledAfter = shared.globalHandlers.promiseHookInstalled;
const attempt = (name, fn) => {
  try {
    const value = fn();
    report.probes[name] = 'reached ' + typeof value;
  } catch (error) {
    report.probes[name] = String(error && error.name) + ': ' + String(error && error.message);
  }
};
attempt('sandbox URL.constructor', () => inSandbox("URL.constructor('return process')()"));
attempt('sandbox async function constructor', () => inSandbox("assert.rejects.constructor('return process')()"));
attempt('host (function(){}).constructor', () => (function () {}).constructor('return process')());
attempt('host generator constructor', () => Object.getPrototypeOf(function* () {}).constructor('return process')());
attempt('activator source', () => inSandbox('URL.constructor(' + JSON.stringify(workerData.options.activatorSource) + ')()'));
const script = realm.newScriptContext();
attempt('script (function(){}).constructor', () => script.evaluate("(function(){}).constructor('return process')()", 'probe.js', 0));
attempt('script eval', () => script.evaluate("eval('process')", 'probe.js', 0));
realm.mark('contract-run');
// A script's unhandled rejection: the SDK's listener would compile code through the promise's
// constructor (the script realm refuses) and kill the thread; the sandbox drops it instead.
script.evaluate("Promise.reject(new Error('a script rejection'))", 'probe.js', 0);
script.drain(0);
setTimeout(() => {
  const { threadId } = require('node:worker_threads');
  report.markFile = require('node:fs').readFileSync(workerData.markDir + '/contract-owner-' + threadId, 'utf8');
  parentPort.postMessage(report);
}, 100);
`;

describe('the seal of the workflow thread realm (src/sandbox/hostRealm.ts)', () => {
  it('stops the promise hook, blocks every function constructor of that realm, keeps the activator source, drops script rejections, writes marks', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'sandbox-contract-'));
    try {
      shareThreadMarks({ dir, owner: 'contract-owner' });
      const options: HostSetupOptions = {
        marksKey: THREAD_MARKS_DATA_KEY,
        markBytes: THREAD_MARK_BYTES,
        realmKey: 'integration-service.contract',
        vmShared: VM_SHARED_MODULE.source,
        activatorSource: ACTIVATOR_SOURCE,
      };
      const thread = new Thread(THREAD_SOURCE, {
        eval: true,
        workerData: {
          vmSharedPath: sdkFile('workflow/vm-shared.js'),
          setupSource: hostSetup.toString(),
          options,
          hostGlobals: HOST_REALM_GLOBALS,
          markDir: dir,
        },
      });
      const report = await new Promise<SealReport>((resolveReport, reject) => {
        thread.once('message', (message: SealReport) => resolveReport(message));
        thread.once('error', reject);
        thread.once('exit', (code) => reject(new Error(`the thread exited (${code}) before it reported`)));
      }).catch((error: unknown) => {
        throw new Error(
          broken('the workflow thread realm', 'src/sandbox/hostRealm.ts', `the sealed thread failed: ${String(error)}`),
        );
      });
      await thread.terminate();
      expect(
        report.urlIsHostRealm,
        broken('HOST_REALM_GLOBALS', 'src/sandbox/hostRealm.ts', 'the sandbox URL is no longer of the thread realm'),
      ).toBe(true);
      expect(
        report.injected,
        broken('HOST_REALM_GLOBALS', 'src/sandbox/hostRealm.ts', 'injectGlobals changed'),
      ).toEqual(Object.fromEntries(HOST_REALM_GLOBALS.map((name) => [name, true])));
      expect(report.hookInstalledBefore).toBe(true);
      expect(
        report.hookInstalledAfter,
        broken('VM_SHARED_MODULE', 'src/sandbox/hostRealm.ts', 'the promise hook was not stopped'),
      ).toBe(false);
      const refused = /^EvalError: /;
      expect(
        report.probes,
        broken('the sealed function constructors', 'src/sandbox/hostRealm.ts', 'a route to `process` is open'),
      ).toEqual({
        'sandbox URL.constructor': expect.stringMatching(
          /^EvalError: scripts cannot compile code of the worker/,
        ) as unknown,
        'sandbox async function constructor': expect.stringMatching(refused) as unknown,
        'host (function(){}).constructor': expect.stringMatching(refused) as unknown,
        'host generator constructor': expect.stringMatching(refused) as unknown,
        // Answered (the SDK's getActivator), with nothing outside a workflow sandbox.
        'activator source': 'reached undefined',
        'script (function(){}).constructor': expect.stringMatching(
          /^EvalError: Code generation from strings disallowed/,
        ) as unknown,
        'script eval': expect.stringMatching(/^EvalError: Code generation from strings disallowed/) as unknown,
      });
      expect(report.markFile.length, 'thread mark file size').toBe(THREAD_MARK_BYTES);
      expect(
        report.markFile.split('\n')[0],
        broken('THREAD_MARKS_DATA_KEY', 'src/sandbox/workerSide.ts', 'the thread wrote no mark'),
      ).toBe('contract-run');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/**
 * Workflows run by a replay Worker in the SDK's own workflow threads: `spin` never ends; `seal` runs
 * hostRealm() there and reports what its probes reached, in the message of the workflow task failure
 * it ends with (URI-encoded JSON: the message travels in a debug-formatted string).
 */
const CONTRACT_WORKFLOWS = (root: string): string => String.raw`
import { hostRealm } from '${root}/src/sandbox/hostRealm.js';
import { ACTIVATOR_SOURCE } from '${root}/src/sandbox/sdkInternals.js';
export async function spin() {
  for (;;) {}
}
export async function seal() {
  const probes = {};
  const attempt = (name, fn) => {
    try {
      probes[name] = 'reached ' + typeof fn();
    } catch (error) {
      probes[name] = String(error && error.name) + ': ' + String(error && error.message);
    }
  };
  let realm;
  attempt('hostRealm()', () => (realm = hostRealm()));
  attempt('sandbox URL.constructor', () => URL.constructor('return process')());
  attempt('sandbox async function constructor', () => assert.rejects.constructor('return process')());
  attempt('sandbox TextEncoder result', () => new TextEncoder().encode('x').constructor.constructor.constructor('return process')());
  attempt('activator source', () => URL.constructor(ACTIVATOR_SOURCE)());
  if (realm) {
    const script = realm.newScriptContext();
    attempt('script (function(){}).constructor', () => script.evaluate("(function(){}).constructor('return process')()", 'probe.js', 0));
    attempt('script global process', () => script.evaluate('process', 'probe.js', 0));
  }
  throw new Error('SEAL[' + encodeURIComponent(JSON.stringify(probes)) + ']');
}
`;

/** A run whose first workflow task completed: replaying it runs the workflow's first activation. */
function firstTaskHistory(workflowType: string) {
  const eventTime = { seconds: Math.floor(Date.now() / 1000) };
  return proto.temporal.api.history.v1.History.fromObject({
    events: [
      {
        eventId: 1,
        eventTime,
        eventType: 'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED',
        workflowExecutionStartedEventAttributes: {
          workflowType: { name: workflowType },
          taskQueue: { name: 'contract' },
          workflowTaskTimeout: { seconds: 10 },
          originalExecutionRunId: '00000000-0000-4000-8000-000000000001',
          firstExecutionRunId: '00000000-0000-4000-8000-000000000001',
          attempt: 1,
        },
      },
      {
        eventId: 2,
        eventTime,
        eventType: 'EVENT_TYPE_WORKFLOW_TASK_SCHEDULED',
        workflowTaskScheduledEventAttributes: {
          taskQueue: { name: 'contract' },
          startToCloseTimeout: { seconds: 10 },
          attempt: 1,
        },
      },
      {
        eventId: 3,
        eventTime,
        eventType: 'EVENT_TYPE_WORKFLOW_TASK_STARTED',
        workflowTaskStartedEventAttributes: { scheduledEventId: 2, identity: 'contract', requestId: 'contract' },
      },
      {
        eventId: 4,
        eventTime,
        eventType: 'EVENT_TYPE_WORKFLOW_TASK_COMPLETED',
        workflowTaskCompletedEventAttributes: { scheduledEventId: 2, startedEventId: 3, identity: 'contract' },
      },
    ],
  });
}

describe("in the SDK's own workflow threads (a replay Worker)", () => {
  let dir = '';
  let workflowBundle: Awaited<ReturnType<typeof bundleWorkflowCode>> | undefined;
  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sandbox-contract-'));
    const workflowsPath = join(dir, 'contractWorkflows.js');
    writeFileSync(workflowsPath, CONTRACT_WORKFLOWS(REPO_ROOT));
    workflowBundle = await bundleWorkflowCode({
      workflowsPath,
      logger: quietLogger,
      // The workflows sit in a temporary folder: the SDK's modules are this repository's.
      webpackConfigHook: (config) => ({
        ...config,
        resolve: { ...config.resolve, modules: ['node_modules', join(REPO_ROOT, 'node_modules')] },
      }),
    });
  }, 180_000);
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Replays the first workflow task of `workflowType`; answers how it failed. */
  async function replayFailure(workflowType: string, options: Partial<WorkerOptions>): Promise<string> {
    if (!workflowBundle) throw new Error('no workflow bundle');
    // debugMode off: a replay Worker defaults to debug mode, which runs workflows in this thread
    // without a limit; the service's Workers run them in workflow threads, as here.
    const failure = await Worker.runReplayHistory(
      { workflowBundle, debugMode: false, ...options },
      firstTaskHistory(workflowType),
    ).then(
      () => new Error(`the replay of ${workflowType} completed`),
      (error: unknown) => error,
    );
    return failure instanceof Error ? failure.message : String(failure);
  }

  it('the isolate execution timeout (ISOLATE_TIMEOUT_OPTION) is honoured, and its failure reads as the watchdog expects', async () => {
    const timeoutMs = 1234;
    const message = await replayFailure('spin', sandboxWorkerOptions(timeoutMs));
    expect(
      isIsolateTimeout(message) && ISOLATE_TIMEOUT_FAILURE.test(message),
      broken(
        'ISOLATE_TIMEOUT_FAILURE',
        'src/sandbox/workerSide.ts, src/temporal/runaway.ts',
        `the failure reads: ${message}`,
      ),
    ).toBe(true);
    // Node's message carries the limit: the option reached the VM (the SDK's default is 5 s).
    expect(
      message,
      broken('ISOLATE_TIMEOUT_OPTION', 'src/sandbox/workerSide.ts', 'the option was not honoured'),
    ).toContain(`${timeoutMs}ms`);
  }, 180_000);

  it('hostRealm() seals the workflow thread realm: no function constructor of it answers a script', async () => {
    const message = await replayFailure('seal', sandboxWorkerOptions());
    const encoded = /SEAL\[([^\]]*)\]/.exec(message)?.[1];
    expect(encoded, broken('the workflow thread realm', 'src/sandbox/hostRealm.ts', message)).toBeDefined();
    const probes = JSON.parse(decodeURIComponent(encoded ?? '')) as Record<string, string>;
    expect(
      probes,
      broken('the sealed function constructors', 'src/sandbox/hostRealm.ts', 'a probe reached further'),
    ).toEqual({
      'hostRealm()': 'reached object',
      'sandbox URL.constructor': expect.stringMatching(
        /^EvalError: scripts cannot compile code of the worker/,
      ) as unknown,
      'sandbox async function constructor': expect.stringMatching(/^EvalError: /) as unknown,
      'sandbox TextEncoder result': expect.stringMatching(/^EvalError: /) as unknown,
      'activator source': 'reached undefined',
      'script (function(){}).constructor': expect.stringMatching(
        /^EvalError: Code generation from strings disallowed/,
      ) as unknown,
      'script global process': expect.stringMatching(/^ReferenceError: process is not defined/) as unknown,
    });
  }, 180_000);
});

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};
