/**
 * Schemas and helpers the route files share: the records query (also used by generated sync
 * endpoints), the sync selection bodies of /sync/* (the selecting is src/syncs/selection.ts), and the checks that keep one connection's data away from
 * another's.
 */
import type { Response } from 'express';
import { z } from 'zod';
import type { ConnectionScope } from '../../connections/types.js';
import { ServiceError } from '../../errors.js';
import type { LastAction, RecordScope } from '../../records/types.js';
import { redactSecrets, redactValue } from '../../runtime/redaction.js';
import type { ApiDeps } from '../deps.js';

const LAST_ACTIONS: Record<string, LastAction> = { added: 'ADDED', updated: 'UPDATED', deleted: 'DELETED' };

/** `a,b` or `?x=a&x=b`: a list of non-empty strings. */
export const commaList = z
  .union([z.string(), z.array(z.string())])
  .transform((value) => (Array.isArray(value) ? value : value.split(',')).map((item) => item.trim()))
  .pipe(z.array(z.string().min(1, 'empty item in the list')).min(1));

/** The largest page the service answers; a larger `limit` (up to the de-facto 10,000) gets this many. */
export const MAX_RECORDS_PAGE = 1000;

const instant = z.iso
  .datetime({ offset: true })
  .transform((value) => new Date(value))
  .optional();

/** The query of GET /records without `model`: what every generated sync endpoint takes too. */
export const recordsPageQuery = z
  .object({
    cursor: z.string().min(1).optional().describe('`next_cursor` of the previous page, or a record’s cursor.'),
    limit: z.coerce
      .number()
      .int()
      .min(1)
      .max(10_000)
      .transform((limit) => Math.min(limit, MAX_RECORDS_PAGE))
      .optional()
      .describe(
        `Page size; default 100. Up to 10,000 is accepted and at most ${MAX_RECORDS_PAGE} records come back: keep paging while \`next_cursor\` is not null.`,
      ),
    modified_after: instant.describe('Only records modified at or after this ISO 8601 instant.'),
    modifiedAfter: instant.describe('Same as `modified_after`.'),
    delta: instant.describe('Deprecated: same as `modified_after`.'),
    filter: z
      .string()
      .regex(
        /^(added|updated|deleted)(,(added|updated|deleted))*$/i,
        'one or more of added, updated, deleted, comma-separated',
      )
      .transform((value) => [...new Set(value.toLowerCase().split(','))].flatMap((name) => LAST_ACTIONS[name] ?? []))
      .optional()
      .describe('Only records whose last action is one of these: added, updated, deleted (comma-separated).'),
    ids: commaList.optional().describe('Only these record ids (comma-separated, or repeated).'),
    variant: z
      .literal('base', { error: 'model variants are not supported: only the default variant `base` exists' })
      .optional()
      .describe('Only `base`, the default variant.'),
  })
  .strict();
export type RecordsPageQuery = z.output<typeof recordsPageQuery>;

export const recordsPageSchema = z.object({
  records: z.array(z.record(z.string(), z.unknown())).describe('Records, each with `_service_metadata`.'),
  next_cursor: z.string().nullable(),
});

/** The scope of the Connection-Id and Provider-Config-Key headers; set on every connection-scoped route. */
export function scopeOf(connection: ConnectionScope | undefined): ConnectionScope {
  if (!connection) throw new ServiceError('missing_connection_headers', 'Send Connection-Id and Provider-Config-Key.');
  return connection;
}

/**
 * Redacts the connection's credential values (every form, src/runtime/redaction.ts) from what the
 * API is about to show: a run's failure message, an action's error. A script may have put one there.
 */
export async function redactorFor(
  deps: ApiDeps,
  scope: ConnectionScope,
): Promise<{ text: (text: string) => string; value: <T>(value: T) => T }> {
  const secrets = (await deps.connections.credentialSecrets(scope)) ?? [];
  return { text: (text) => redactSecrets(text, secrets), value: (value) => redactValue(value, secrets) };
}

/**
 * Fails with 404 `unknown_connection` unless the connection exists in the caller's environment: a
 * key of one environment never reaches another environment's connection, and a typo is told apart
 * from an empty result.
 */
export async function assertConnection(deps: ApiDeps, scope: ConnectionScope): Promise<void> {
  await deps.connections.getMetadata(scope);
}

/**
 * Answers one page of records (200, `{ records, next_cursor }`). The checks that turn a typo into a
 * clear error (the connection exists in the caller's environment, the model is deployed) run only
 * when the page is empty: a connection's records exist only while it does (deleting it erases them)
 * and only for deployed models (removing a sync erases them), so a non-empty page needs no check, and
 * the common read is one statement (the store keeps the ids of scopes it has read). The page is sent as
 * the store writes it (RecordStore.listRecordsJson: each record's stored JSON text with its metadata
 * spliced in), never parsed and serialized again on the way (issue 31).
 */
