/**
 * What a failed chaos run leaves to read afterwards: a run's Temporal histories as one line per event
 * (no payload decrypted: only what Temporal holds in clear, the SDK's marker data and the readable step
 * summaries of src/runtime/stepSummary.ts), written with whatever else the test gathered to one file
 * under the OS temp dir, since CI keeps no artifacts and prints only the test's output.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { isReadableSummary } from '../../../src/runtime/stepSummary.js';

type HistoryEvent = NonNullable<Awaited<ReturnType<WorkflowHandle['fetchHistory']>>['events']>[number];

/** One history event in a line: what it is, when, and which step it is when Temporal says so in clear. */
export interface EventLine {
  id: number;
  type: string;
  at: string;
  /** The activity of a marker or scheduled activity (`httpRequest`, `saveRecords`, …). */
  activity?: string;
  /** A local activity's sequence number in its execution (its marker's data). */
  seq?: number;
  attempt?: number;
  /** The step's readable summary: `GET /records?cursor=1200&limit=100`, `batchSave Record ×100`. */
  summary?: string;
  /** The worker that took or completed a workflow or activity task (its identity names the pid). */
  identity?: string;
  /** A failure's type and (cut) message; a timeout's kind. */
  failure?: string;
  note?: string;
}

export interface ExecutionHistory {
  runId: string;
  status: string;
  events: EventLine[];
  error?: string;
}

// temporal.api.enums.v1.TimeoutType, by number.
const TIMEOUT_TYPES = ['UNSPECIFIED', 'START_TO_CLOSE', 'SCHEDULE_TO_START', 'SCHEDULE_TO_CLOSE', 'HEARTBEAT'];

const decoder = new TextDecoder();
const text = (bytes: Uint8Array | null | undefined): string => (bytes ? decoder.decode(bytes) : '');

function isoOf(time: HistoryEvent['eventTime']): string {
  if (!time) return '';
  // seconds is a Long: Number() of its decimal text.
  const ms = Number(String(time.seconds ?? 0)) * 1000 + Math.floor((time.nanos ?? 0) / 1e6);
  return new Date(ms).toISOString();
}

/** A payload's JSON when it is in clear (json/plain, not encrypted by the codec), else undefined. */
function clearJson(payload: Payload | null | undefined): unknown {
  if (!payload?.data || text(payload.metadata?.['encoding']) !== 'json/plain') return undefined;
  try {
    return JSON.parse(text(payload.data));
  } catch {
    return undefined;
  }
}

function summaryOf(event: HistoryEvent): string | undefined {
  const payload = event.userMetadata?.summary;
  if (!payload || !isReadableSummary(payload)) return undefined;
  const value = clearJson(payload);
  return typeof value === 'string' ? value : undefined;
}

function failureOf(failure: { message?: string | null; applicationFailureInfo?: { type?: string | null } | null }) {
  const type = failure.applicationFailureInfo?.type;
  return `${type ? `${type}: ` : ''}${(failure.message ?? '').slice(0, 300)}`;
}

/** The event's type from the one attributes field it carries (`markerRecordedEventAttributes` → MarkerRecorded). */
function typeOf(event: HistoryEvent): string {
  for (const [key, value] of Object.entries(event)) {
    if (key.endsWith('EventAttributes') && value) {
      const name = key.slice(0, -'EventAttributes'.length);
      return name.charAt(0).toUpperCase() + name.slice(1);
    }
  }
  return `EventType ${String(event.eventType)}`;
}

