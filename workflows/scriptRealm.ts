/**
 * A script's own realm (docs/architecture.md "Threat model"). Each run evaluates its bundle in a fresh
 * V8 context of its own (hostRealm().newScriptContext()), not in the workflow sandbox: the script
 * cannot see the workflow runtime (`__TEMPORAL_ACTIVATOR__`, the activity proxies, the module cache),
 * nothing it does to globals or built-in prototypes outlives its run or reaches another run, and it
 * cannot compile code from strings.
 *
 * The two realms talk through the bridge below: JSON strings and numbers only. The bootstrap
 * (workflows/realm/bootstrap.ts) builds every object the script sees inside its own realm.
 *
 * The realm's microtasks run only when the run drains them, right after it answers an operation, and
 * each drain has a time limit: a script that computes without awaiting (a catastrophic regex, a
 * microtask flood) is interrupted in its own realm and fails its own run with `script_timeout`.
 */
import { ApplicationFailure, sleep } from '@temporalio/workflow';
import { LOG_REDACTION_MARGIN, SCRIPT_LIMITS } from '../src/runtime/definitions.js';
import type { LoadedScript } from '../activities/runtime.js';
import { hostRealm, type ScriptContext } from '../src/sandbox/hostRealm.js';
import type { ScriptBudget } from './scriptBudget.js';
import type { RealmHost, RealmSetup, SvcShape } from './realm/types.js';
// The realm's program, as text (workflows/realm/bootstrap.ts; see workflows/realm/source.d.ts).
import SCRIPT_REALM_BOOTSTRAP from './realm/bootstrap.ts?source';
import type { RealmErrorCode, RunErrorCode } from '../src/errors.js';

/**
 * A time limit of the realm's own on each drain: 0, none. A vm time limit interrupts with
 * TerminateExecution, and an interruption inside the worker thread's message callback corrupts Node's
 * async hook stack and aborts the process (measured in the chaos crowd: a worker death per interrupted
 * drain). Loop protection (1 s, an ordinary exception) and the SDK's isolate timeout (3 s, for one
 * statement that never ends) bound the script instead, as before the realm; a drain's timer would
 * also cost a watchdog thread per call (bench/stepProfile.ts).
 */
export const DRAIN_TIMEOUT_MS = 0;

/** What a script threw or returned, as its realm described it. */
export type ScriptOutcome = { ok: true; json: string | undefined } | { ok: false; failure: ScriptFailureDescription };

export interface ScriptFailureDescription {
  kind: 'action_error' | 'error' | 'value' | 'timeout';
  name?: string;
  message: string;
  code?: string;
  stack?: string;
  payload?: unknown;
}

/** The operations a script may ask of its run, by name; each answers a JSON-able value. */
export type ScriptOperations = Record<string, (...args: unknown[]) => Promise<unknown>>;

export interface ScriptRealmOptions {
  scriptName: string;
  budget: ScriptBudget;
  operations: ScriptOperations;
  /** Buffers a log line of the script (console.*); already cut to the line limit by the caller. */
  log: (level: string, message: string) => void;
  /** Ends the run whatever the script does (a failure the script must not swallow). */
  fatal: (failure: ApplicationFailure) => void;
  /** The script's clock in ms (`Date`): the run's (SvcRuntime.now); the workflow's by default. */
  now?: () => number;
}

export interface ScriptRealm {
  /** Runs the bundle's default export with svc (and an action's input, as JSON). */
  run(loaded: LoadedScript | string, svcShape: SvcShape, inputJson: string | undefined): Promise<ScriptOutcome>;
  /**
   * Whether an operation of this run failed with this code, or the realm itself raised it: a failure
   * the script reports with such a code carries a code the runtime gave it, or it is the script's own.
   */
  issued(code: string): boolean;
  /**
   * Ends the run from outside (a runaway verdict): the script gets no further answer, so it never
   * executes again, and the run fails with `failure`.
   */
  stop(failure: ApplicationFailure): void;
}

function describe(error: unknown): ScriptFailureDescription {
  const candidate = error as { name?: unknown; message?: unknown; code?: unknown; type?: unknown; details?: unknown };
  if (error instanceof ApplicationFailure) {
    return { kind: 'error', name: 'OperationError', message: error.message, code: error.type ?? 'operation_failed' };
  }
  if (error !== null && typeof error === 'object' && typeof candidate.message === 'string') {
    const description: Record<string, unknown> = {
      kind: 'error',
      name: typeof candidate.name === 'string' ? candidate.name : 'Error',
      message: candidate.message,
    };
    const fields = error as Record<string, unknown>;
    for (const key of ['code', 'status', 'errno', 'type']) {
      const value = fields[key];
      if (typeof value === 'string' || typeof value === 'number') description[key] = value;
    }
    for (const key of ['response', 'payload']) {
      if (fields[key] !== undefined) description[key] = fields[key];
    }
    return description as unknown as ScriptFailureDescription;
  }
  return { kind: 'value', message: String(error) };
}

function safeJson(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return JSON.stringify({ kind: 'error', name: 'TypeError', message: 'an answer that cannot be sent as JSON' });
  }
}

