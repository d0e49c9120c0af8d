import type { Issue, ServiceSync } from '../../models';

/** An issue as the tracker's API returns it. Scripts cannot import files (each is bundled on its own), so
 * this shape and its mapping are repeated in actions/create-issue.ts. */
interface ApiIssue {
  id: number;
  title: string;
  body: string;
  state: string;
  labels: string[];
  created_at: string;
  updated_at: string;
}

/** Kept in the connection metadata: the tracker's clock when the last completed run started. */
interface SyncState {
  issues_changed_since?: string;
}

/**
 * Incremental sync with deletions. The first run (and a full resync, where `lastSyncDate` is undefined)
 * fetches every issue; later runs fetch only issues updated since the previous run, and mark deleted the
 * ids the tracker lists as deleted since then. The "since" is the tracker's own clock (its
 * `X-Server-Time` header), kept in the metadata, so a skew between the two machines loses nothing.
 */
export default async function syncIssues(svc: ServiceSync): Promise<void> {
  const state = await svc.getMetadata<SyncState>();
  const since = svc.lastSyncDate === undefined ? undefined : state.issues_changed_since;

  // The tracker's time before anything is read: whatever changes from now on is seen by the next run.
  const probe = await svc.get<{ ids: number[] }>({
    endpoint: '/issues/deleted',
    params: { since: since ?? new Date(0).toISOString() },
    retries: 3,
  });
  const startedAt = probe.headers['x-server-time'] ?? new Date().toISOString();

  let saved = 0;
  for await (const page of svc.paginate<ApiIssue>({
    endpoint: '/issues',
    params: since === undefined ? {} : { updated_since: since },
    retries: 3,
    paginate: { type: 'link', limit: 2, limitNameInRequest: 'per_page' },
  })) {
    await svc.batchSave(page.map(toIssue), 'Issue');
    saved += page.length;
  }

  const deleted = since === undefined ? [] : probe.data.ids;
  if (deleted.length > 0)
    await svc.batchDelete(
      deleted.map((id) => ({ id: String(id) })),
      'Issue',
    );

  await svc.updateMetadata({ issues_changed_since: startedAt });
  await svc.log(
    `${since === undefined ? 'full fetch' : `changes since ${since}`}: ${saved} saved, ${deleted.length} deleted`,
  );
}

function toIssue(issue: ApiIssue): Issue {
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