export async function sendRecords(
  deps: ApiDeps,
  res: Response,
  scope: RecordScope,
  model: string,
  query: RecordsPageQuery,
  whenEmpty: () => Promise<void> = async () => undefined,
): Promise<undefined> {
  const given = [query.modified_after, query.modifiedAfter, query.delta].filter((value) => value !== undefined);
  if (given.some((value) => value.getTime() !== given[0]?.getTime())) {
    throw new ServiceError(
      'invalid_request',
      'Invalid request: query.modified_after, query.modifiedAfter and query.delta disagree; send one of them',
    );
  }
  const page = await deps.records.listRecordsJson({
    ...scope,
    model,
    cursor: query.cursor,
    limit: query.limit,
    modifiedAfter: query.modified_after ?? query.modifiedAfter ?? query.delta,
    filter: query.filter,
    ids: query.ids,
  });
  if (page.count === 0) {
    await assertConnection(deps, scope);
    await whenEmpty();
  }
  // Header and page in one write: Express's send would copy the page into a Buffer, and Node would
  // then write the header and that Buffer as two (issue 31: the socket write was the API's largest cost).
  res.writeHead(200, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(page.json),
  });
  res.end(page.json);
  return undefined;
}

/**
 * A sync named in a /sync/* call: its name, or `name::variant` / `{ name, variant }` as the de-facto
 * API writes a sync variant. This service has one variant per sync, the de-facto default `base`; any
 * other is refused rather than ignored, since acting on the base sync instead would be the wrong sync.
 */
const BASE_VARIANT = 'base';
const variantProblem = (variant: string) =>
  `sync variants are not supported: only the default variant '${BASE_VARIANT}' exists, not '${variant}'`;

function syncNameOf(text: string, ctx: z.RefinementCtx): string {
  const [name = '', variant, ...rest] = text.split('::');
  if (variant !== undefined && (variant !== BASE_VARIANT || rest.length > 0)) {
    ctx.addIssue({ code: 'custom', message: variantProblem(text.slice(name.length + 2)) });
  }
  return name;
}

/** `syncs` of GET /sync/status and /sync/runs: `a,b` (or repeated), `*` for every sync; `name::base` allowed. */
export const syncNameList = commaList.transform((names, ctx) => names.map((name) => syncNameOf(name, ctx)));

const syncItem = z.union([
  z.string().min(1),
  z
    .object({ name: z.string().min(1), variant: z.string().min(1).optional() })
    .strict()
    .superRefine((sync, ctx) => {
      if (sync.variant !== undefined && sync.variant !== BASE_VARIANT) {
        ctx.addIssue({ code: 'custom', path: ['variant'], message: variantProblem(sync.variant) });
      }
    })
    .transform((sync) => sync.name),
]);

/**
 * `syncs` of /sync/trigger, /sync/pause and /sync/start: a list of names (or `{ name, variant }`
 * objects), where an empty list means every sync of the integration, as in the de-facto API; also
 * `a,b` or `*` as a string.
 */
export const syncSelection = z
  .union([z.string(), z.array(syncItem).max(256)])
  .transform((value, ctx) => {
    if (typeof value !== 'string') return value.length === 0 ? ['*'] : value;
    const names = value.split(',').map((item) => item.trim());
    if (names.some((name) => name === '')) ctx.addIssue({ code: 'custom', message: 'empty item in the list' });
    return names.map((name) => syncNameOf(name, ctx));
  })
  .describe(
    'Sync names: a list (an empty list, or `*`, means every sync of the integration), `{ name, variant }` objects with the default variant `base`, or a comma-separated string.',
  );

/** The body of /sync/pause and /sync/start (and, extended, /sync/trigger). */
export const syncSelectionBody = z
  .object({
    provider_config_key: z.string().min(1),
    connection_id: z
      .string()
      .min(1)
      .optional()
      .describe('One connection; every connection of the integration when omitted.'),
    syncs: syncSelection,
  })
  .strict();

export const syncActionResult = z.object({
  success: z.literal(true),
  syncs: z
    .array(z.object({ connection_id: z.string(), name: z.string() }))
    .describe('One entry per (connection, sync) touched.'),
});

/** The connection record query flags: `true`/`false` (or 1/0) strings. */
export const booleanFlag = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1');

/** The body of POST (replace) and PATCH (merge) /connections/metadata. */
export const metadataBody = z
  .object({
    connection_id: z
      .union([z.string().min(1), z.array(z.string().min(1)).min(1).max(1000)])
      .describe('A connection id, or a list: then every one of them, or none when one does not exist.'),
    provider_config_key: z.string().min(1),
    metadata: z.record(z.string(), z.unknown()),
  })
  .strict();
