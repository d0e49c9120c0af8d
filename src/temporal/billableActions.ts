/**
 * What a workflow execution's history costs on Temporal Cloud, by its published counting rules
 * (docs.temporal.io/cloud/actions; docs/operations.md "What a run costs" lists them as this file applies
 * them). Pure: reads the events of one history, no server.
 *
 * Some billable things leave nothing in a history and are not counted here: queries (GET /sync/status
 * asks the entity one), activity heartbeats (no activity of a run heartbeats since issue 31), and
 * workflow task heartbeats of local activities that still had no result (each would add one).
 */
import type proto from '@temporalio/proto';

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

/** The search attribute `patched()` upserts; exempt from counting by the published rules. */
const CHANGE_VERSION = 'TemporalChangeVersion';
const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/** The action kinds of the published rules that a history shows, in the order docs list them. */
export const ACTION_KINDS = [
  'workflow started',
  'timer started',
  'search attribute upsert',
  'signal',
  'update',
  'child workflow started',
  'activity',
  'local activities',
] as const;

export type ActionKind = (typeof ACTION_KINDS)[number];

export interface BillableActions {
  total: number;
  byKind: Record<ActionKind, number>;
  /** Upserts of TemporalChangeVersion alone (the `patched()` marker's): shown, not counted. */
  exemptChangeVersionUpserts: number;
}

/**
 * The billable actions of one execution's history:
 * - its start (a client's, a continue-as-new's or a parent's: the execution's first event), 1;
 * - each timer started (`sleep`, `condition` with a timeout), 1;
 * - each search attribute upsert, 1, except one that sets TemporalChangeVersion only (exempt);
 * - each signal received, 1; each update accepted or rejected, 1;
 * - each child workflow the execution starts, 1 (the child's own start is the child's first event: a
 *   child costs 2 in all);
 * - each activity, 1 per attempt (an activity scheduled counts once even if it never reported a start);
 * - local activities: 1 per workflow task whose completion recorded their markers, however many.
 */
export function billableActions(events: readonly HistoryEvent[]): BillableActions {
  const byKind = Object.fromEntries(ACTION_KINDS.map((kind) => [kind, 0])) as Record<ActionKind, number>;
  let exemptChangeVersionUpserts = 0;
  const localActivityTasks = new Set<string>();
  for (const event of events) {
    if (event.workflowExecutionStartedEventAttributes) byKind['workflow started']++;
    else if (event.timerStartedEventAttributes) byKind['timer started']++;
    else if (event.upsertWorkflowSearchAttributesEventAttributes) {
      const fields = Object.keys(
        event.upsertWorkflowSearchAttributesEventAttributes.searchAttributes?.indexedFields ?? {},
      );
      if (fields.length > 0 && fields.every((name) => name === CHANGE_VERSION)) exemptChangeVersionUpserts++;
      else byKind['search attribute upsert']++;
    } else if (event.workflowExecutionSignaledEventAttributes) byKind.signal++;
    else if (
      event.workflowExecutionUpdateAcceptedEventAttributes ||
      event.workflowExecutionUpdateRejectedEventAttributes
    ) {
      byKind.update++;
    } else if (event.startChildWorkflowExecutionInitiatedEventAttributes) byKind['child workflow started']++;
    else if (event.activityTaskScheduledEventAttributes) byKind.activity++;
    else if (event.activityTaskStartedEventAttributes) {
      // Retries are not events: the started event, written when the activity ends, holds the last attempt.
      byKind.activity += Math.max(0, (event.activityTaskStartedEventAttributes.attempt ?? 1) - 1);
    } else if (event.markerRecordedEventAttributes?.markerName === LOCAL_ACTIVITY_MARKER) {
      localActivityTasks.add(String(event.markerRecordedEventAttributes.workflowTaskCompletedEventId ?? ''));
    }
  }
  byKind['local activities'] = localActivityTasks.size;
  const total = ACTION_KINDS.reduce((sum, kind) => sum + byKind[kind], 0);
  return { total, byKind, exemptChangeVersionUpserts };
}
