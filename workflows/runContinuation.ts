/**
 * The sync entity's side of a run that spans executions (issue 32): what an execution whose run
 * continues hands the next one (its continue-as-new input), and the run's outcome as the totals of all
 * its executions. Pure; workflows/manageSync.ts calls it at the run's end.
 */
import type { WriteSummary } from '../src/records/types.js';
import type { ChainHandOff, RunSyncInput } from '../src/runtime/definitions.js';
import { addSummaries } from './runChain.js';
import type { SyncEntity, SyncEntityRun, SyncEntityStep, SyncRunOutcome } from './syncEntity.js';

/** The run under way, as the execution that ended for it to continue hands it to the next one. */
export interface RunContinuation {
  /** The entity's run (its id is the first execution's, for the API and webhooks). */
  run: SyncEntityRun;
  input: RunSyncInput;
  summary: string;
  /** Run ids of the executions so far, oldest first. */
  executions: string[];
  /** Per model, what they wrote in all. */
  models: Record<string, WriteSummary>;
  operations: number;
  /** The start of the run's first execution: the run's start (and the next lastSyncDate). */
  startedAt: string;
  handOff: ChainHandOff;
  /**
   * Whether a pause stops the run at its next continuation (version 3): the run began while the sync
   * was not paused, or a pause arrived during it. Absent (version 2): not stopped.
   */
  stopOnPause?: boolean;
}

/** The next execution's continuation, when this execution ended so that its run continues. */
export function continuationOf(
  entity: SyncEntity,
  step: Extract<SyncEntityStep, { type: 'startRun' }>,
  runId: string,
  outcome: SyncRunOutcome,
  continued: RunContinuation | undefined,
): RunContinuation | undefined {
  const handOff = outcome.ok ? outcome.result.continuation : undefined;
  if (!outcome.ok || !handOff || !entity.run) return undefined;
  const result = outcome.result;
  return {
    run: entity.run,
    input: step.input,
    summary: step.summary,
    executions: [...(continued?.executions ?? []), runId],
    models: addSummaries(continued?.models ?? {}, result.models),
    operations: (continued?.operations ?? 0) + result.operations,
    startedAt: continued?.startedAt ?? result.startedAt,
    handOff,
  };
}

/** The outcome of a run that continued: its executions' totals under the run's own id. */
export function chainOutcome(
  entity: SyncEntity,
  outcome: SyncRunOutcome,
  runId: string,
  continued: RunContinuation,
): SyncRunOutcome {
  const executions = [...continued.executions, runId];
  if (!outcome.ok) {
    return {
      ok: false,
      error: { ...outcome.error, message: `${outcome.error.message} (in execution ${executions.length} of the run)` },
      executions,
    };
  }
  const result = outcome.result;
  return {
    ok: true,
    result: {
      ...result,
      runId: entity.run?.runId ?? continued.run.runId,
      startedAt: continued.startedAt,
      models: addSummaries(continued.models, result.models),
      operations: continued.operations + result.operations,
      executions,
    },
  };
}
