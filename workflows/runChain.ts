/**
 * A sync run that spans several executions (issue 32). Temporal bounds one execution's history
 * (docs/architecture.md "History cost per operation"), so a run whose script checkpoints
 * (svc.saveCheckpoint) is ended cleanly at a step boundary when its execution nears the bound or a time
 * limit, and the sync entity's next execution starts the script again at once; the script reads its
 * checkpoint and goes on. The chain of executions is one run for the API, metrics and webhooks.
 *
 * This file keeps what an execution knows of its chain and decides, at each limit, whether the run
 * continues, fails for want of a checkpoint, or fails because its checkpoint does not advance (which
 * would otherwise loop forever while looking busy).
 */
import { ApplicationFailure } from '@temporalio/common';
import type { WriteSummary } from '../src/records/types.js';
import type { ChainHandOff } from '../src/runtime/definitions.js';
import { checkpointKey, type Checkpoint } from '../src/syncs/checkpoint.js';

/** The failure type that ends an execution whose run continues in the next one (never a run's outcome). */
export const RUN_CONTINUES = 'run_continues';

/** Past this share of the history budget, a run continues after its next saveCheckpoint. */
export const SOFT_SHARE = 0.9;

/** What an execution knows of its run's chain. */
export interface ChainContext extends Partial<ChainHandOff> {
  /** Run ids of the executions of this run before this one, oldest first; [] in its first. */
  executions: string[];
  /** Whether a next execution can take the run over (a run inside its sync entity); else limits fail it. */
  canContinue: boolean;
}

/** How the chain ends an execution or fails its run at a limit. */
export class ExecutionChain {
  /** The checkpoint when this execution began (undefined: not known, the run's first execution before it read one). */
  private start: string | null | undefined;
  private current: string | null | undefined;
  private inherited: boolean;
  private readonly tracking: Record<string, number>;
  /** This execution is ending so that the run continues: its last bookkeeping steps are not refused. */
  continuing = false;

  constructor(readonly context: ChainContext) {
    const continued = context.executions.length > 0;
    this.start = continued ? (context.checkpoint ?? null) : undefined;
    this.current = this.start;
    this.inherited = context.inherited ?? false;
    this.tracking = { ...(context.tracking ?? {}) };
  }

  /** The index of this execution in its chain. */
  get index(): number {
    return this.context.executions.length;
  }

  read(checkpoint: Checkpoint | null): void {
    const key = checkpointKey(checkpoint);
    if (this.start === undefined) {
      this.start = key;
      // The first read of the run's first execution found a checkpoint: the run resumes an earlier one.
      if (key !== null && this.index === 0) this.inherited = true;
    }
    if (this.current === undefined) this.current = key;
  }

  saved(checkpoint: Checkpoint | null): void {
    if (this.start === undefined) this.start = null;
    this.current = checkpointKey(checkpoint);
  }

  /** Whether the run may end this execution now and continue: it has a checkpoint and moved since it began. */
  private progressed(wrote: boolean): boolean {
    return this.current != null && (wrote || this.current !== (this.start ?? null));
  }

  /** After a saveCheckpoint: the failure that ends the execution when it is near a limit and may continue. */
  afterSave(near: boolean, wrote: boolean): ApplicationFailure | undefined {
    if (!near || !this.context.canContinue || !this.progressed(wrote)) return undefined;
    return this.continues('its execution neared a limit after a saveCheckpoint');
  }

  /** At the history budget: continue, or fail saying why it cannot. */
  atLimit(wrote: boolean, usage: string): ApplicationFailure {
    if (this.context.canContinue && this.progressed(wrote))
      return this.continues(`its execution reached the history budget (${usage})`);
    if (this.context.canContinue && this.current != null) {
      return ApplicationFailure.create({
        type: 'checkpoint_not_advancing',
        nonRetryable: true,
        message:
          `the run reached its execution's history budget (${usage}) with the checkpoint it began with and no record ` +
          'added, updated or deleted: continuing would start the script again at the same place forever. ' +
          'Save a checkpoint that points past what was saved (svc.saveCheckpoint after each batchSave; docs/scripts.md "Resumable syncs").',
      });
    }
    return ApplicationFailure.create({
      type: 'run_history_limit',
      nonRetryable: true,
      message:
        `the run stopped at its execution's history budget (${usage}), near Temporal's limit of 51,200 events / 50 MiB, ` +
        'with no checkpoint to continue from. Save a checkpoint after each page (svc.saveCheckpoint) and read it at ' +
        'the start (svc.getCheckpoint): the run then continues in a next execution (docs/scripts.md "Resumable syncs"); ' +
        'or fetch larger pages and save larger batches.',
    });
  }

  private continues(why: string): ApplicationFailure {
    this.continuing = true;
    return ApplicationFailure.create({
      type: RUN_CONTINUES,
      nonRetryable: true,
      message: `the run continues in a next execution: ${why}`,
    });
  }

  /** svc.trackDeletesStart: the pass starts here unless it started in an earlier execution of this run. */
  trackStart(model: string): void {
    this.tracking[model] ??= this.index;
  }

  /**
   * svc.trackDeletesEnd: the earlier executions whose saves count as seen, or undefined when the pass
   * did not start in this run (then nothing may be inferred).
   */
  trackEnd(model: string): string[] | undefined {
    const from = this.tracking[model];
    if (from === undefined) return undefined;
    delete this.tracking[model];
    return this.context.executions.slice(from);
  }

  /** Whether `track_deletes` may infer deletes at the run's end: the run saw the whole data set itself. */
  get sawEverything(): boolean {
    return !this.inherited;
  }

  handOff(): ChainHandOff {
    return {
      checkpoint: this.current ?? this.start ?? null,
      tracking: { ...this.tracking },
      inherited: this.inherited,
    };
  }
}

/** Whether any record was added, updated or deleted. */
export function wroteAny(summaries: Record<string, WriteSummary>): boolean {
  return Object.values(summaries).some((s) => s.added + s.updated + s.deleted > 0);
}

/** Adds a model's counts into per model counts. */
export function addSummary(into: Record<string, WriteSummary>, model: string, summary: WriteSummary): void {
  const current = into[model] ?? { added: 0, updated: 0, deleted: 0, unchanged: 0 };
  into[model] = {
    added: current.added + summary.added,
    updated: current.updated + summary.updated,
    deleted: current.deleted + summary.deleted,
    unchanged: current.unchanged + summary.unchanged,
  };
}

/** Two runs' per model counts added up. */
export function addSummaries(
  a: Record<string, WriteSummary>,
  b: Record<string, WriteSummary>,
): Record<string, WriteSummary> {
  const sum: Record<string, WriteSummary> = { ...a };
  for (const [model, summary] of Object.entries(b)) addSummary(sum, model, summary);
  return sum;
}
