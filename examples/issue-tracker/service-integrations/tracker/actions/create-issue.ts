import { ActionError, type CreateIssue, type Issue, type ServiceAction } from '../../models';

// The tracker's issue shape, as in syncs/issues.ts: scripts cannot import files (each is bundled on its own).
interface ApiIssue {
  id: number;
  title: string;
  body: string;
  state: string;
  labels: string[];
  created_at: string;
  updated_at: string;
}

/**
 * Opens an issue and returns it. An empty title is refused with an ActionError, which the caller
 * receives as `422 { "error_type": "action_script_failure", "payload": { … } }`.
 */
export default async function createIssue(svc: ServiceAction, input: CreateIssue): Promise<Issue> {
  if (input.title.trim() === '') throw new ActionError({ message: 'title must not be empty', field: 'title' });
  const response = await svc.post<ApiIssue>({
    endpoint: '/issues',
    data: { title: input.title, body: input.body ?? '' },
  });
  const issue = response.data;
  await svc.log(`created issue ${issue.id}`);
  return {
    id: String(issue.id),
    title: issue.title,
    body: issue.body,
    state: issue.state === 'closed' ? 'closed' : 'open',
    labels: issue.labels,
    createdAt: issue.created_at,
    updatedAt: issue.updated_at,
  };
}