export function createScriptRealm(options: ScriptRealmOptions): ScriptRealm {
  const { budget, operations } = options;
  let context: ScriptContext | undefined;
  let broken: ApplicationFailure | undefined;
  const issuedCodes = new Set<string>();

  function timedOut(error: unknown): ApplicationFailure {
    const message = error instanceof Error ? error.message : String(error);
    return ApplicationFailure.create({
      type: 'script_timeout' satisfies RunErrorCode,
      nonRetryable: true,
      message:
        `script ${options.scriptName} computed for too long without awaiting a svc ` +
        `operation (a statement that never ends, an endless chain of promises?) and was interrupted (${message})`,
    });
  }

  /** Runs the script's pending continuations; an interrupted realm ends the run. */
  function drain(): void {
    if (!context || broken) return;
    try {
      context.drain(DRAIN_TIMEOUT_MS);
    } catch (error) {
      broken = timedOut(error);
      options.fatal(broken);
    }
  }

  const bridge = {
    call(name: unknown, json: unknown, onResult: unknown, onError: unknown): void {
      if (typeof onResult !== 'function' || typeof onError !== 'function') return;
      const answer = (callback: unknown, text: string | undefined): void => {
        if (broken) return;
        (callback as (text: string | undefined) => void)(text);
        drain();
      };
      void (async () => {
        if (typeof name !== 'string' || typeof json !== 'string' || !Object.hasOwn(operations, name)) {
          throw new TypeError(`unknown operation ${String(name)}`);
        }
        if (json.length > SCRIPT_LIMITS.callBytes) {
          throw Object.assign(
            new Error(
              `svc.${name}: its arguments are ${json.length} bytes of JSON, over the limit of ${SCRIPT_LIMITS.callBytes} per call`,
            ),
            { name: 'OperationError', code: 'payload_too_large' satisfies RealmErrorCode },
          );
        }
        const args = JSON.parse(json) as unknown[];
        return operations[name]!(...(Array.isArray(args) ? args : []));
      })().then(
        (result) => {
          if (result === undefined) return answer(onResult, undefined);
          let text: string;
          try {
            text = JSON.stringify(result);
          } catch (error) {
            // An answer the realm cannot be given (an API's JSON nested 10^6 deep: the stack runs out)
            // fails the operation, as it failed when the worker's main thread serialized it.
            const reason = error instanceof Error ? error.message : String(error);
            return answer(
              onError,
              safeJson({
                kind: 'error',
                name: 'TypeError',
                message: `svc.${String(name)}: its answer cannot be sent to the script as JSON (${reason})`,
              }),
            );
          }
          answer(onResult, text);
        },
        (error: unknown) => {
          if (error instanceof ApplicationFailure) options.fatal(error);
          const description = describe(error);
          if (description.kind === 'error' && typeof description.code === 'string') issuedCodes.add(description.code);
          answer(onError, safeJson(description));
        },
      );
    },
    now: options.now ?? ((): number => Date.now()),
    random: (): number => Math.random(),
    tick: (): string | undefined => budget.check(),
    raised: (code: unknown): void => {
      if (typeof code === 'string') issuedCodes.add(code);
    },
    log(level: unknown, message: unknown): void {
      // Cut with the margin svc.log keeps: the log store redacts credentials before its own cut.
      options.log(String(level), String(message).slice(0, SCRIPT_LIMITS.logLineBytes + LOG_REDACTION_MARGIN));
    },
    parseUrl(input: unknown, base: unknown, hasBase: unknown): string {
      try {
        const url = hasBase === true ? new URL(String(input), String(base)) : new URL(String(input));
        const { href, origin, protocol, username, password, host, hostname, port, pathname, search, hash } = url;
        return JSON.stringify({
          href,
          origin,
          protocol,
          username,
          password,
          host,
          hostname,
          port,
          pathname,
          search,
          hash,
        });
      } catch {
        return JSON.stringify({ error: `Invalid URL: ${String(input)}` });
      }
    },
    bufferBytes: SCRIPT_LIMITS.bufferBytes,
    allocationBytes: SCRIPT_LIMITS.allocationBytes,
    recordBytes: SCRIPT_LIMITS.recordBytes,
    logLineChars: SCRIPT_LIMITS.logLineBytes + LOG_REDACTION_MARGIN,
  } satisfies RealmHost;

  return {
    issued: (code) => issuedCodes.has(code),
    stop(failure) {
      if (broken) return;
      broken = failure;
      options.fatal(failure);
    },
    async run(loaded, svcShape, inputJson) {
      const { code, budget: budgetName } =
        typeof loaded === 'string' ? { code: loaded, budget: '__svcBudgetUnused' } : loaded;
      context = hostRealm().newScriptContext();
      const setup = context.evaluate(SCRIPT_REALM_BOOTSTRAP, 'script-realm-setup', DRAIN_TIMEOUT_MS) as RealmSetup;
      const start = setup(bridge);
      let factory: unknown;
      try {
        factory = context.evaluate(
          `(function (module, exports, require, process, global, ${budgetName}) {\n${code}\n})`,
          `${options.scriptName}.js`,
          DRAIN_TIMEOUT_MS,
        );
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        issuedCodes.add('invalid_script');
        return { ok: false, failure: { kind: 'error', name: 'SyntaxError', code: 'invalid_script', message } };
      }
      const outcome = new Promise<ScriptOutcome>((resolve) => {
        start(
          factory,
          JSON.stringify(svcShape),
          inputJson,
          (json) => resolve({ ok: true, json: typeof json === 'string' ? json : undefined }),
          (description) => {
            let failure: ScriptFailureDescription;
            try {
              failure = JSON.parse(String(description)) as ScriptFailureDescription;
            } catch {
              failure = { kind: 'value', message: 'the script failed with an error that cannot be described' };
            }
            resolve({ ok: false, failure });
          },
        );
      });
      drain();
      return outcome;
    },
  };
}

/** A durable sleep for the realm's setTimeout. */
export async function scriptSleep(ms: unknown): Promise<boolean> {
  const wait = typeof ms === 'number' && Number.isFinite(ms) ? Math.max(0, ms) : 0;
  if (wait > 0) await sleep(wait);
  return wait > 0;
}
