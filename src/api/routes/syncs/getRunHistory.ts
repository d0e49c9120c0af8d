import { z } from 'zod';
import { fetchDecodedRunHistory } from '../../../temporal/decodedHistory.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { redactValue } from '../../../runtime/redaction.js';

/** How far the clocks of Temporal and Postgres may be apart (see the handler). */
const CLOCK_SKEW_MS = 2_000;

export const runHistoryParams = z.object({ run_id: z.string().min(1).max(1000) }).strict();

export const runHistorySchema = z.object({
  run_id: z.string(),
  workflow_type: z
    .enum(['manageSync', 'runSync', 'runAction'])
    .describe(
      'A sync run is the execution of its sync entity (`manageSync`) it ran in; before issue 31, a `runSync` of its own.',
    ),
  workflow_id: z.string().describe('The workflow id of that execution (the sync entity’s, or the run’s own).'),
  status: z.string().describe('Temporal’s status of the execution: COMPLETED, FAILED, RUNNING, TERMINATED, …'),
  history: z
    .record(z.string(), z.unknown())
    .describe(
      'The run’s Temporal history in Temporal’s JSON form, every payload decoded (inputs, results, step markers, failures); the connection’s credential values, and those the run read, read `[redacted]`.',
    ),
  payloads_withheld: z
    .boolean()
    .describe(
      'True when the run’s connection was deleted (or replaced by a new connection of that id): every payload then reads a `[withheld: …]` string, as the credentials in them could no longer be redacted.',
    ),
});

export const getRunHistoryRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/runs/:run_id/history',
    summary: 'The decoded history of one sync or action run, for `service replay`',
    description:
      'A sync run’s id is `run_id` of GET /sync/runs; an action run’s is `run_id` of its log lines (GET /logs). ' +
      'A run of another environment is 404, like one that does not exist. ' +
      'Once the run’s connection is deleted, its payloads are withheld (`payloads_withheld`).',
    tags: ['syncs'],
    auth: 'secret-key',
    params: runHistoryParams,
    responses: {
      200: { description: 'The history', schema: runHistorySchema },
      404: { description: 'No such run in this environment' },
    },
    handler: async ({ params, environment }) => {
      const decoded = await fetchDecodedRunHistory(
        deps.temporal,
        environment.id,
        params.run_id,
        async ({ integrationId, connectionId, startedAt, recordIds }) => {
          const secrets = await deps.connections.credentialSecrets(
            { environmentId: environment.id, integrationId, connectionId },
            {
              // The connection the run read, when it read one; else one made before the run started.
              // Temporal's and Postgres's clocks may differ a little: a connection made up to this much
              // after the start is taken as the run's own (a sync that a new connection started).
              ids: recordIds,
              existedAt: new Date(startedAt.getTime() + CLOCK_SKEW_MS),
            },
          );
          return secrets === undefined ? undefined : (value) => redactValue(value, secrets);
        },
      );
      return {
        run_id: decoded.runId,
        workflow_type: decoded.workflowType,
        workflow_id: decoded.workflowId,
        status: decoded.status,
        history: decoded.history,
        payloads_withheld: decoded.payloadsWithheld,
      };
    },
  });
