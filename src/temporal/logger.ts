/**
 * The logger of the Temporal runtime of the service's processes (the worker's log). It is the SDK's
 * DefaultLogger with one change: a run that fails the way runs are expected to fail (an action whose
 * script threw ActionError, answered to the caller as a 422) is one INFO line, not a WARN with a stack
 * trace. Other failures keep the SDK's WARN with the error. The failure type comes from the log
 * attribute that workflows/failureLog.ts adds, registered in the bundle by src/temporal/workflowBundle.ts.
 */
import { DefaultLogger, Runtime, type LogLevel, type LogMetadata, type Logger } from '@temporalio/worker';
import { FAILURE_TYPE_ATTRIBUTE } from '../../workflows/failureLog.js';

/** Failure types that are an ordinary outcome of a run, reported to whoever asked for it. */
export const EXPECTED_FAILURE_TYPES: ReadonlySet<string> = new Set(['action_script_failure']);

/** The SDK's message for a failed workflow execution (@temporalio/workflow logs.ts). */
const WORKFLOW_FAILED = 'Workflow failed';

class ServiceLogger implements Logger {
  constructor(private readonly inner: Logger) {}

  log(level: LogLevel, message: string, meta?: LogMetadata): void {
    const type: unknown = meta?.[FAILURE_TYPE_ATTRIBUTE];
    if (message === WORKFLOW_FAILED && typeof type === 'string' && EXPECTED_FAILURE_TYPES.has(type)) {
      // One line: what failed and why, without the error object (its stack is the runtime's, not news).
      const error: unknown = meta?.['error'];
      const reason = error instanceof Error ? error.message : String(error);
      const what = `${String(meta?.['workflowType'] ?? 'workflow')} ${String(meta?.['workflowId'] ?? '')}`.trim();
      this.inner.log('INFO', `${WORKFLOW_FAILED} as expected: ${type}: ${what}: ${reason}`);
      return;
    }
    this.inner.log(level, message, meta);
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

/** The service's logger over `inner` (the SDK's DefaultLogger at `level` when omitted). */
export function createServiceLogger(level: LogLevel = 'WARN', inner: Logger = new DefaultLogger(level)): Logger {
  return new ServiceLogger(inner);
}

/** Where the Temporal SDK exports its own metrics (workers' slots, polls, task latencies), if anywhere. */
export type TemporalMetricsExport =
  { prometheus: { bindAddress: string } } | { otel: { url: string; http: boolean; metricsExportIntervalMs?: number } };

/**
 * Installs the Temporal runtime with the service's logger and, when given, the SDK's metrics exporter
 * (docs/operations.md "Metrics"); call once per process, before any Worker.
 */
export function installServiceRuntime(level: LogLevel = 'WARN', metrics?: TemporalMetricsExport): void {
  Runtime.install({
    logger: createServiceLogger(level),
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
