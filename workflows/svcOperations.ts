/**
 * Every svc operation, declared once. From this table the run builds the dispatcher its script's realm
 * calls (workflows/svc.ts), and the realm builds the script's `svc` members (workflows/realm/bootstrap.ts
 * receives each member's name and shape). An entry says how the realm shapes the member, how the run
 * checks the JSON arguments the realm sends, and what the run does: most operations are one durable
 * step, declared with `step()` (its activity, its step summary; the activity's ledger and retry policy
 * are in STEP_POLICIES, once per activity).
 *
 * Adding an operation is adding an entry here (and, for a new activity, its policy and the activity in
 * activities/runtime.ts). The type of ServiceSync (src/runtime/public.ts) must have a member for it:
 * the check at the end of this file fails the build when a public method has no entry.
 */
import type { RetryPolicy } from '@temporalio/workflow';
import type { Duration } from '@temporalio/common';
import type { RuntimeActivities } from '../activities/runtime.js';
import type { ConnectionScope } from '../src/connections/types.js';
import type { RunErrorCode } from '../src/errors.js';
import type {
  ConnectionRecord,
  RequestConfig,
  ServiceResponse,
  ServiceSync,
  TokenAnswer,
} from '../src/runtime/public.js';
import type { HttpMethod, IntegrationDescription } from '../src/runtime/svcTypes.js';
import type { RealmMember, RealmShape } from './realm/types.js';
import { checkCheckpoint, type Checkpoint } from '../src/syncs/checkpoint.js';

/**
 * A failed `svc` operation, as the script sees it; `code` is the failure type the run fails with, one of
 * the run's codes in src/errors.ts.
 */
