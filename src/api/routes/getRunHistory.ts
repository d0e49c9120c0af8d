import { z } from 'zod';
import { fetchDecodedRunHistory } from '../../temporal/decodedHistory.js';
import type { ApiDeps } from '../deps.js';
import { defineRoute } from '../route.js';
import { redactorFor } from './shared.js';

export const runHistoryParams = z.object({ run_id: z.string().min(1).max(1000) }).strict();

export const runHistorySchema = z.object({
  run_id: z.string(),
  workflow_type: z.enum(['runSync', 'runAction']),
  status: z.string().describe('Temporal’s status of the execution: COMPLETED, FAILED, RUNNING, TERMINATED, …'),
  history: z
    .record(z.string(), z.unknown())
    .describe(
      'The run’s Temporal history in Temporal’s JSON form, every payload decoded (inputs, results, step markers, failures); the connection’s credential values read `[redacted]`.',
    ),
});

export const getRunHistoryRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/runs/:run_id/history',
    summary: 'The decoded history of one sync or action run, for `service replay`',
    description:
      'A sync run’s id is `run_id` of GET /sync/runs; an action run’s is `run_id` of its log lines (GET /logs). ' +
      'A run of another environment is 404, like one that does not exist.',
    tags: ['syncs'],
    auth: 'secret-key',
    params: runHistoryParams,
    responses: {
      200: { description: 'The history', schema: runHistorySchema },
      404: { description: 'No such run in this environment' },
    },
    handler: async ({ params, environment }) => {
      const decoded = await fetchDecodedRunHistory(deps.temporal, environment.id, params.run_id, async (run) => {
        const redact = await redactorFor(deps, { environmentId: environment.id, ...run });
        return (value) => redact.value(value);
      });
      return {
        run_id: decoded.runId,
        workflow_type: decoded.workflowType,
        status: decoded.status,
        history: decoded.history,
      };
    },
  });
