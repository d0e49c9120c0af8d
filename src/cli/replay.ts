/**
 * `service replay <run-id>`: replays a finished or failed run of the service, step by step, with the
 * local script in place of the deployed one. The run's history comes from the API with every payload
 * decoded (GET /runs/:run_id/history, src/temporal/decodedHistory.ts), so no key of the service is
 * needed here. The `loadScript` step's recorded result (the deployed bundle; from run model version 4,
 * the `script` in the `beginRun` step's result) is swapped for the local
 * script, compiled and instrumented as the worker does (activities/runtime.ts loadScript), and the
 * service's run workflow replays the history in this process (Worker.runReplayHistory): nothing is
 * sent anywhere, every step answers with what the run recorded.
 *
 * Divergence is found two ways: Temporal's own check (a step of another kind, a step too many or too
 * few: DeterminismViolationError), and the step names (src/runtime/stepSummary.ts), which the replay's
 * steps must repeat exactly: a request to another endpoint is a step of the same kind, which Temporal
 * does not tell apart, but its name differs. The replay's step names are read where the worker encodes
 * its commands: a payload codec sees every step's summary with the step's id.
 */
import type { Payload, PayloadCodec } from '@temporalio/common';
import type { temporal } from '@temporalio/proto';
import { Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { createClient, ServiceApiError, type RunHistory } from '../client/index.js';
import { budgetFunctionName, instrumentScript } from '../runtime/instrument.js';
import { FAILURE_CONVERTER_PATH } from '../runtime/payloadStorage.js';
import { answerText, isHttpAnswer } from '../runtime/httpAnswer.js';
import type { HttpAnswer, RecordedResponse } from '../runtime/svcTypes.js';
import { isReadableSummary } from '../runtime/stepSummary.js';
import { historyFromObject, jsonOf } from '../temporal/decodedHistory.js';
import { createLogger } from '../log.js';
import { installServiceRuntime } from '../temporal/logger.js';
import { RUNTIME_WORKER_DEFAULTS, bundleWorkflows } from '../temporal/worker.js';
import { resolveTarget } from './deploy.js';
import { scriptKey } from './localRun.js';
import { loadLocalBuild } from './localTools.js';
import type { CliIo } from './io.js';

export interface ReplayOptions {
  root: string;
  env: string | undefined;
  runId: string;
  json: boolean;
}

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
type Failure = temporal.api.failure.v1.IFailure;

/** One step of the recorded run: an svc operation or a bookkeeping step of the run workflow. */
export interface RecordedStep {
  step: number;
  /** `local:<id>` for a local activity (a marker), `activity:<id>` for an ordinary one. */
  key: string;
  /** The activity: httpRequest, saveRecords, … */
  type: string;
  /** The step's readable name, as the Web UI shows it: `GET /issues?page=1`. */
  summary: string;
  result?: unknown;
  failure?: string;
}

export interface Divergence {
  step: number;
  recorded: string;
  local: string | null;
  message: string;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const SHOWN_RESULT = 160;

function summaryOf(event: HistoryEvent): string {
  const summary = event.userMetadata?.summary;
  const value = summary ? jsonOf(summary) : undefined;
  return typeof value === 'string' ? value : '';
}

/** A failure's message (decoded from its encoded attributes), with its type and its causes'. */
export function failureText(failure: Failure | null | undefined): string {
  const parts: string[] = [];
  for (let current = failure, depth = 0; current && depth < 5; current = current.cause, depth++) {
    const encoded = jsonOf(current.encodedAttributes) as { message?: unknown } | undefined;
    const message = typeof encoded?.message === 'string' ? encoded.message : (current.message ?? '');
    const type = current.applicationFailureInfo?.type;
    if (message !== '' && !parts.some((part) => part.includes(message))) {
      parts.push(type ? `${type}: ${message}` : message);
    }
  }
  return parts.join(' ← ');
}

function detailPayload(
  details: Record<string, temporal.api.common.v1.IPayloads> | null | undefined,
  key: string,
): temporal.api.common.v1.IPayload | undefined {
  return details?.[key]?.payloads?.[0] ?? undefined;
}

/** The steps of a recorded run, in the order the run took them. */
export function recordedSteps(history: temporal.api.history.v1.IHistory): RecordedStep[] {
  const steps: RecordedStep[] = [];
  const events = history.events ?? [];
  const byScheduled = new Map<string, HistoryEvent>();
  for (const event of events) {
    const scheduled =
      event.activityTaskCompletedEventAttributes?.scheduledEventId ??
      event.activityTaskFailedEventAttributes?.scheduledEventId ??
      event.activityTaskTimedOutEventAttributes?.scheduledEventId;
    if (scheduled !== undefined && scheduled !== null) byScheduled.set(String(scheduled), event);
  }
  for (const event of events) {
    const marker = event.markerRecordedEventAttributes;
    const data = marker
      ? (jsonOf(detailPayload(marker.details, 'data')) as Record<string, unknown> | undefined)
      : undefined;
    if (marker && data && typeof data['activity_type'] === 'string') {
      const step: RecordedStep = {
        step: steps.length + 1,
        key: `local:${String(data['activity_id'])}`,
        type: data['activity_type'],
        summary: summaryOf(event),
      };
      if (marker.failure) step.failure = failureText(marker.failure);
      else step.result = jsonOf(detailPayload(marker.details, 'result'));
      steps.push(step);
      continue;
    }
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled) {
      const step: RecordedStep = {
        step: steps.length + 1,
        key: `activity:${scheduled.activityId ?? ''}`,
        type: scheduled.activityType?.name ?? '',
        summary: summaryOf(event),
      };
      const end = byScheduled.get(String(event.eventId));
      if (end?.activityTaskCompletedEventAttributes) {
        step.result = jsonOf(end.activityTaskCompletedEventAttributes.result?.payloads?.[0]);
      } else if (end?.activityTaskFailedEventAttributes) {
        step.failure = failureText(end.activityTaskFailedEventAttributes.failure);
      } else if (end?.activityTaskTimedOutEventAttributes) {
        step.failure = `timed out: ${failureText(end.activityTaskTimedOutEventAttributes.failure)}`;
      }
      steps.push(step);
    }
  }
  return steps;
}

/** How the recorded run ended. */
export function recordedOutcome(history: temporal.api.history.v1.IHistory): { ok: boolean; text: string } {
  for (const event of [...(history.events ?? [])].reverse()) {
    // A run in its sync entity's execution (issue 31): the next execution's input carries its outcome.
    const continued = event.workflowExecutionContinuedAsNewEventAttributes;
    if (continued) return entityRunOutcome(jsonOf(continued.input?.payloads?.[0]));
    const completed = event.workflowExecutionCompletedEventAttributes;
    if (completed) return { ok: true, text: shorten(jsonOf(completed.result?.payloads?.[0])) };
    const failed = event.workflowExecutionFailedEventAttributes;
    if (failed) return { ok: false, text: failureText(failed.failure) };
    if (event.workflowExecutionTerminatedEventAttributes) {
      return { ok: false, text: `terminated: ${event.workflowExecutionTerminatedEventAttributes.reason ?? ''}` };
    }
    if (event.workflowExecutionTimedOutEventAttributes) return { ok: false, text: 'timed out' };
    if (event.workflowExecutionCanceledEventAttributes) return { ok: false, text: 'cancelled' };
  }
  return { ok: false, text: 'still running' };
}

/** The outcome of an entity's run, from the input it continued as new with (workflows/manageSync.ts). */
function entityRunOutcome(input: unknown): { ok: boolean; text: string } {
  const next = input as
    | {
        unfinished?: { record?: { error?: { code?: string; message?: string } | null } | null };
        state?: { latestError?: { code?: string; message?: string } | null; latestResult?: unknown };
      }
    | undefined;
  const error = next?.unfinished?.record?.error ?? next?.state?.latestError;
  if (error) return { ok: false, text: `${error.code ?? ''}: ${error.message ?? ''}` };
  return { ok: true, text: shorten(next?.state?.latestResult) };
}

function shorten(value: unknown): string {
  if (value === undefined) return '';
  const text = JSON.stringify(value) ?? '';
  return text.length > SHOWN_RESULT ? `${text.slice(0, SHOWN_RESULT - 1)}…` : text;
}

/** What a step's result looks like on one line: a response by its status and body, others as JSON. */
function resultText(step: RecordedStep): string {
  if (step.failure !== undefined) return `failed: ${step.failure}`;
  if (loadsScript(step)) return 'the local script';
  if (step.result === undefined || step.result === null) return 'done';
  const response = step.result as { status?: unknown; data?: unknown; body?: unknown } | undefined;
  if (step.type === 'httpRequest' && response && typeof response.status === 'number') {
    // Recorded as its text since issue 31 (src/runtime/httpAnswer.ts), parsed in older histories.
    if (isHttpAnswer(step.result as RecordedResponse)) {
      const text = answerText(step.result as HttpAnswer);
      return `${response.status} ${text.length > SHOWN_RESULT ? `${text.slice(0, SHOWN_RESULT - 1)}…` : text}`;
    }
    return `${response.status} ${shorten(response.data)}`;
  }
  return shorten(step.result);
}

/** The step that loaded the run's script: `loadScript`, or `beginRun` with the script (run model version 4). */
function loadsScript(step: RecordedStep): boolean {
  if (step.type === 'loadScript') return true;
  return step.type === 'beginRun' && typeof (step.result as { script?: unknown } | undefined)?.script === 'object';
}

/**
 * Puts the local script in the place of the deployed one: the result of the run's `loadScript` step
 * becomes the local bundle, instrumented as the worker instruments a deployed one; so does the bundle
 * an action was handed with its input (src/temporal/syncControl.ts), which took no such step.
 */
export function swapScript(history: temporal.api.history.v1.IHistory, code: string): void {
  const budget = budgetFunctionName(code);
  const instrumented = instrumentScript(code, budget);
  const payload: Payload = {
    metadata: { encoding: encoder.encode('json/plain') },
    data: encoder.encode(JSON.stringify({ code: instrumented, budget })),
  };
  const events = history.events ?? [];
  let swapped = false;
  const started = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  const input = started
    ? (jsonOf(started) as { definition?: { scriptHash?: string }; script?: unknown } | undefined)
    : undefined;
  if (started && input?.script && input.definition?.scriptHash) {
    const script = { hash: input.definition.scriptHash, code: instrumented, budget };
    started.data = encoder.encode(JSON.stringify({ ...input, script }));
    swapped = true;
  }
  for (const event of events) {
    const marker = event.markerRecordedEventAttributes;
    const data = marker
      ? (jsonOf(detailPayload(marker.details, 'data')) as Record<string, unknown> | undefined)
      : undefined;
    if (marker?.details && data?.['activity_type'] === 'loadScript' && marker.details['result']) {
      marker.details['result'] = { payloads: [payload] };
      swapped = true;
    }
    const result = marker?.details?.['result'];
    if (marker?.details && data?.['activity_type'] === 'beginRun' && result) {
      const begun = jsonOf(detailPayload(marker.details, 'result')) as { script?: { hash?: unknown } } | undefined;
      if (begun?.script) {
        const script = { ...begun.script, code: instrumented, budget };
        marker.details['result'] = {
          payloads: [{ ...payload, data: encoder.encode(JSON.stringify({ ...begun, script })) }],
        };
        swapped = true;
      }
    }
    const scheduled = event.activityTaskScheduledEventAttributes;
    if (scheduled?.activityType?.name === 'loadScript') {
      for (const end of events) {
        const completed = end.activityTaskCompletedEventAttributes;
        if (completed && String(completed.scheduledEventId) === String(event.eventId)) {
          completed.result = { payloads: [payload] };
          swapped = true;
        }
      }
    }
  }
  if (!swapped) throw new Error('the run never loaded its script (it failed before its first step): nothing to replay');
}

/** A codec that changes nothing and notes the name of every step the replayed workflow schedules. */
function stepNameRecorder(): { codec: PayloadCodec; names: Map<string, string> } {
  const names = new Map<string, string>();
  return {
    names,
    codec: {
      encode(payloads, context) {
        if (context?.type === 'activity' && context.activityId !== undefined) {
          const key = `${context.isLocal ? 'local' : 'activity'}:${context.activityId}`;
          // A step without a summary (a bookkeeping step of the run) is noted by its arguments.
          if (!names.has(key)) names.set(key, '');
          for (const payload of payloads) {
            if (!isReadableSummary(payload)) continue;
            names.set(key, JSON.parse(decoder.decode(payload.data ?? new Uint8Array())) as string);
          }
        }
        return Promise.resolve(payloads);
      },
      decode: (payloads) => Promise.resolve(payloads),
    },
  };
}

/** The first recorded step the replay did not repeat by name; null when it repeated every one. */
export function firstDivergence(steps: RecordedStep[], replayed: Map<string, string>): Divergence | null {
  for (const step of steps) {
    // A bookkeeping step without a name or arguments is invisible here; Temporal checks its kind.
    if (step.summary === '') continue;
    const local = replayed.get(step.key);
    if (local === undefined) {
      return {
        step: step.step,
        recorded: step.summary,
        local: null,
        message: `the local script does not take step ${step.step} (${step.summary || step.type})`,
      };
    }
    if (local !== step.summary) {
      return {
        step: step.step,
        recorded: step.summary,
        local,
        message: `the recorded run took '${step.summary}', the local script takes '${local}'`,
      };
    }
  }
  return null;
}

const errorText = (error: unknown): string => (error instanceof Error ? error.message : JSON.stringify(error));

let runtimeInstalled = false;

export async function replay(options: ReplayOptions, io: CliIo): Promise<number> {
  const target = resolveTarget(options, io);
  if (typeof target === 'string') {
    io.err(`service replay: ${target}\n`);
    return 1;
  }
  // With --json only the result goes to stdout; progress goes to stderr.
  const progress: CliIo = options.json ? { ...io, out: (text) => io.err(text) } : io;
  const api = createClient({ baseUrl: target.url, secretKey: target.secretKey });
  let run: RunHistory;
  try {
    run = await api.runs.history(options.runId);
  } catch (error) {
    if (error instanceof ServiceApiError) {
      io.err(`service replay: run '${options.runId}': ${error.message}\n`);
      return 1;
    }
    if (error instanceof TypeError && /fetch failed/.test(error.message)) {
      io.err(`service replay: cannot reach the service at ${target.url}. Start it (npm start) or set SERVICE_URL.\n`);
      return 1;
    }
    throw error;
  }
  if (run.payloads_withheld) {
    io.err(
      `service replay: run '${options.runId}': its connection was deleted, so the service withholds the run's recorded values (they may hold its credentials, which can no longer be redacted); replay a run of a connection that exists\n`,
    );
    return 1;
  }
  const history = historyFromObject(run.history);
  const input = jsonOf(history.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0]) as
    { definition?: { integrationId?: string; syncName?: string; actionName?: string } } | undefined;
  const kind = run.workflow_type === 'runAction' ? 'action' : 'sync';
  const integration = input?.definition?.integrationId ?? '';
  const name = (kind === 'sync' ? input?.definition?.syncName : input?.definition?.actionName) ?? '';

  const build = await loadLocalBuild(options.root, progress);
  if (build === null) return 1;
  const code = build.bundles(integration).get(scriptKey(kind, name));
  if (code === undefined) {
    io.err(`service replay: the run is of the ${kind} '${name}' of ${integration}; service.yaml has no such ${kind}\n`);
    return 1;
  }
  swapScript(history, code);
  const steps = recordedSteps(history);
  const outcome = recordedOutcome(history);

  progress.out(
    `replaying ${run.workflow_type} ${options.runId} (${run.status.toLowerCase()}) with the local ${integration}/${scriptKey(kind, name)}\n`,
  );
  if (!runtimeInstalled) {
    runtimeInstalled = true;
    try {
      installServiceRuntime({ logger: createLogger({ level: 'error', destination: 'stderr' }) });
    } catch {
      // Installed already by the host process (a test harness): its logger stays.
    }
  }
  const bundlePath = { ...process.env, ...io.env }['SERVICE_WORKFLOW_BUNDLE'];
  const recorder = stepNameRecorder();
  let replayError: unknown;
  try {
    await Worker.runReplayHistory(
      {
        workflowBundle: bundlePath ? { codePath: bundlePath } : await bundleWorkflows(),
        workflowFailureErrorTypes: RUNTIME_WORKER_DEFAULTS.workflowFailureErrorTypes,
        dataConverter: { failureConverterPath: FAILURE_CONVERTER_PATH, payloadCodecs: [recorder.codec] },
        replayName: 'service-replay',
      },
      history,
      // A sync run in its entity's execution replays as that entity (its id names its steps' scope).
      run.workflow_id ?? options.runId,
    );
  } catch (error) {
    replayError = error;
  }
  const divergence = firstDivergence(steps, recorder.names);
  const nondeterminism = replayError instanceof DeterminismViolationError;
  let verdict: Divergence | null = divergence;
  if (!verdict && nondeterminism) {
    // Every step matched by name, yet Temporal refuses: the run ends otherwise (it fails, or not).
    verdict = {
      step: steps.length + 1,
      recorded: outcome.ok ? 'the run completes' : `the run fails: ${outcome.text}`,
      local: null,
      message: `the local script ends the run otherwise than the recorded run (${outcome.ok ? 'which completed' : `which failed: ${outcome.text}`})`,
    };
  }
  const otherError = replayError !== undefined && !nondeterminism ? replayError : undefined;

  if (options.json) {
    io.out(
      `${JSON.stringify(
        {
          run_id: options.runId,
          workflow_type: run.workflow_type,
          status: run.status,
          steps: steps.map((recorded) => {
            const { key: _key, ...step } = recorded;
            return loadsScript(recorded) ? { ...step, result: 'the local script' } : step;
          }),
          outcome,
          divergence: verdict,
          error: otherError === undefined ? null : errorText(otherError),
          temporal: nondeterminism && replayError instanceof Error ? replayError.message : null,
        },
        null,
        2,
      )}\n`,
    );
  } else {
    for (const step of steps) {
      const marker = verdict?.step === step.step ? '✗' : ' ';
      io.out(`${marker}${String(step.step).padStart(4)}  ${step.summary || step.type}  → ${resultText(step)}\n`);
      if (verdict?.step === step.step) break;
    }
    if (!verdict)
      io.out(
        `\nthe recorded run ${outcome.ok ? `completed${outcome.text ? `: ${outcome.text}` : ''}` : `failed: ${outcome.text}`}\n`,
      );
  }
  if (verdict) {
    io.err(`\nthe local script diverges from the recorded run at step ${verdict.step} (${verdict.message})\n`);
    if (nondeterminism && replayError instanceof Error) io.err(`Temporal: ${replayError.message}\n`);
    return 1;
  }
  if (otherError !== undefined) {
    io.err(`\nthe replay failed: ${errorText(otherError)}\n`);
    return 1;
  }
  if (!options.json) io.out(`the local script repeats all ${steps.length} steps of the recorded run\n`);
  return 0;
}
