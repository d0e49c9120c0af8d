/**
 * How the connection routes show a connection: the de-facto shapes (a list item without credentials,
 * the full record with them), which include SPEC.md's connection record, plus what this service adds
 * (`auth_mode`, `refresh_error`).
 */
import { z } from 'zod';
import type { ConnectionSummary } from '../../../connections/connectionStore.js';
import { endUserOf } from '../../../connections/tags.js';
import type { ConnectionRecord } from '../../../runtime/public.js';
import type { ApiDeps } from '../../deps.js';

const errorSchema = z.object({
  type: z.enum(['auth', 'sync']),
  log_id: z
    .string()
    .describe('For `sync`: the id of the failed run (`GET /logs?run_id=`); for `auth`: empty, see `refresh_error`.'),
});

const endUserSchema = z
  .object({
    id: z.string(),
    email: z.string().nullable(),
    display_name: z.string().nullable(),
    tags: z.null(),
    organization: z.object({ id: z.string(), display_name: z.string().nullable() }).nullable(),
  })
  .nullable()
  .describe('Deprecated: read back from the tags `end_user_id`, `end_user_email`, … ; null without `end_user_id`.');

const refreshErrorSchema = z
  .object({ code: z.string(), message: z.string(), at: z.string(), permanent: z.boolean() })
  .nullable()
  .describe('The last failed token refresh; `permanent` means the user must reconnect.');

const needsReauthSchema = z
  .boolean()
  .describe(
    'True when the provider refused the connection’s grant on a token refresh: the user must reconnect (run the connect flow again, or import new credentials). A reconnect or a successful refresh clears it.',
  );

/** What GET /connections lists (no credentials). */
export const connectionSummarySchema = z.object({
  id: z.number(),
  connection_id: z.string(),
  provider_config_key: z.string(),
  provider: z.string(),
  created: z.string().describe('When the connection was created (ISO 8601).'),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  tags: z.record(z.string(), z.string()),
  errors: z
    .array(errorSchema)
    .describe('An `auth` error when the last token refresh failed; a `sync` error per sync whose latest run failed.'),
  end_user: endUserSchema,
  auth_mode: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  refresh_error: refreshErrorSchema,
  needs_reauth: needsReauthSchema,
});
export type ConnectionListItem = z.infer<typeof connectionSummarySchema>;

/** GET /connections/:id and POST /connections: SPEC.md's connection record and the de-facto fields. */
export const connectionRecordSchema = z.object({
  id: z.number(),
  created_at: z.string(),
  updated_at: z.string(),
  provider_config_key: z.string(),
  connection_id: z.string(),
  credentials: z
    .record(z.string(), z.unknown())
    .describe(
      'Depends on the type: OAUTH2, OAUTH1, API_KEY, BASIC; OAUTH2_CC, JWT and APP show the current access token, never the client secret or private key.',
    ),
  connection_config: z.record(z.string(), z.string()),
  account_id: z.number(),
  metadata: z.record(z.string(), z.unknown()),
  provider: z.string(),
  tags: z.record(z.string(), z.string()),
  errors: z.array(errorSchema),
  end_user: endUserSchema,
  last_fetched_at: z.string().nullable().describe('When the credentials were last obtained or refreshed.'),
  webhook_url_override: z.null().describe('Always null: webhooks go to the environment’s URL.'),
  refresh_error: refreshErrorSchema,
  needs_reauth: needsReauthSchema,
});

/** The `errors` of each connection given: its refresh failure, and each deployed sync whose latest run failed. */
export async function connectionErrors(
  deps: Pick<ApiDeps, 'runHistory' | 'deployments'>,
  environmentId: string,
  connections: readonly Pick<ConnectionSummary, 'provider_config_key' | 'connection_id' | 'refresh_error'>[],
): Promise<z.infer<typeof errorSchema>[][]> {
  const failures = await deps.runHistory.latestFailures(
    environmentId,
    connections.map((c) => ({ integrationId: c.provider_config_key, connectionId: c.connection_id })),
  );
  // A sync removed by a deploy keeps its run history; its failures are no longer the connection's.
  const deployed = new Map<string, Set<string>>();
  for (const integrationId of new Set(failures.map((failure) => failure.integrationId))) {
    const definitions = await deps.deployments.syncDefinitions(environmentId, integrationId);
    deployed.set(integrationId, new Set(definitions.map((definition) => definition.syncName)));
  }
  return connections.map((connection) => [
    ...(connection.refresh_error ? [{ type: 'auth' as const, log_id: '' }] : []),
    ...failures
      .filter(
        (failure) =>
          failure.integrationId === connection.provider_config_key &&
          failure.connectionId === connection.connection_id &&
          deployed.get(failure.integrationId)?.has(failure.syncName),
      )
      .map((failure) => ({ type: 'sync' as const, log_id: failure.runId })),
  ]);
}

/** The list items of GET /connections. */
export async function connectionListItems(
  deps: Pick<ApiDeps, 'runHistory' | 'deployments'>,
  environmentId: string,
  connections: readonly ConnectionSummary[],
): Promise<ConnectionListItem[]> {
  const errors = await connectionErrors(deps, environmentId, connections);
  return connections.map((connection, index) => ({
    id: connection.id,
    connection_id: connection.connection_id,
    provider_config_key: connection.provider_config_key,
    provider: connection.provider,
    created: connection.created_at,
    metadata: connection.metadata,
    tags: connection.tags,
    errors: errors[index] ?? [],
    end_user: endUserOf(connection.tags),
    auth_mode: connection.auth_mode,
    created_at: connection.created_at,
    updated_at: connection.updated_at,
    refresh_error: connection.refresh_error,
    needs_reauth: connection.refresh_error?.permanent ?? false,
  }));
}

/** The full record of one connection: SPEC.md's record (credentials included) and the de-facto fields. */
export async function connectionRecordView(
  deps: Pick<ApiDeps, 'runHistory' | 'deployments' | 'connections'>,
  environmentId: string,
  record: ConnectionRecord,
): Promise<z.infer<typeof connectionRecordSchema>> {
  const status = await deps.connections.getConnectionStatus({
    environmentId,
    integrationId: record.provider_config_key,
    connectionId: record.connection_id,
  });
  const [errors = []] = await connectionErrors(deps, environmentId, [status]);
  return {
    ...record,
    provider: status.provider,
    tags: status.tags,
    errors,
    end_user: endUserOf(status.tags),
    last_fetched_at: status.last_fetched_at,
    webhook_url_override: null,
    refresh_error: status.refresh_error,
    needs_reauth: status.refresh_error?.permanent ?? false,
  };
}
