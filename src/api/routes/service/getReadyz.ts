import { z } from 'zod';
import { checkReadiness, readinessBody } from '../../../health.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

const checks = z.record(z.string(), z.enum(['ok', 'down']));

/**
 * Readiness: Postgres and Temporal answer, each within 2 s. The body names the checks and their state
 * only, so it is served without a key.
 */
export const getReadyzRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/readyz',
    summary: 'Readiness: Postgres and Temporal answer (no key needed)',
    description:
      'Runs every check at once, each bounded by 2 s: `database` (SELECT 1) and `temporal` (GetSystemInfo on the ' +
      "API's own connection). 200 when all pass; 503 with the same report and an error naming what is down. The " +
      'body carries check names and ok/down only: no address, no error text.',
    tags: ['service'],
    auth: 'none',
    responses: {
      200: { description: 'Ready', schema: z.object({ status: z.literal('ready'), checks }) },
      503: {
        description: 'A dependency is down',
        schema: z.object({
          status: z.literal('not_ready'),
          checks,
          error: z.object({ code: z.literal('not_ready'), message: z.string() }),
        }),
      },
    },
    handler: async ({ res }) => {
      const report = await checkReadiness(deps.readiness ?? { database: deps.database });
      res
        .status(report.ready ? 200 : 503)
        .set('cache-control', 'no-store')
        .json(readinessBody(report));
      return undefined;
    },
  });
