import { deployRequestSchema } from '../../../deploy/deployments.js';
import type { ApiDeps } from '../../deps.js';
import { defineRoute } from '../../route.js';
import { deploymentVersionParams } from './deploymentView.js';

export const getDeploymentRequestRoute = (deps: ApiDeps) =>
  defineRoute({
    method: 'get',
    path: '/deployments/:version/request',
    summary: 'The deploy request of a version (its service.yaml and script bundles), to deploy it again or elsewhere',
    tags: ['Deploy'],
    auth: 'secret-key',
    params: deploymentVersionParams,
    responses: { 200: { description: 'A body for POST /deploy', schema: deployRequestSchema } },
    handler: ({ environment, params }) => deps.deployments.requestFor(environment.id, params.version),
  });