export class OperationError extends Error {
  override name = 'OperationError';
  constructor(
    readonly code: RunErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export type StepName = keyof RuntimeActivities;
export type StepArgs<K extends StepName> = Parameters<RuntimeActivities[K]>;
export type StepResult<K extends StepName> = Awaited<ReturnType<RuntimeActivities[K]>>;

// Why these numbers: a request attempt waits up to 60 s for an answer (src/runtime/http.ts), so an
// attempt may take 90 s; store operations are short but a large batch into a busy Postgres is not.
export const REQUEST_ATTEMPT_TIMEOUT = '90 seconds';
export const STORE_TIMEOUT = '5 minutes';
// A store operation fails on a database hiccup, not on bad input (that is non-retryable): keep trying.
export const STORE_RETRY: RetryPolicy = {
  initialInterval: '1 second',
  backoffCoefficient: 2,
  maximumInterval: '30 seconds',
  maximumAttempts: 10,
};

/** How the run schedules an activity. */
export interface StepPolicy {
  /**
   * The step ledger keeps the step's outcome the moment it completes (it acts on the outside world;
   * docs/architecture.md "Exact resume"): the activity takes the step's StepRef as its last argument.
   */
  ledgered: boolean;
  /**
   * The step's ledger row is left out of the ledger's weight (workflows/svc.ts) in runs older than
   * SvcContext.cutAsksLedger: where the cuts of their histories fall was computed without it (a step
   * ledgered later than the cut rules). Runs with it weigh the row as any other.
   */
  unweighed?: true;
  /** Per attempt; STORE_TIMEOUT when absent. */
  timeout?: Duration;
  /** STORE_RETRY when absent; a request's comes from its `retries` (workflows/svc.ts). */
  retry?: RetryPolicy;
}

/** Every activity a run schedules, with its policy. */
export const STEP_POLICIES: Record<StepName, StepPolicy> = {
  loadScript: { ledgered: false },
  httpRequest: { ledgered: true, timeout: REQUEST_ATTEMPT_TIMEOUT },
  saveRecords: { ledgered: true },
  deleteRecords: { ledgered: true },
  markUnseenDeleted: { ledgered: true },
  getCheckpoint: { ledgered: true },
  saveCheckpoint: { ledgered: true },
  clearRecords: { ledgered: true },
  forgetSteps: { ledgered: false },
  beginRun: { ledgered: false },
  loadQueuedWebhook: { ledgered: false },
  // The sync entity asks it itself (workflows/manageSync.ts), never through svc.
  committedRun: { ledgered: false },
  countRecords: { ledgered: false },
  writeLogs: { ledgered: false },
  // Ledgered as getMetadata (below): the connection's record holds its metadata too (a hostile review:
  // progress read through getConnection().metadata lost 250 of 1,000 records the same way).
  getEnvironmentVariables: { ledgered: true, unweighed: true },
  getConnection: { ledgered: true, unweighed: true },
  // Ledgered: a script that keeps its progress in the metadata (getMetadata at its start, setMetadata
  // after each page) takes, after a crash, the path its first attempt took, whatever that attempt wrote
  // since (a hostile review: read anew, 250 of 1,000 records were lost or marked deleted).
  getMetadata: { ledgered: true, unweighed: true },
  setMetadata: { ledgered: false },
  updateMetadata: { ledgered: false },
  watchRun: { ledgered: false },
  runawayVerdict: { ledgered: false },
  resolveAction: { ledgered: false },
  getIntegration: { ledgered: false },
};

/** What an operation may use of its run (workflows/svc.ts implements it). */
export interface OperationRuntime {
  readonly kind: 'sync' | 'action';
  readonly scope: ConnectionScope;
  /** One durable step with its declared policy; a failure reaches the script as an OperationError. */
  step<K extends StepName>(activity: K, summary: string, args: StepArgs<K>): Promise<StepResult<K>>;
  /** An HTTP request (a durable step with the request's own retry policy). */
  request(method: HttpMethod, config: RequestConfig): Promise<ServiceResponse>;
  /** batchSave / batchDelete after their checks. */
  write(what: 'batchSave' | 'batchDelete', records: unknown, model: unknown): Promise<void>;
  /** Buffers a log line; writes the buffer when it is full. */
  log(level: string, message: string): Promise<void>;
  triggerAction(actionName: string, input: unknown): Promise<unknown>;
  /** Throws `scope_denied` when a call names another integration or connection than the run's. */
  ownScope(what: string, providerConfigKey: unknown, connectionId: unknown): void;
  /** The run's integration (one getIntegration step per run at most). */
  integration(): Promise<IntegrationDescription>;
  /** Starts walking a paginated list; answers the walk's id. `pageInfo`: the script has an on_page callback. */
  openPagination(config: unknown, pageInfo: boolean): Promise<number>;
  /** The next page of a walk (with what on_page is given, when the script has one). */
  nextPage(id: unknown): Promise<{ done: boolean; value: unknown; onPage?: unknown }>;
  /** A durable timer (setTimeout). */
  sleep(ms: unknown): Promise<void>;
  /** svc.getCheckpoint / saveCheckpoint / clearCheckpoint (workflows/runChain.ts). */
  checkpoint(what: 'get' | 'save' | 'clear', value: Checkpoint | null): Promise<Checkpoint | null>;
  /** svc.trackDeletesStart / trackDeletesEnd. */
  trackDeletes(what: 'start' | 'end', model: unknown): Promise<void>;
}

/** Any entry of the table (each is checked against SvcOperation<its arguments> where it is written). */
export interface AnySvcOperation {
  realm: RealmShape;
  check: (args: unknown[]) => unknown[];
  run: (runtime: OperationRuntime, ...args: never[]) => Promise<unknown>;
}

/** One svc operation. */
export interface SvcOperation<A extends unknown[] = unknown[]> {
  /** How the script's realm exposes it. */
  realm: RealmShape;
  /** Checks the JSON arguments the realm sent and gives them their types; throws an OperationError. */
  check: (args: unknown[]) => A;
  /** What the run does. */
  run: (runtime: OperationRuntime, ...args: A) => Promise<unknown>;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** An operation that is one durable step. */
function step<K extends StepName, A extends unknown[]>(spec: {
  realm?: RealmShape;
  check: (args: unknown[]) => A;
  activity: K;
  summary: (args: NoInfer<A>) => string;
  args: (scope: ConnectionScope, args: NoInfer<A>) => StepArgs<K>;
}): SvcOperation<A> {
  return {
    realm: spec.realm ?? 'call',
    check: spec.check,
    run: (runtime, ...args) => runtime.step(spec.activity, spec.summary(args), spec.args(runtime.scope, args)),
  };
}

const noArgs = (): [] => [];

function metadataArg(what: string) {
  return (args: unknown[]): [Record<string, unknown>] => {
    const metadata = args[0];
    if (!isPlainObject(metadata)) throw new OperationError('invalid_operation', `svc.${what} needs an object`);
    return [metadata];
  };
}

function request(method: HttpMethod): SvcOperation<[RequestConfig]> {
  return {
    realm: 'call',
    // The config is checked where it is sent (workflows/svc.ts `request`): the same checks for paginate's pages.
    check: (args) => [args[0] as RequestConfig],
    run: (runtime, config) => runtime.request(method, config),
  };
}

const METHODS = new Set<string>(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

/** svc.proxy: the method is the config's (GET when absent). */
const proxy: SvcOperation<[HttpMethod, RequestConfig]> = {
  realm: 'call',
  check: (args) => {
    const config = args[0];
    const asked = isPlainObject(config) ? config['method'] : undefined;
    const method = asked === undefined ? 'GET' : typeof asked === 'string' ? asked.toUpperCase() : '';
    if (!METHODS.has(method)) {
      throw new OperationError(
        'invalid_request',
        `svc.proxy: method ${JSON.stringify(asked)} is not one of GET, POST, PUT, PATCH, DELETE`,
      );
    }
    return [method as HttpMethod, args[0] as RequestConfig];
  },
  run: (runtime, method, config) => runtime.request(method, config),
};

const given = (value: unknown): boolean => value !== undefined && value !== null;

/**
 * getConnection's two forms: `(forceRefresh?, refreshToken?)` (SPEC.md) and the field's
 * `(providerConfigKey?, connectionId?, { forceRefresh?, refreshToken? })`.
 */
type ConnectionArgs = [forceRefresh: boolean, refreshToken: boolean, providerConfigKey: unknown, connectionId: unknown];
function connectionArgs(args: unknown[]): ConnectionArgs {
  const [first, second, third] = args;
  if (typeof first === 'string' || typeof second === 'string' || isPlainObject(third)) {
    const options = isPlainObject(third) ? third : {};
    return [options['forceRefresh'] === true, options['refreshToken'] === true, first, second];
  }
  if (given(first) && typeof first !== 'boolean') {
    throw new OperationError(
      'invalid_operation',
      'svc.getConnection takes (forceRefresh?, refreshToken?) or (providerConfigKey?, connectionId?, options?)',
    );
  }
  return [first === true, second === true, undefined, undefined];
}

/** What getToken answers for a connection's credentials (the field's format). */
function tokenOf(connection: ConnectionRecord): TokenAnswer {
  const credentials = connection.credentials;
  if (credentials.type === 'OAUTH1') {
    return { oAuthToken: credentials.oauth_token, oAuthTokenSecret: credentials.oauth_token_secret };
  }
  if ('access_token' in credentials) return credentials.access_token;
  return credentials;
}

const LOG_LEVELS: Record<string, string> = { http: 'info', verbose: 'debug', silly: 'debug' };

/** The table. Keys are the names of svc's members. */
export const SVC_OPERATIONS = {
  get: request('GET'),
  post: request('POST'),
  put: request('PUT'),
  patch: request('PATCH'),
  delete: request('DELETE'),
  paginate: {
    realm: 'paginate',
    check: (args): [unknown, boolean] => [args[0], args[1] === true],
    run: (runtime, config, pageInfo) => runtime.openPagination(config, pageInfo),
  } satisfies SvcOperation<[unknown, boolean]>,
  'paginate.next': {
    realm: 'internal',
    check: (args) => [args[0]],
    run: (runtime, id) => runtime.nextPage(id),
  } satisfies SvcOperation<[unknown]>,
  proxy,
  log: {
    realm: 'log',
    check: (args): [string, string] => {
      const [message, options] = args;
      const level = isPlainObject(options) && typeof options['level'] === 'string' ? options['level'] : 'info';
      return [typeof message === 'string' ? message : String(JSON.stringify(message)), LOG_LEVELS[level] ?? level];
    },
    run: (runtime, message, level) => runtime.log(level, message),
  } satisfies SvcOperation<[string, string]>,
  getEnvironmentVariables: step({
    check: noArgs,
    activity: 'getEnvironmentVariables',
    summary: () => 'getEnvironmentVariables',
    args: (scope) => [scope.environmentId],
  }),
  triggerAction: {
    realm: 'call',
    // (actionName, input), or the field's (providerConfigKey, connectionId, actionName, input?).
    check: (args): [string, unknown, unknown, unknown] => {
      const formatForm = args.length >= 3 && typeof args[2] === 'string';
      const [actionName, input] = formatForm ? [args[2], args[3]] : [args[0], args[1]];
      if (typeof actionName !== 'string' || actionName === '') {
        throw new OperationError('invalid_operation', 'svc.triggerAction needs an action name');
      }
      return formatForm ? [actionName, input, args[0], args[1]] : [actionName, input, undefined, undefined];
    },
    run: (runtime, actionName, input, providerConfigKey, connectionId) => {
      runtime.ownScope(`svc.triggerAction('${actionName}')`, providerConfigKey, connectionId);
      return runtime.triggerAction(actionName, input);
    },
  } satisfies SvcOperation<[string, unknown, unknown, unknown]>,
  getMetadata: step({
    check: noArgs,
    activity: 'getMetadata',
    summary: () => 'getMetadata',
    args: (scope) => [scope],
  }),
  setMetadata: step({
    check: metadataArg('setMetadata'),
    activity: 'setMetadata',
    summary: () => 'setMetadata',
    args: (scope, [metadata]) => [scope, metadata],
  }),
  updateMetadata: step({
    check: metadataArg('updateMetadata'),
    activity: 'updateMetadata',
    summary: () => 'updateMetadata',
    args: (scope, [metadata]) => [scope, metadata],
  }),
  getFieldMapping: {
    realm: 'call',
    check: noArgs,
    run: async (runtime) => {
      const mapping = (await runtime.step('getMetadata', 'getMetadata', [runtime.scope]))['fieldMapping'];
      return isPlainObject(mapping) ? mapping : {};
    },
  } satisfies SvcOperation<[]>,
  getConnection: {
    realm: 'call',
    check: connectionArgs,
    run: (runtime, forceRefresh, refreshToken, providerConfigKey, connectionId) => {
      runtime.ownScope('svc.getConnection', providerConfigKey, connectionId);
      return runtime.step('getConnection', `getConnection${forceRefresh ? ' (force refresh)' : ''}`, [
        runtime.scope,
        { forceRefresh, refreshToken },
      ]);
    },
  } satisfies SvcOperation<ConnectionArgs>,
  getToken: {
    realm: 'call',
    check: noArgs,
    run: async (runtime) =>
      tokenOf(
        await runtime.step('getConnection', 'getConnection', [
          runtime.scope,
          { forceRefresh: false, refreshToken: false },
        ]),
      ),
  } satisfies SvcOperation<[]>,
  getIntegration: {
    realm: 'call',
    check: noArgs,
    run: async (runtime) => (await runtime.integration()).integration,
  } satisfies SvcOperation<[]>,
  getWebhookURL: {
    realm: 'call',
    check: noArgs,
    run: async (runtime) => (await runtime.integration()).integration.webhook_url ?? null,
  } satisfies SvcOperation<[]>,
  // Runs in the script's realm, on the script's own zod schema (workflows/realm/bootstrap.ts).
  zodValidateInput: {
    realm: 'zodValidateInput',
    check: noArgs,
    run: () => Promise.reject(new OperationError('invalid_operation', 'svc.zodValidateInput runs in the script realm')),
  } satisfies SvcOperation<[]>,
  batchSave: {
    realm: 'write',
    check: (args) => [args[0], args[1]],
    run: (runtime, records, model) => runtime.write('batchSave', records, model),
  } satisfies SvcOperation<[unknown, unknown]>,
  batchDelete: {
    realm: 'write',
    check: (args) => [args[0], args[1]],
    run: (runtime, records, model) => runtime.write('batchDelete', records, model),
  } satisfies SvcOperation<[unknown, unknown]>,
  // Issue 32: a run's resumable state, and delete tracking over a pass that may span executions.
  getCheckpoint: {
    realm: 'call',
    check: noArgs,
    run: (runtime) => runtime.checkpoint('get', null),
  } satisfies SvcOperation<[]>,
  saveCheckpoint: {
    realm: 'call',
    check: (args): [Checkpoint] => {
      const checked = checkCheckpoint(args[0]);
      if (!checked.ok) throw new OperationError('invalid_checkpoint', `svc.saveCheckpoint: ${checked.problem}`);
      return [checked.checkpoint];
    },
    run: async (runtime, checkpoint) => {
      await runtime.checkpoint('save', checkpoint);
    },
  } satisfies SvcOperation<[Checkpoint]>,
  clearCheckpoint: {
    realm: 'call',
    check: noArgs,
    run: async (runtime) => {
      await runtime.checkpoint('clear', null);
    },
  } satisfies SvcOperation<[]>,
  trackDeletesStart: {
    realm: 'call',
    check: (args) => [args[0]],
    run: (runtime, model) => runtime.trackDeletes('start', model),
  } satisfies SvcOperation<[unknown]>,
  trackDeletesEnd: {
    realm: 'call',
    check: (args) => [args[0]],
    run: (runtime, model) => runtime.trackDeletes('end', model),
  } satisfies SvcOperation<[unknown]>,
  // setTimeout in the script's realm: a durable timer.
  sleep: {
    realm: 'internal',
    check: (args) => [args[0]],
    run: (runtime, ms) => runtime.sleep(ms),
  } satisfies SvcOperation<[unknown]>,
} satisfies Record<string, AnySvcOperation>;

export type SvcOperationName = keyof typeof SVC_OPERATIONS;

/** The members the script's realm builds (everything but its internal operations), in table order. */
export const REALM_MEMBERS: RealmMember[] = Object.entries(SVC_OPERATIONS)
  .filter(([, operation]) => operation.realm !== 'internal')
  .map(([name, operation]) => ({ name, shape: operation.realm }));

// Every method of the public ServiceSync type has an entry (a type error here names the one missing).
type Methods<T> = { [K in keyof T]-?: T[K] extends (...args: never[]) => unknown ? K : never }[keyof T];
type Undeclared = Exclude<Methods<ServiceSync>, SvcOperationName>;
const everyPublicMethodDeclared: [Undeclared] extends [never] ? true : Undeclared = true;
void everyPublicMethodDeclared;
