/**
 * Inbound webhooks from external APIs: POST /webhook/:environment/:integration (docs/api.md
 * "Inbound webhooks"). No secret key: the environment is named in the path, and when the integration
 * has a webhook secret the body must carry a valid HMAC-SHA256 signature.
 *
 * - The type is read from the configured header (`type_header`), else from the dotted path
 *   `type_path` of the JSON body (default `type`).
 * - The connection is the `connection_id` query parameter when given; else the value at
 *   `connection_path` in the body, compared with `connection_field` (`connection_id`,
 *   `metadata.<key>` or `connection_config.<key>`); with neither configured, every connection of the
 *   integration receives it.
 * - Every deployed sync of the integration that lists the type in `webhook_subscriptions` gets the
 *   event by signal (syncControl.deliverWebhook); its next run sees it as `svc.webhook`
 *   ({ type, payload, receivedAt }).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import type { Pool } from '../../db/pool.js';
import { isServiceError, ServiceError } from '../../errors.js';
import type { WebhookEvent } from '../../runtime/public.js';
import type { ApiDeps } from '../deps.js';
import { readBodyBytes } from '../body.js';
import { rawBodyOf } from '../server.js';
import type { InboundWebhookSettings } from './settings.js';

export interface InboundResult {
  type: string;
  delivered: { connection_id: string; sync: string }[];
  /** Why nothing was delivered, when nothing was. */
  reason?: 'no_subscribed_sync' | 'no_matching_connection';
}

/** Reads a dotted path (`data.account.id`) of a JSON value. */
export function valueAt(value: unknown, path: string): unknown {
  let current = value;
  for (const key of path.split('.')) {
    if (typeof current !== 'object' || current === null) return undefined;
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** `sha256=<hex>` or `<hex>`: HMAC-SHA256 of the raw body with the secret, compared in constant time. */
export function verifySignature(secret: string, body: Buffer, presented: string | undefined): boolean {
  if (presented === undefined) return false;
  const hex = presented.trim().replace(/^sha256=/i, '');
  if (!/^[0-9a-f]{64}$/i.test(hex)) return false;
  const expected = createHmac('sha256', secret).update(body).digest();
  return timingSafeEqual(expected, Buffer.from(hex, 'hex'));
}

async function matchingConnections(
  db: Pool,
  scope: { environmentId: string; integrationId: string },
  field: string,
  value: string,
): Promise<string[]> {
  const [column, key] = field.split('.', 2) as [string, string | undefined];
  const condition =
    column === 'metadata'
      ? 'metadata ->> $4 = $3'
      : column === 'connection_config'
        ? 'connection_config ->> $4 = $3'
        : 'connection_id = $3';
  const { rows } = await db.query<{ connection_id: string }>(
    `SELECT connection_id FROM connections WHERE environment_id = $1 AND provider_config_key = $2 AND ${condition} ORDER BY connection_id`,
    [scope.environmentId, scope.integrationId, value, ...(key === undefined ? [] : [key])],
  );
  return rows.map((row) => row.connection_id);
}

export async function receiveWebhook(
  deps: ApiDeps,
  settingsOf: (environmentId: string, integrationId: string) => Promise<InboundWebhookSettings>,
  req: Request,
  params: { environment: string; integration: string },
): Promise<InboundResult> {
  const environment = await deps.environments.getByName(params.environment);
  if (!environment)
    throw new ServiceError('unknown_environment', `no environment named '${params.environment}'`, { status: 404 });
  const integrationId = params.integration;
  await deps.integrations.get(environment.id, integrationId);
  const settings = await settingsOf(environment.id, integrationId);
  const raw = await readBodyBytes(req, 5 * 1024 * 1024);
  if (settings.secret !== undefined && !verifySignature(settings.secret, raw, req.header(settings.signatureHeader))) {
    throw new ServiceError(
      'invalid_webhook_signature',
      `the webhook's ${settings.signatureHeader} header is missing or is not the HMAC-SHA256 of the body with the integration's webhook secret`,
      { status: 401 },
    );
  }
  let payload: unknown = rawBodyOf(req) === undefined ? undefined : req.body;
  if (payload === undefined && raw.length > 0) {
    try {
      payload = JSON.parse(raw.toString('utf8'));
    } catch {
      payload = raw.toString('utf8');
    }
  }
  const typeValue = settings.typeHeader ? req.header(settings.typeHeader) : valueAt(payload, settings.typePath);
  if (typeof typeValue !== 'string' || typeValue === '') {
    throw new ServiceError(
      'missing_webhook_type',
      settings.typeHeader
        ? `the webhook has no ${settings.typeHeader} header giving its type`
        : `the webhook body has no string at '${settings.typePath}' giving its type (set type_path or type_header of the integration's webhook settings)`,
      { status: 400 },
    );
  }
  const type = typeValue;
  const scope = { environmentId: environment.id, integrationId };
  const definitions = (await deps.deployments.syncDefinitions(environment.id, integrationId)).filter((definition) =>
    definition.webhookSubscriptions.includes(type),
  );
  if (definitions.length === 0) return { type, delivered: [], reason: 'no_subscribed_sync' };

  const queryConnection = typeof req.query['connection_id'] === 'string' ? req.query['connection_id'] : undefined;
  let connectionIds: string[];
  if (queryConnection !== undefined) {
    connectionIds = await matchingConnections(deps.db, scope, 'connection_id', queryConnection);
  } else if (settings.connectionPath !== null) {
    const value = valueAt(payload, settings.connectionPath);
    connectionIds =
      typeof value === 'string' || typeof value === 'number'
        ? await matchingConnections(deps.db, scope, settings.connectionField, String(value))
        : [];
  } else {
    connectionIds = (await deps.connections.listConnections(environment.id, { integrationId })).map(
      (c) => c.connection_id,
    );
  }
  if (connectionIds.length === 0) return { type, delivered: [], reason: 'no_matching_connection' };

  const event: WebhookEvent = { type, payload, receivedAt: new Date().toISOString() };
  const delivered: InboundResult['delivered'] = [];
  for (const connectionId of connectionIds) {
    for (const definition of definitions) {
      const ref = { ...definition, connectionId };
      try {
        await deps.syncs.deliverWebhook(ref, event);
      } catch (error) {
        if (!isServiceError(error) || error.code !== 'sync_not_found') throw error;
        await deps.syncs.ensureSync(definition, connectionId);
        await deps.syncs.deliverWebhook(ref, event);
      }
      delivered.push({ connection_id: connectionId, sync: definition.syncName });
    }
  }
  return { type, delivered };
}
