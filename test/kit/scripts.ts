/**
 * A script bundle in the compiled format (CommonJS, `module.exports.default`, what `service compile`
 * writes), from the source of its default-exported function. `ActionError` is in scope, as in a script.
 */
export function bundle(functionSource: string): string {
  return `"use strict";\nconst { ActionError } = require('integration-service/runtime');\nmodule.exports.default = ${functionSource};\n`;
}

/**
 * A sync script that walks the fake upstream's cursor-paginated `/records` (cursorPage in
 * test/kit/upstream.ts) at pages of `limit`, saving each page's items (their `fields`) as `model`.
 */
export function cursorSync(limit: number, model: string, fields: readonly string[]): string {
  const record = fields.map((field) => `${field}: r.${field}`).join(', ');
  return bundle(`async function (svc) {
  for await (const page of svc.paginate({ endpoint: '/records', paginate: { type: 'cursor', cursorPathInResponse: 'next', cursorNameInRequest: 'cursor', responsePath: 'items', limit: ${limit}, limitNameInRequest: 'limit' } })) {
    await svc.batchSave(page.map((r) => ({ ${record} })), '${model}');
  }
}`);
}

/**
 * The resumable sync of docs/scripts.md ("Resumable syncs", the cursor example): walks the fake
 * upstream's `/records` (`?cursor=&limit=`, answers `{ items, next }`) from its checkpoint at pages of
 * `limit`, saving a checkpoint after each page's batchSave as `Record`, and clears it at the end of the
 * pass. `params` adds query parameters (an object literal's entries); `begin`, `beforeSave` and `end`
 * add statements at those places.
 */
export function resumableSync({
  limit,
  params = '',
  begin = '',
  beforeSave = '',
  end = '',
}: {
  limit: number;
  params?: string;
  begin?: string;
  beforeSave?: string;
  end?: string;
}): string {
  return bundle(`async function sync(svc) {
  const checkpoint = await svc.getCheckpoint();
  ${begin}
  let cursor = checkpoint ? checkpoint.cursor : '0';
  for (;;) {
    const res = await svc.get({ endpoint: '/records', params: { cursor, limit: ${limit}${params ? `, ${params}` : ''} } });
    await svc.batchSave(res.data.items, 'Record');
    if (res.data.next === null) break;
    cursor = res.data.next;
    ${beforeSave}
    await svc.saveCheckpoint({ cursor });
  }
  ${end}
  await svc.clearCheckpoint();
}`);
}
