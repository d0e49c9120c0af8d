import type { Label, ServiceSync } from '../../models';

/**
 * Full sync with `track_deletes`: every run saves every label; the service flags deleted the labels
 * of the cache that this run did not save. The tracker pages labels with a cursor.
 */
export default async function syncLabels(svc: ServiceSync): Promise<void> {
  let count = 0;
  for await (const page of svc.paginate<Label>({
    endpoint: '/labels',
    retries: 3,
    paginate: {
      type: 'cursor',
      cursorPathInResponse: 'next_cursor',
      cursorNameInRequest: 'cursor',
      responsePath: 'data',
      limit: 2,
      limitNameInRequest: 'limit',
    },
  })) {
    await svc.batchSave(
      page.map((label) => ({ id: label.id, name: label.name, color: label.color })),
      'Label',
    );
    count += page.length;
  }
  await svc.log(`${count} labels`);
}
