// The workflow bundle entry of the benchmarks (bench/syncHarness.ts): the service's workflows plus
// Temporal's floors (workflows/floor.ts), which the production bundle (workflows/index.ts) leaves out.
export * from '../workflows/index.js';
export { floorNoop, floorRoundTrip, floorSyncSteps } from '../workflows/floor.js';