export function eventLine(event: HistoryEvent): EventLine {
  const line: EventLine = { id: Number(String(event.eventId ?? 0)), type: typeOf(event), at: isoOf(event.eventTime) };
  const summary = summaryOf(event);
  if (summary !== undefined) line.summary = summary;
  const marker = event.markerRecordedEventAttributes;
  if (marker) {
    // The SDK core writes a local activity's marker data itself, in clear; its result stays encrypted.
    const data = clearJson(marker.details?.['data']?.payloads?.[0]) as
      { activity_type?: string; seq?: number; attempt?: number } | undefined;
    line.note = marker.markerName ?? '';
    if (data?.activity_type) line.activity = data.activity_type;
    if (typeof data?.seq === 'number') line.seq = data.seq;
    if (typeof data?.attempt === 'number') line.attempt = data.attempt;
    if (marker.failure) line.failure = failureOf(marker.failure);
  }
  const scheduled = event.activityTaskScheduledEventAttributes;
  if (scheduled) {
    line.activity = scheduled.activityType?.name ?? '';
    line.note = `activityId ${scheduled.activityId ?? ''}`;
  }
  const started = event.activityTaskStartedEventAttributes ?? event.workflowTaskStartedEventAttributes;
  if (started?.identity) line.identity = started.identity;
  if (event.activityTaskStartedEventAttributes) line.attempt = event.activityTaskStartedEventAttributes.attempt ?? 0;
  const completed = event.workflowTaskCompletedEventAttributes ?? event.activityTaskCompletedEventAttributes;
  if (completed?.identity) line.identity = completed.identity;
  if (event.activityTaskCompletedEventAttributes)
    line.note = `scheduled ${String(event.activityTaskCompletedEventAttributes.scheduledEventId)}`;
  const failed =
    event.workflowTaskFailedEventAttributes ??
    event.activityTaskFailedEventAttributes ??
    event.workflowExecutionFailedEventAttributes;
  if (failed?.failure) line.failure = failureOf(failed.failure);
  if (event.workflowTaskFailedEventAttributes) {
    line.note = `cause ${String(event.workflowTaskFailedEventAttributes.cause)}`;
    line.identity = event.workflowTaskFailedEventAttributes.identity ?? '';
  }
  const timedOut = event.workflowTaskTimedOutEventAttributes ?? event.activityTaskTimedOutEventAttributes;
  if (event.workflowTaskTimedOutEventAttributes)
    line.failure = `timeout ${TIMEOUT_TYPES[event.workflowTaskTimedOutEventAttributes.timeoutType ?? 0] ?? '?'}`;
  if (event.activityTaskTimedOutEventAttributes?.failure)
    line.failure = failureOf(event.activityTaskTimedOutEventAttributes.failure);
  if (timedOut && 'scheduledEventId' in timedOut) line.note = `scheduled ${String(timedOut.scheduledEventId)}`;
  const execution = event.workflowExecutionStartedEventAttributes;
  if (execution) {
    line.attempt = execution.attempt ?? 0;
    line.note = `first run ${execution.firstExecutionRunId ?? ''}, continued from ${execution.continuedExecutionRunId || '-'}`;
  }
  const continued = event.workflowExecutionContinuedAsNewEventAttributes;
  if (continued) line.note = `new run ${continued.newExecutionRunId ?? ''}`;
  return line;
}

export function formatEventLine(line: EventLine): string {
  const parts = [`${line.id}`.padStart(5), line.at, line.type];
  if (line.activity) parts.push(line.activity);
  if (line.seq !== undefined) parts.push(`seq=${line.seq}`);
  if (line.attempt !== undefined) parts.push(`attempt=${line.attempt}`);
  if (line.summary) parts.push(`"${line.summary}"`);
  if (line.note) parts.push(`(${line.note})`);
  if (line.identity) parts.push(`by ${line.identity}`);
  if (line.failure) parts.push(`FAILURE ${line.failure.replace(/\s+/g, ' ')}`);
  return parts.join(' ');
}

/**
 * Every execution of `workflowId` (visibility's list, and each one's predecessor by continue-as-new),
 * oldest first, as event lines. Errors are kept in place of what could not be read: this runs after a
 * failure, when a server may be the reason.
 */
