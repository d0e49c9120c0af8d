/** The deployment the API tests use: one integration with syncs (one of two models) and actions. */
import type { DeployRequest } from '../../src/deploy/deployments.js';
import { bundle } from './scripts.js';

export const INTEGRATION = 'fake-api';
export const PROVIDER = 'fake-api';

export const SERVICE_YAML = `
integrations:
  ${INTEGRATION}:
    syncs:
      issues:
        description: Issues of the fake API
        output: Issue
        endpoint: GET /issues
        sync_type: incremental
        runs: 1h
        auto_start: false
        webhook_subscriptions: [issue.updated]
      people:
        description: Users and teams
        output: [User, Team]
        endpoint: [GET /people/users, GET /people/teams]
        sync_type: full
        runs: 1h
        auto_start: false
    actions:
      create-issue:
        description: Creates an issue
        input: IssueInput
        output: Issue
        endpoint: POST /issues
      get-issue:
        description: Reads one issue
        output: Issue
        endpoint: GET /issues/{id}
models:
  Issue:
    id: string
    title: string
  IssueInput:
    title: string
  User:
    id: string
    name: string
  Team:
    id: string
    name: string
`;

export const ISSUES_SYNC = bundle(`async function (svc) {
  if (svc.webhook) {
    const issue = svc.webhook.payload.issue;
    await svc.batchSave([{ id: issue.id, title: issue.title }], 'Issue');
    await svc.log('webhook ' + svc.webhook.type + ' for ' + issue.id);
    return;
  }
  const res = await svc.get({ endpoint: '/issues' });
  await svc.batchSave(res.data.issues, 'Issue');
  await svc.log('saved ' + res.data.issues.length + ' issues', { level: 'warn' });
}`);

export const PEOPLE_SYNC = bundle(`async function (svc) {
  await svc.batchSave([{ id: 'u1', name: 'Ada' }, { id: 'u2', name: 'Linus' }], 'User');
  await svc.batchSave([{ id: 't1', name: 'Core' }], 'Team');
}`);

export const CREATE_ISSUE = bundle(`async function (svc, input) {
  if (!input || typeof input.title !== 'string' || input.title === '') throw new ActionError({ message: 'title is required', field: 'title' });
  const res = await svc.post({ endpoint: '/issues', data: { title: input.title } });
  return res.data;
}`);

export const GET_ISSUE = bundle(`async function (svc, input) {
  return { id: String(input.id), title: 'issue ' + input.id, verbose: input.verbose ?? null, connection: svc.connectionId };
}`);

export function deployRequest(overrides: { yaml?: string; scripts?: DeployRequest['scripts'] } = {}): DeployRequest {
  return {
    yaml: overrides.yaml ?? SERVICE_YAML,
    scripts: overrides.scripts ?? [
      { integration: INTEGRATION, kind: 'sync', name: 'issues', code: ISSUES_SYNC },
      { integration: INTEGRATION, kind: 'sync', name: 'people', code: PEOPLE_SYNC },
      { integration: INTEGRATION, kind: 'action', name: 'create-issue', code: CREATE_ISSUE },
      { integration: INTEGRATION, kind: 'action', name: 'get-issue', code: GET_ISSUE },
    ],
  };
}
