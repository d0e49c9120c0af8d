import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { commaList } from '../shared.js';

export const syncRunsQuery = z
  .object({
    provider_config_key: z.string().min(1),
    connection_id: z.string().min(1).optional(),
    syncs: commaList.optional().describe('Sync names, comma-separated; all syncs when omitted.'),
    limit: z.coerce.number().int().min(1).max(500).default(50),
  })
  .strict();

const writeSummary = z.object({ added: z.number(), updated: z.number(), deleted: z.number(), unchanged: z.number() });

export const syncRunsSchema = z.object({
  runs: z.array(
    z.object({
      run_id: z.string().describe('The run workflow’s id, as the Temporal Web UI shows it.'),
      sync: z.string(),
      connection_id: z.string(),
      mode: z.string(),
      status: z.enum(['success', 'failed']),
      started_at: z.string(),
      finished_at: z.string(),
      duration_ms: z.number(),
      models: z.record(z.string(), writeSummary),
      error: z.object({ code: z.string(), message: z.string() }).nullable(),
      executions: z
        .array(z.string())
        .describe(
          'The run’s executions, oldest first: one, unless the run continued past the limits of one (checkpoints, docs/scripts.md "Resumable syncs"). Each is a run id of GET /runs/:run_id/history and of the logs.',
        ),
    }),
  ),
});

export const getSyncRunsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/sync/runs',
    summary: 'Recent runs of syncs, newest first: duration, per-model counts, failures',
    tags: ['syncs'],
    auth: 'secret-key',
    query: syncRunsQuery,
    responses: { 200: { description: 'The runs', schema: syncRunsSchema } },
    handler: async ({ query, environment }) => {
      const runs = await deps.runHistory.list({
        environmentId: environment.id,
        integrationId: query.provider_config_key,
        connectionId: query.connection_id,
        syncNames: query.syncs === undefined || query.syncs.includes('*') ? undefined : query.syncs,
        limit: query.limit,
      });
      return {
        runs: runs.map((run) => ({
          run_id: run.runId,
          sync: run.syncName,
          connection_id: run.connectionId,
          mode: run.mode,
          status: run.status,
          started_at: run.startedAt,
          finished_at: run.finishedAt,
          duration_ms: Date.parse(run.finishedAt) - Date.parse(run.startedAt),
          models: run.models,
          error: run.error,
          executions: run.executions ?? [run.runId],
        })),
      };
    },
  });
