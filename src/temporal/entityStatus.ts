/**
 * A sync entity's status read from its execution's history, for when the entity cannot answer its
 * `status` query in time (src/temporal/syncControl.ts status). Since issue 31 a sync run runs inside its
 * entity's execution, on the entity's workflow thread: a query waits for that thread, so while a script
 * computes without awaiting (until loop protection, the isolate timeout or the run watch stops it:
 * docs/architecture.md "Runaway scripts"), or while no worker serves the entity (all of them dead or
 * restarting), the query is not answered. The status is the entity's state, which is durable: the state
 * the execution started with (its input, carried by continue-as-new), then the signals it received, in
 * order, applied by the same pure functions the workflow applies (workflows/syncEntity.ts). What the
 * history cannot say is what the workflow decided since; it says whether a run began in this execution
 * and has not ended (its `beginRun` step, or a child `runSync` of an older entity, without the step or
 * event that ends it), and that run is reported `running`. A run that began in a workflow task not yet
 * recorded (its worker was killed in it: a task records its steps only when it completes or heartbeats)
 * has no step in the history; its commit in Postgres (the step ledger's commit row, `committedRun`)
 * says it began.
 */
import type { Client } from '@temporalio/client';
import type { Payload } from '@temporalio/common';
import { decodeFromPayloadsAtIndex } from '@temporalio/common/lib/internal-non-workflow/index.js';
import type { SyncMode, SyncStatus } from '../runtime/definitions.js';
import type { ManageSyncInput } from '../../workflows/manageSync.js';
import {
  applyEvent,
  createSyncEntity,
  nextStep,
  statusOf,
  type SyncEntity,
  type SyncEntityEvent,
  type SyncEntityRules,
} from '../../workflows/syncEntity.js';

/** What a run was chosen from, as its `beginRun` step answers it (activities/runtime.ts RunCommit). */
export interface RunCommit {
  events: number;
  at: number;
  created: number;
}

type HistoryEvent = NonNullable<
  Awaited<ReturnType<ReturnType<Client['workflow']['getHandle']>['fetchHistory']>>['events']
>[number];

/** The local activity a marker records (the SDK's marker `data`: `activity_type`), if it is one. */
function localActivityType(event: HistoryEvent): string | undefined {
  const marker = event.markerRecordedEventAttributes;
  if (marker?.markerName !== 'core_local_activity') return undefined;
  const data = marker.details?.['data']?.payloads?.[0]?.data;
  if (!data) return undefined;
  try {
    return (JSON.parse(Buffer.from(data).toString('utf8')) as { activity_type?: string }).activity_type;
  } catch {
    return undefined;
  }
}

function eventTime(event: HistoryEvent): number {
  const time = event.eventTime;
  if (!time) return Date.now();
  return Number(time.seconds ?? 0) * 1000 + Math.floor((time.nanos ?? 0) / 1e6);
}

