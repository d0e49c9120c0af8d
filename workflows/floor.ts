import { proxyActivities, proxyLocalActivities } from '@temporalio/workflow';

// Temporal's own floors, for the benchmarks to compare with on the same server. Benchmark-only: only
// the benchmarks' bundle entry (bench/workflows.ts) includes them, and they need a `noop` activity,
// which only the benchmarks register.
const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });
const { noop: localNoop } = proxyLocalActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });

/**
 * The barest round trip Temporal offers: a workflow that returns at once (one workflow task, no
 * activity). What an action is measured against (bench/action.ts, bench/api.ts).
 */
export async function floorNoop(): Promise<void> {
  return Promise.resolve();
}

/** A request-response run: one workflow, one ordinary activity that does nothing (bench/action.ts). */
export async function floorRoundTrip(): Promise<void> {
  await noop();
}

/**
 * The durable steps of a sync that fetches and saves `pages` pages, and nothing else: two local
 * activities that do nothing, one after the other, per page (bench/sync.ts).
 */
export async function floorSyncSteps(pages: number): Promise<void> {
  for (let page = 0; page < pages; page++) {
    await localNoop();
    await localNoop();
  }
}
