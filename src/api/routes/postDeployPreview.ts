import { z } from 'zod';
import { compileConfig } from '../../config/index.js';
import { deployRequestSchema, type DeployRequest } from '../../deploy/deployments.js';
import { ServiceError } from '../../errors.js';
import type { ApiDeps } from '../deps.js';
import { checkGeneratedEndpoints } from '../generated.js';
import { defineRoute } from '../route.js';

/** Refuses a deploy whose generated endpoints a built-in route shadows or that collide (src/api/generated.ts). */
export function assertEndpointsDeployable(request: DeployRequest): void {
  const compiled = compileConfig(request.yaml);
  if (compiled.config === null) return; // the deploy itself reports every config problem
  const problems = checkGeneratedEndpoints(compiled.config);
  if (problems.length > 0) {
    throw new ServiceError('invalid_config', `service.yaml: ${problems.map((problem) => problem.message).join('; ')}`, {
      status: 422,
      details: problems,
    });
  }
}

export const postDeployPreviewRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'post',
    path: '/deploy/preview',
    summary: 'What a deploy would change (changes nothing)',
    tags: ['deploy'],
    auth: 'secret-key',
    body: deployRequestSchema,
    responses: {
      200: {
        description: 'The plan',
        schema: z.object({ version: z.number(), changes: z.array(z.unknown()), destructive: z.boolean() }).loose(),
      },
    },
    handler: async ({ body, environment }) => {
      assertEndpointsDeployable(body);
      return deps.deployments.preview(environment.id, body);
    },
  });
