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

/** Past this share of the history budget, a run continues at its next saveCheckpoint. */
export const SOFT_SHARE = 0.9;

/** SYNC_RUN_MAX_EXECUTIONS by default: executions one run may span (the 1001st is refused). */
export const DEFAULT_MAX_EXECUTIONS = 1000;

/**
 * A short digest of a checkpoint's key (53 bits, cyrb53): the chain keeps the digests of the places
 * its executions began from and first saved, a few bytes each in the continue-as-new input, however
 * large the checkpoints. Pure (workflow code has no crypto); a false match (about 1 in 10^10 for a run
 * of 1,000 executions) would stop a healthy run with checkpoint_not_advancing, never continue a loop.
 */
export function checkpointDigest(key: string): string {
  let h1 = 0xdeadbeef;
  let h2 = 0x41c6ce57;
  for (let i = 0; i < key.length; i++) {
    const ch = key.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return (4294967296 * (2097151 & h2) + (h1 >>> 0)).toString(36);
}

/** What an execution knows of its run's chain. */
export interface ChainContext extends Partial<ChainHandOff> {
  /** Run ids of the executions of this run before this one, oldest first; [] in its first. */
  executions: string[];
  /** Whether a next execution can take the run over (a run inside its sync entity); else limits fail it. */
  canContinue: boolean;
  /**
   * An execution of a sync entity of version 2 (recorded before the hostile review of issue 32): the
   * rules it was recorded with, so that its history replays (progress is a checkpoint unlike the
   * execution's start or a record written; the cut comes right after a saveCheckpoint; no bound on
   * executions).
   */
  legacy?: boolean;
}

/** How the chain ends an execution or fails its run at a limit. */
export class ExecutionChain {
  /** The checkpoint when this execution began (undefined: not known, the run's first execution before it read one). */
  private start: string | null | undefined;
  private current: string | null | undefined;
  private inherited: boolean;
  private readonly tracking: Record<string, number>;
  /** Digests of where the run's earlier executions began and what each first saved. */
  private readonly seen: ReadonlySet<string>;
  /** Digest of the first checkpoint this execution saved. */
  private firstSaved: string | undefined;
  /** This execution saved a checkpoint an earlier one began from or first saved: it went back. */
  private wentBack = false;
  /** This execution is ending so that the run continues: its last bookkeeping steps are not refused. */
  continuing = false;
  /** SYNC_RUN_MAX_EXECUTIONS of the worker that loaded the script (or the run's option). */
  maxExecutions = DEFAULT_MAX_EXECUTIONS;

  constructor(readonly context: ChainContext) {
    const continued = context.executions.length > 0;
    this.start = continued ? (context.checkpoint ?? null) : undefined;
    this.current = this.start;
    this.inherited = context.inherited ?? false;
    this.tracking = { ...(context.tracking ?? {}) };
    this.seen = new Set(context.seen ?? []);
  }

  /** Whether this execution follows the rules of a version 2 entity (see ChainContext.legacy). */
  get legacy(): boolean {
    return this.context.legacy === true;
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
    if (this.current === null || this.legacy) return;
    const digest = checkpointDigest(this.current);
    this.firstSaved ??= digest;
    // Saving again the place this execution began from is harmless (a script that re-saves what it read).
    if (this.current !== this.start && this.seen.has(digest)) this.wentBack = true;
  }

  /** Whether this execution saved a checkpoint of its own (the cut refuses a save only after one). */
  get savedHere(): boolean {
    return this.firstSaved !== undefined;
  }

  /**
   * Whether the run may end this execution now and continue from its last checkpoint. `wrote`: records
   * were written (version 2: added, updated or deleted) or saved at all (batchSave or batchDelete of
   * any record, unchanged ones included: a second full pass over unchanged data is progress).
   * Progress is a checkpoint that is neither where this execution began nor one where an earlier
   * execution began or that it first saved, reached without going back to such a place, with records
   * saved: a checkpoint that merely differs (its save time in it, a cursor that cycles, a script that
   * never reads its checkpoint and walks the first pages again) is not.
   */
  private progressed(wrote: boolean): boolean {
    if (this.current == null) return false;
    if (this.legacy) return wrote || this.current !== (this.start ?? null);
    return (
      wrote && !this.wentBack && this.current !== (this.start ?? null) && !this.seen.has(checkpointDigest(this.current))
    );
  }

  /**
   * At a limit (past SOFT_SHARE of the history budget or the time limit) when the script calls
   * saveCheckpoint after its execution's last stored one (version 2: right after storing it): the
   * failure that ends the execution, the run continuing from the last stored checkpoint; or, when it
   * did not get further, checkpoint_not_advancing; undefined: the script goes on (not at a limit; no
   * checkpoint yet, the history budget then decides; or records saved and the checkpoint is still the
   * one this execution began with: a script that checkpoints seldom is given until the budget).
   */
  afterSave(near: boolean, wrote: boolean): ApplicationFailure | undefined {
    if (!near || !this.context.canContinue) return undefined;
    if (this.progressed(wrote)) return this.continues('its execution reached a limit at a saveCheckpoint');
    if (this.legacy || this.current == null) return undefined;
    if (wrote && !this.wentBack && this.current === (this.start ?? null)) return undefined;
    return this.notAdvancing(
      'the run reached a limit of its execution (history budget or time) at a saveCheckpoint',
      wrote,
    );
  }

  /** At the history budget: continue, or fail saying why it cannot. */
  atLimit(wrote: boolean, usage: string): ApplicationFailure {
    if (this.context.canContinue && this.progressed(wrote))
      return this.continues(`its execution reached the history budget (${usage})`);
    if (this.context.canContinue && this.current != null) {
      return this.notAdvancing(`the run reached its execution's history budget (${usage})`, wrote);
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

  private notAdvancing(where: string, wrote: boolean): ApplicationFailure {
    const why = this.legacy
      ? 'with the checkpoint it began with and no record added, updated or deleted'
      : this.current === (this.start ?? null)
        ? 'with the checkpoint its execution began with'
        : this.wentBack || (this.current != null && this.seen.has(checkpointDigest(this.current)))
          ? 'with a checkpoint an earlier execution of the run already began from or saved (it went back)'
          : !wrote
            ? 'having saved no record in this execution'
            : 'without getting further';
    return ApplicationFailure.create({
      type: 'checkpoint_not_advancing',
      nonRetryable: true,
      message:
        `${where} ${why}: continuing would start the script again at a place it has been, forever. ` +
        'Read the checkpoint at the start (svc.getCheckpoint) and save one that points past what was saved, ' +
        'without a time or a counter in it (svc.saveCheckpoint after each batchSave; docs/scripts.md "Resumable syncs").',
    });
  }

  private continues(why: string): ApplicationFailure {
    // Nothing is unbounded: a run spans at most maxExecutions executions (SYNC_RUN_MAX_EXECUTIONS).
    if (!this.legacy && this.index + 2 > this.maxExecutions) {
      return ApplicationFailure.create({
        type: 'run_max_executions',
        nonRetryable: true,
        message:
          `${why}, but the run has had ${this.index + 1} executions, as many as SYNC_RUN_MAX_EXECUTIONS ` +
          `(${this.maxExecutions}) allows: it stops here. Its checkpoint is kept, so the next run goes on from it; ` +
          'raise SYNC_RUN_MAX_EXECUTIONS on the workers for a larger backfill (docs/operations.md).',
      });
    }
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
    const handOff: ChainHandOff = {
      checkpoint: this.current ?? this.start ?? null,
      tracking: { ...this.tracking },
      inherited: this.inherited,
    };
    if (this.legacy) return handOff;
    // Where this execution began and what it first saved join the places the next may not go back to.
    const seen = new Set(this.seen);
    if (this.start != null) seen.add(checkpointDigest(this.start));
    if (this.firstSaved !== undefined) seen.add(this.firstSaved);
    return { ...handOff, seen: [...seen] };
  }
}

/** Whether any record was added, updated or deleted. */
export function wroteAny(summaries: Record<string, WriteSummary>): boolean {
  return Object.values(summaries).some((s) => s.added + s.updated + s.deleted > 0);
}

/** Whether any record was saved or deleted at all, unchanged ones included. */
export function savedAny(summaries: Record<string, WriteSummary>): boolean {
  return Object.values(summaries).some((s) => s.added + s.updated + s.deleted + s.unchanged > 0);
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
