import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities/index.js';

// A health check should answer quickly or say it cannot: one short attempt window, a few retries
// so that a worker restart in the middle does not fail the check.
const { recordHealthCheck } = proxyActivities<Activities>({
  startToCloseTimeout: '10 seconds',
  retry: { maximumAttempts: 3, initialInterval: '200 milliseconds' },
});

/** Round trip through Temporal, a worker and Postgres; returns the row the activity wrote and read back. */
export async function checkHealth(token: string): Promise<Awaited<ReturnType<Activities['recordHealthCheck']>>> {
  return recordHealthCheck(token);
}
