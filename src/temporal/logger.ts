/**
 * The logger of the Temporal runtime of the service's processes (the worker's log): the SDK's log lines
 * (workers, workflows, activities) written to the service's pino logger (src/log.ts) with
 * `component: "temporal"`, their attributes as fields, at the SDK's level mapped to pino's. The Temporal
 * core's own (Rust) lines stay on stderr at WARN, as the SDK writes them: forwarding them would route
 * every line through the SDK's 100 ms reordering buffer.
 *
 * One change to what the SDK logs: a run that fails the way runs are expected to fail (an action whose
 * script threw ActionError, answered to the caller as a 422) is one INFO line, not a WARN with a stack
 * trace. Other failures keep the SDK's WARN with the error. The failure type comes from the log
 * attribute that workflows/failureLog.ts adds, registered in the bundle by src/temporal/workflowBundle.ts.
 *
 * A second change keeps what a script read out of the worker's log: every line about a run of a script
 * (manageSync, runSync, runAction; the run's failure and the failures of its activities) carries its error without
 * the message and stack, which a script controls (`throw new Error(token)`, `null[token]()`), and a
 * failure type only when it has the shape of the service's codes. The run's error itself, with the
 * connection's credentials redacted, is where the environment's owner reads it: GET /sync/runs,
 * /sync/status, the action's answer and the dashboard. Redacting known values instead would not be
 * enough: a worker that takes a run over replays its getConnection step from history and never learns
 * the credential it would have to hide.
 */
import { Runtime, type LogLevel, type LogMetadata, type Logger } from '@temporalio/worker';
import { log as serviceLog, type Logger as PinoLogger } from '../log.js';
import { FAILURE_TYPE_ATTRIBUTE } from '../../workflows/failureLog.js';
import { watchTaskQueue } from '../../workflows/taskQueues.js';

/** Failure types that are an ordinary outcome of a run, reported to whoever asked for it. */
export const EXPECTED_FAILURE_TYPES: ReadonlySet<string> = new Set(['action_script_failure']);

/** The SDK's message for a failed workflow execution (@temporalio/workflow logs.ts). */
const WORKFLOW_FAILED = 'Workflow failed';

/**
 * The workflow types that run a deployed script: their errors may carry anything the script read. The
 * sync entity runs its runs' scripts in its own execution (issue 31).
 */
export const SCRIPT_WORKFLOW_TYPES: ReadonlySet<string> = new Set(['manageSync', 'runSync', 'runAction']);

/** What stands in the log for a script run's error message. */
export const WITHHELD =
  'message withheld from the worker log (a script can put what it read there); the run’s error is in GET /sync/runs, the action’s answer and the dashboard';

// Error class names shown as they are; any other name (a script can set `error.name`) is not.
const KNOWN_ERROR_NAMES = new Set([
  'Error',
  'TypeError',
  'RangeError',
  'ReferenceError',
  'SyntaxError',
  'EvalError',
  'URIError',
  'AggregateError',
  'ApplicationFailure',
  'ActivityFailure',
  'ChildWorkflowFailure',
  'CancelledFailure',
  'TimeoutFailure',
  'TerminatedFailure',
  'ServerFailure',
  'ServiceError',
  'OperationError',
  'RequestError',
  'PaginationError',
  // The lanes' own (src/temporal/lanes.ts) and the SDK's replay errors: why an activation failed.
  'LaneMoveError',
  'LaneExpiredError',
  'LaneStoppedError',
  'ReplayInterruptedError',
  'DeterminismViolationError',
  'WorkflowError',
  'IllegalStateError',
]);

/**
 * A failure type as the service names them (`script_error`, `outbound_request_refused`): lowercase
 * words joined by underscores. A type of another shape may be a script's text (a script can throw an
 * object that looks like an operation error with a `code` of its choosing) and is not shown.
 */
function safeType(type: unknown): string | undefined {
  return typeof type === 'string' && /^[a-z]+(?:_[a-z]+){1,5}$/.test(type) && type.length <= 48 ? type : undefined;
}

/** An error of a script run, as the log shows it: its class and code, never its message or stack. */
function withheldError(error: unknown): string {
  const name = error instanceof Error && KNOWN_ERROR_NAMES.has(error.name) ? error.name : 'error';
  const code = safeType(
    (error as { code?: unknown; type?: unknown } | null)?.code ?? (error as { type?: unknown } | null)?.type,
  );
  return `${name}${code ? ` ${code}` : ''}: ${WITHHELD}`;
}

const PINO_LEVEL = { TRACE: 'trace', DEBUG: 'debug', INFO: 'info', WARN: 'warn', ERROR: 'error' } as const;

