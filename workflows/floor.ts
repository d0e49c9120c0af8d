import { proxyActivities } from '@temporalio/workflow';

// Temporal's own floor for a request-response run: one workflow, one ordinary activity that does
// nothing. bench/action.ts compares an action's round trip with this on the same server.
const { noop } = proxyActivities<{ noop(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });

export async function floorRoundTrip(): Promise<void> {
  await noop();
}
