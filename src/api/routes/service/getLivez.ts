import { z } from 'zod';
import { defineRoute } from '../../route.js';

/** Liveness: the process answers. Depends on nothing else, so a probe never restarts it for an outage elsewhere. */
export const getLivezRoute = () =>
  defineRoute({
    method: 'get',
    path: '/livez',
    summary: 'Liveness: the API process answers (no key needed)',
    description:
      'Answers 200 as long as the process serves HTTP; checks no dependency. Use it as the liveness probe; ' +
      'GET /readyz is the readiness probe.',
    tags: ['service'],
    auth: 'none',
    responses: { 200: { description: 'Alive', schema: z.object({ status: z.literal('ok') }) } },
    handler: async () => ({ status: 'ok' as const }),
  });
