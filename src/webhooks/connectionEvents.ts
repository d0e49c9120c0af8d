/**
 * Connection events to the application (docs/api.md "Connection events"): a signed webhook when a
 * connection is created or re-authorised, and when a failed token refresh marks it as needing
 * re-authorisation. (A failed sync run has its own, `type: 'sync'` with `success: false`, sent by the
 * sync entity: src/webhooks/deliveries.ts.)
 *
 * Each event is one row of webhook_deliveries, recorded here, and a `deliverWebhook` workflow with the
 * id `event:<environment>:<uuid>` that sends it with the same signing, retries and log as the sync
 * webhooks. Bodies follow the de-facto `auth` webhook: `operation` is `creation`, `override` (a
 * reconnect) or `refresh` (the failed refresh, `success: false`).
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { ConnectionSavedEvent, NeedsReauthEvent } from '../connections/resources.js';
import type { ConnectionScope } from '../connections/types.js';
import type { Pool } from '../db/pool.js';
import { lineLog } from '../log.js';
import { createWebhookDeliveryStore, type DeliverWebhookInput } from './deliveries.js';
import type { WebhookSettingsStore } from './settings.js';

export interface ConnectionEventsDeps {
  db: Pool;
  settings: WebhookSettingsStore;
  /** Starts the delivering workflow. */
  temporal: Client;
  /** The main task queue, where the worker runs deliverWebhook. */
  taskQueue: string;
  /** What the body says of the connection (its provider and auth mode); undefined when it is gone. */
  describe: (scope: ConnectionScope) => Promise<{ provider: string; authMode: string } | undefined>;
  log?: (message: string) => void;
}

export type ConnectionEventBody = Record<string, unknown> & {
  type: 'auth';
  operation: 'creation' | 'override' | 'refresh';
  success: boolean;
};

export function createConnectionEvents(deps: ConnectionEventsDeps) {
  const log = deps.log ?? lineLog('webhooks');
  const deliveries = createWebhookDeliveryStore({ db: deps.db, settings: deps.settings });

  /** Records the delivery and starts its workflow; nothing when the environment has no webhook URL. */
  async function emit(scope: ConnectionScope, body: ConnectionEventBody): Promise<string | undefined> {
    const outbound = await deps.settings.outbound(scope.environmentId);
    if (!outbound?.url) return undefined;
    const workflowId = `event:${scope.environmentId}:${randomUUID()}`;
    const { rows } = await deps.db.query<{ id: string }>(
      `INSERT INTO webhook_deliveries (delivery_key, environment_id, event_type, integration_id, connection_id, url, payload, status)
       VALUES ($1, $2, 'auth', $3, $4, $5, $6, 'pending') RETURNING id`,
      [
        `${workflowId}:${body.operation}`,
        scope.environmentId,
        scope.integrationId,
        scope.connectionId,
        outbound.url,
        JSON.stringify(body),
      ],
    );
    const id = rows[0]!.id;
    const input: DeliverWebhookInput = { deliveries: [id] };
    try {
      await deps.temporal.workflow.start('deliverWebhook', {
        taskQueue: deps.taskQueue,
        workflowId,
        args: [input],
        staticSummary: `${body.operation} event of ${scope.connectionId}`,
      });
    } catch (error) {
      const message = `could not start its delivery: ${error instanceof Error ? error.message : String(error)}`;
      await deliveries.markFailed(id, message);
      throw error;
    }
    return id;
  }

  async function base(scope: ConnectionScope): Promise<Record<string, unknown>> {
    const described = await deps.describe(scope);
    return {
      from: 'integration-service',
      type: 'auth',
      connectionId: scope.connectionId,
      providerConfigKey: scope.integrationId,
      provider: described?.provider ?? null,
      authMode: described?.authMode ?? null,
    };
  }

  /** Failures are logged, never thrown: the connection is saved (or marked) whatever the webhook does. */
  const guarded =
    <E>(what: string, send: (event: E) => Promise<unknown>) =>
    async (event: E): Promise<void> => {
      try {
        await send(event);
      } catch (error) {
        log(`the ${what} webhook was not sent: ${error instanceof Error ? error.message : String(error)}`);
      }
    };

  return {
    emit,
    /** A connection was created (`creation`) or got new credentials by a reconnect (`override`). */
    connectionSaved: guarded('connection', async ({ scope, created }: ConnectionSavedEvent) =>
      emit(scope, {
        ...(await base(scope)),
        type: 'auth',
        operation: created ? 'creation' : 'override',
        success: true,
      }),
    ),
    /** A failed refresh marked the connection as needing re-authorisation (sent once per mark). */
    needsReauth: guarded('refresh failure', async ({ scope, refreshError }: NeedsReauthEvent) =>
      emit(scope, {
        ...(await base(scope)),
        type: 'auth',
        operation: 'refresh',
        success: false,
        needsReauth: true,
        error: { type: refreshError.code, description: refreshError.message },
        failedAt: refreshError.at,
      }),
    ),
  };
}
