import { describe, expect, it } from 'vitest';
import type proto from '@temporalio/proto';
import { billableActions } from './billableActions.js';

type HistoryEvent = proto.temporal.api.history.v1.IHistoryEvent;

const started: HistoryEvent = { workflowExecutionStartedEventAttributes: {} };
// Event ids are Longs in a fetched history; only their text matters here.
const eventId = (n: number) => ({ toString: () => String(n) }) as unknown as NonNullable<HistoryEvent['eventId']>;
const task = (id: number): HistoryEvent[] => [
  { eventId: eventId(id), workflowTaskScheduledEventAttributes: {} },
  { eventId: eventId(id + 1), workflowTaskStartedEventAttributes: {} },
  { eventId: eventId(id + 2), workflowTaskCompletedEventAttributes: {} },
];
const marker = (task: number): HistoryEvent => ({
  markerRecordedEventAttributes: { markerName: 'core_local_activity', workflowTaskCompletedEventId: eventId(task) },
});
const upsert = (...names: string[]): HistoryEvent => ({
  upsertWorkflowSearchAttributesEventAttributes: {
    searchAttributes: { indexedFields: Object.fromEntries(names.map((name) => [name, {}])) },
  },
});

describe('billable actions of a history (Temporal Cloud rules)', () => {
  it('counts the floor of a run: a start, a timer, one task of local activities, nothing for workflow tasks', () => {
    const events: HistoryEvent[] = [
      started,
      ...task(2),
      { timerStartedEventAttributes: {} },
      { timerFiredEventAttributes: {} },
      ...task(7),
      marker(9),
      marker(9),
      marker(9),
      { workflowExecutionContinuedAsNewEventAttributes: {} },
    ];
    const counted = billableActions(events);
    expect(counted.total).toBe(3);
    expect(counted.byKind).toMatchObject({ 'workflow started': 1, 'timer started': 1, 'local activities': 1 });
  });

  it('counts local activities once per workflow task that recorded them', () => {
    const counted = billableActions([started, ...task(2), marker(4), marker(4), ...task(7), marker(9)]);
    expect(counted.byKind['local activities']).toBe(2);
  });

  it('counts a child once in the parent (its own start counts in its history), activities per attempt, signals', () => {
    const counted = billableActions([
      started,
      { workflowExecutionSignaledEventAttributes: { signalName: 'trigger' } },
      { startChildWorkflowExecutionInitiatedEventAttributes: {} },
      { childWorkflowExecutionStartedEventAttributes: {} },
      { activityTaskScheduledEventAttributes: {} },
      { activityTaskStartedEventAttributes: { attempt: 3 } },
      { activityTaskCompletedEventAttributes: {} },
      // Scheduled, never reported started (cancelled while running): counted once.
      { activityTaskScheduledEventAttributes: {} },
    ]);
    expect(counted.byKind).toMatchObject({
      signal: 1,
      'child workflow started': 1,
      activity: 4,
      'workflow started': 1,
    });
    expect(counted.total).toBe(7);
  });

  it('exempts the TemporalChangeVersion upsert of patched(), counts any other upsert', () => {
    const counted = billableActions([
      started,
      upsert('TemporalChangeVersion'),
      upsert('CustomKeyword', 'TemporalChangeVersion'),
    ]);
    expect(counted.exemptChangeVersionUpserts).toBe(1);
    expect(counted.byKind['search attribute upsert']).toBe(1);
    expect(counted.total).toBe(2);
  });
});
