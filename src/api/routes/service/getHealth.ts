import { z } from 'zod';
import { ServiceError } from '../../../errors.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';

export const getHealthRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/health',
    summary: 'Liveness and database reachability (no key needed)',
    tags: ['service'],
    auth: 'none',
    responses: {
      200: { description: 'Healthy', schema: z.object({ status: z.literal('ok'), database: z.literal('ok') }) },
    },
    handler: async () => {
      try {
        await deps.database();
      } catch {
        throw new ServiceError('database_unreachable', 'The service cannot reach its database.', {
          retryable: true,
        });
      }
      return { status: 'ok' as const, database: 'ok' as const };
    },
  });
