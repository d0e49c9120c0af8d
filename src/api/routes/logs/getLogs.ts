import { z } from 'zod';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const logsQuery = z
  .object({
    provider_config_key: z.string().min(1).optional(),
    connection_id: z.string().min(1).optional(),
    sync: z.string().min(1).optional().describe('A sync or action name.'),
    run_id: z.string().min(1).optional(),
    level: z.enum(['debug', 'info', 'warn', 'error']).optional(),
    text: z.string().min(1).max(500).optional().describe('Case-insensitive substring of the message.'),
    before: z
      .string()
      .regex(/^\d{1,18}$/, 'a log id (a bigint)')
      .optional()
      .describe('`next_before` of the previous page.'),
    limit: z.coerce.number().int().min(1).max(1000).default(100),
  })
  .strict();

export const logLineSchema = z.object({
  id: z.string(),
  integration_id: z.string(),
  connection_id: z.string(),
  script_kind: z.enum(['sync', 'action']),
  script_name: z.string(),
  run_id: z.string(),
  level: z.string(),
  message: z.string(),
  logged_at: z.string(),
});

export const getLogsRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/logs',
    summary: 'Search the svc.log lines of scripts, newest first',
    tags: ['logs'],
    auth: 'secret-key',
    query: logsQuery,
    responses: {
      200: {
        description: 'One page of log lines',
        schema: z.object({ logs: z.array(logLineSchema), next_before: z.string().nullable() }),
      },
    },
    handler: async ({ query, environment }) => {
      const lines = await deps.logs.search({
        environmentId: environment.id,
        integrationId: query.provider_config_key,
        connectionId: query.connection_id,
        scriptName: query.sync,
        runId: query.run_id,
        level: query.level,
        text: query.text,
        beforeId: query.before,
        limit: query.limit,
      });
      const last = lines[lines.length - 1];
      return {
        logs: lines.map((line) => ({
          id: line.id,
          integration_id: line.integrationId,
          connection_id: line.connectionId,
          script_kind: line.scriptKind,
          script_name: line.scriptName,
          run_id: line.runId,
          level: line.level,
          message: line.message,
          logged_at: line.loggedAt,
        })),
        next_before: lines.length === query.limit && last ? last.id : null,
      };
    },
  });