/** The status of the entity's current execution as its history tells it (see the file's comment). */
export async function entityStatusFromHistory(
  client: Client,
  workflowId: string,
  committedRun?: (executionRunId: string) => Promise<RunCommit | null>,
): Promise<SyncStatus> {
  const { runId: executionRunId } = await client.workflow.getHandle(workflowId).describe();
  const events = (await client.workflow.getHandle(workflowId, executionRunId).fetchHistory()).events ?? [];
  const converter = client.options.loadedDataConverter;
  const decode = <T>(payloads: Payload[] | null | undefined): Promise<T> =>
    decodeFromPayloadsAtIndex<T>(converter, 0, payloads);
  const started = events[0];
  const attributes = started?.workflowExecutionStartedEventAttributes;
  if (!started || attributes?.workflowType?.name !== 'manageSync') {
    throw new Error(`${workflowId} is not a sync entity's execution`);
  }
  const input = await decode<ManageSyncInput>(attributes.input?.payloads);
  // Every rule as of today (an execution of version 1 asks patched() for one: the status barely differs).
  const rules: SyncEntityRules = { scheduleBeforeWebhooks: () => true };
  const fresh = (now: number): SyncEntity => createSyncEntity({ ...input, now });
  let entity = fresh(eventTime(started));
  const heard: SyncEntityEvent[] = [];
  // An execution that continues a run (issue 32) runs it from its start until the run is recorded.
  let running = input.continuation !== undefined;
  // Whether the history holds a step or event of a run of this execution (begun or ended).
  let runSeen = false;
  for (const event of events) {
    const signal = event.workflowExecutionSignaledEventAttributes;
    if (signal) {
      const applied = await signalEvent(
        signal.signalName ?? '',
        () => decode(signal.input?.payloads),
        eventTime(event),
      );
      if (applied) {
        heard.push(applied);
        entity = applyEvent(entity, applied);
      }
      continue;
    }
    const step = localActivityType(event);
    if (step === 'beginRun' || step === 'finishSyncRun' || step === 'recordSyncRun') runSeen = true;
    if (step === 'beginRun' && !running) {
      // Version 2: the run began, chosen from what its commit says (workflows/manageSync.ts RunCommit):
      // the execution's first `events` signals at the time `at`; the later ones arrived during it.
      const commit = await decode<RunCommit | undefined>(
        event.markerRecordedEventAttributes?.details?.['result']?.payloads,
      ).catch(() => undefined);
      const chosen = commit ? choose(heard, commit) : nextStep(entity, eventTime(event), rules);
      if (chosen.step.type === 'startRun') {
        entity = chosen.entity;
        if (commit) for (const later of heard.slice(commit.events)) entity = applyEvent(entity, later);
      }
      running = true;
    } else if (step === 'finishSyncRun' || step === 'recordSyncRun') {
      running = false;
    } else if (event.startChildWorkflowExecutionInitiatedEventAttributes?.workflowType?.name === 'runSync') {
      // Version 1: the run's child.
      const chosen = nextStep(entity, eventTime(event), rules);
      if (chosen.step.type === 'startRun') entity = chosen.entity;
      running = true;
    }
  }
  if (!runSeen && committedRun) {
    // The run may have begun in a workflow task that is not recorded (its worker was killed, or the task
    // is still going): its beginRun committed in Postgres all the same. A run that also ended in that
    // unrecorded task is reported running until the task is recorded (or done again by another worker).
    const commit = await committedRun(executionRunId);
    if (commit) {
      const chosen = choose(heard, commit);
      if (chosen.step.type === 'startRun') {
        entity = chosen.entity;
        for (const later of heard.slice(commit.events)) entity = applyEvent(entity, later);
      }
      running = true;
    }
  }
  const status = statusOf(entity);
  return running ? { ...status, status: 'running' } : status;

  function choose(signals: SyncEntityEvent[], commit: RunCommit): ReturnType<typeof nextStep> {
    let chosen = fresh(commit.created);
    for (const event of signals.slice(0, commit.events)) {
      chosen = applyEvent(chosen, event.type === 'resume' ? { ...event, now: Math.min(event.now, commit.at) } : event);
    }
    return nextStep(chosen, commit.at, rules);
  }
}
async function signalEvent(
  name: string,
  argument: () => Promise<unknown>,
  at: number,
): Promise<SyncEntityEvent | undefined> {
  switch (name) {
    case 'trigger':
      return { type: 'trigger', mode: ((await argument()) as { mode: SyncMode }).mode };
    case 'pause':
      return { type: 'pause' };
    case 'resume':
      return { type: 'resume', now: at };
    case 'reconfigure':
      return {
        type: 'reconfigure',
        definition: (await argument()) as Extract<SyncEntityEvent, { type: 'reconfigure' }>['definition'],
      };
    case 'webhook':
      return { type: 'webhook', event: (await argument()) as Extract<SyncEntityEvent, { type: 'webhook' }>['event'] };
    default:
      return undefined;
  }
}
