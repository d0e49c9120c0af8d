import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { deploymentVersionParams } from './deploymentView.js';

export const getDeploymentRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/deployments/:version',
    summary: 'One deployed version: its service.yaml, normalized config and the source of every script',
    tags: ['Deploy'],
    auth: 'secret-key',
    params: deploymentVersionParams,
    responses: { 200: { description: 'The version' } },
    handler: ({ environment, params }) => deps.deployments.get(environment.id, params.version),
  });