const NO_WORKFLOWS = 'No workflows registered, not polling for workflow tasks';
const isWatchWorkerNotice = (message: string, meta?: LogMetadata): boolean =>
  message === NO_WORKFLOWS && String(meta?.['taskQueue']).endsWith(watchTaskQueue(''));

class ServiceLogger implements Logger {
  constructor(private readonly target: PinoLogger) {}

  log(given: LogLevel, message: string, meta?: LogMetadata): void {
    // The watchdogs' worker serves activities only, by design (workflows/taskQueues.ts): the SDK's
    // warning that it has no workflows is news to no one, so it is a debug line.
    const level = given === 'WARN' && isWatchWorkerNotice(message, meta) ? 'DEBUG' : given;
    // Below the level nothing is built (an expected failure only ever goes down, from WARN to INFO).
    if (!this.target.isLevelEnabled(PINO_LEVEL[level])) return;
    const scriptRun = SCRIPT_WORKFLOW_TYPES.has(String(meta?.['workflowType']));
    const type: unknown = meta?.[FAILURE_TYPE_ATTRIBUTE];
    if (message === WORKFLOW_FAILED && typeof type === 'string' && EXPECTED_FAILURE_TYPES.has(type)) {
      // One line: what failed, without the error object (its stack is the runtime's, not news). The
      // reason is the script's own message: the caller got it; the log does not.
      const what = `${String(meta?.['workflowType'] ?? 'workflow')} ${String(meta?.['workflowId'] ?? '')}`.trim();
      const fields: LogMetadata = { [FAILURE_TYPE_ATTRIBUTE]: type };
      for (const name of ['namespace', 'taskQueue', 'workflowId', 'runId', 'workflowType'])
        fields[name] = meta?.[name] as unknown;
      this.write('INFO', `${WORKFLOW_FAILED} as expected: ${type}: ${what} (${WITHHELD})`, fields);
      return;
    }
    if (scriptRun && meta) {
      const kept: LogMetadata = { ...meta };
      if ('error' in kept) kept['error'] = withheldError(kept['error']);
      if (FAILURE_TYPE_ATTRIBUTE in kept) kept[FAILURE_TYPE_ATTRIBUTE] = safeType(type) ?? '(withheld)';
      this.write(level, message, kept);
      return;
    }
    this.write(level, message, meta);
  }
  // The SDK's LogTimestamp (a symbol key) is left out: JSON has no place for it, and pino stamps the line.
  private write(level: LogLevel, message: string, meta?: LogMetadata): void {
    this.target[PINO_LEVEL[level]]({ component: 'temporal', ...meta }, message);
  }
  trace(message: string, meta?: LogMetadata): void {
    this.log('TRACE', message, meta);
  }
  debug(message: string, meta?: LogMetadata): void {
    this.log('DEBUG', message, meta);
  }
  info(message: string, meta?: LogMetadata): void {
    this.log('INFO', message, meta);
  }
  warn(message: string, meta?: LogMetadata): void {
    this.log('WARN', message, meta);
  }
  error(message: string, meta?: LogMetadata): void {
    this.log('ERROR', message, meta);
  }
}

/** The Temporal SDK's logger of the service, writing to `target` (the process's logger by default). */
export function createServiceLogger(target: PinoLogger = serviceLog): Logger {
  return new ServiceLogger(target);
}

/** Where the Temporal SDK exports its own metrics (workers' slots, polls, task latencies), if anywhere. */
export type TemporalMetricsExport =
  { prometheus: { bindAddress: string } } | { otel: { url: string; http: boolean; metricsExportIntervalMs?: number } };

/**
 * Installs the Temporal runtime with the service's logger (the process's logger, at its level, unless
 * `logger` says otherwise) and, when given, the SDK's metrics exporter (docs/operations.md "Metrics");
 * call once per process, before any Worker.
 */
export function installServiceRuntime(
  options: { logger?: PinoLogger; metrics?: TemporalMetricsExport | undefined } = {},
): void {
  const { metrics } = options;
  Runtime.install({
    logger: createServiceLogger(options.logger),
    ...(metrics
      ? {
          telemetryOptions: {
            metrics:
              'prometheus' in metrics
                ? { prometheus: { bindAddress: metrics.prometheus.bindAddress, countersTotalSuffix: true } }
                : {
                    otel: {
                      url: metrics.otel.url,
                      http: metrics.otel.http,
                      metricsExportInterval: metrics.otel.metricsExportIntervalMs ?? 10_000,
                    },
                  },
          },
        }
      : {}),
  });
}