export async function workflowHistories(client: Client, workflowId: string): Promise<ExecutionHistory[]> {
  const runs = new Map<string, { status: string; started: number }>();
  try {
    for await (const info of client.workflow.list({ query: `WorkflowId = '${workflowId.replace(/'/g, "\\'")}'` }))
      runs.set(info.runId, { status: info.status.name, started: info.startTime.getTime() });
  } catch {
    // Visibility can lag or be down; the latest run and its predecessors are read below all the same.
  }
  try {
    const latest = await client.workflow.getHandle(workflowId).describe();
    runs.set(latest.runId, { status: latest.status.name, started: latest.startTime.getTime() });
  } catch {
    // Nothing more to add.
  }
  const histories: ExecutionHistory[] = [];
  const pending = [...runs.keys()];
  const seen = new Set<string>();
  while (pending.length > 0) {
    const runId = pending.shift()!;
    if (seen.has(runId)) continue;
    seen.add(runId);
    try {
      const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
      const events = (history.events ?? []).map(eventLine);
      const previous = history.events?.[0]?.workflowExecutionStartedEventAttributes?.continuedExecutionRunId;
      if (previous) pending.push(previous);
      histories.push({ runId, status: runs.get(runId)?.status ?? 'unknown', events });
    } catch (error) {
      histories.push({ runId, status: runs.get(runId)?.status ?? 'unknown', events: [], error: String(error) });
    }
  }
  return histories.sort((a, b) => (a.events[0]?.at ?? '').localeCompare(b.events[0]?.at ?? ''));
}

/**
 * Per execution: the events by type and the pages its saves followed (a sequential page-by-page script
 * makes one `httpRequest` and then one `saveRecords` per page): a page whose request was followed by no
 * save, or by two, is what a miscount would come from.
 */
export function historyDigest(history: ExecutionHistory): string[] {
  const byType = new Map<string, number>();
  const savesAfter = new Map<string, number>();
  let lastRequest = '(none)';
  for (const event of history.events) {
    const key = event.activity ? `${event.type}:${event.activity}` : event.type;
    byType.set(key, (byType.get(key) ?? 0) + 1);
    const isStep = event.type === 'MarkerRecorded' || event.type === 'ActivityTaskScheduled';
    if (isStep && event.activity === 'httpRequest') {
      lastRequest = event.summary ?? `event ${event.id}`;
      savesAfter.set(lastRequest, savesAfter.get(lastRequest) ?? 0);
    }
    if (isStep && event.activity === 'saveRecords') savesAfter.set(lastRequest, (savesAfter.get(lastRequest) ?? 0) + 1);
  }
  const odd = [...savesAfter].filter(([, saves]) => saves !== 1);
  return [
    `execution ${history.runId} (${history.status}): ${history.events.length} events${history.error ? `, not read: ${history.error}` : ''}`,
    `  by type: ${[...byType].map(([type, n]) => `${type}=${n}`).join(' ')}`,
    `  requests: ${savesAfter.size}; requests not followed by exactly one save: ${
      odd.length === 0 ? 'none' : odd.map(([request, saves]) => `"${request}" → ${saves}`).join('; ')
    }`,
  ];
}

/** Writes the sections to a new file under the OS temp dir and returns its path. */
export function writeDiagnostics(name: string, sections: Record<string, string>): string {
  const dir = mkdtempSync(join(tmpdir(), `${name}-diagnostics-`));
  const path = join(dir, `${name}.txt`);
  writeFileSync(
    path,
    Object.entries(sections)
      .map(([title, body]) => `==== ${title}\n${body}\n`)
      .join('\n'),
  );
  return path;
}

/** `work` with a bound: diagnostics must not hang a failing test (a server may be why it failed). */
export async function bounded<T>(what: string, ms: number, work: () => Promise<T>): Promise<T | string> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      work(),
      new Promise<string>((resolve) => {
        timer = setTimeout(() => resolve(`${what}: not done after ${ms} ms`), ms);
      }),
    ]);
  } catch (error) {
    return `${what} failed: ${String(error)}`;
  } finally {
    clearTimeout(timer);
  }
}
