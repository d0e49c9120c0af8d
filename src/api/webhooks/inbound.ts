/**
 * Inbound webhooks from external APIs: POST /webhook/:environment/:integration (docs/api.md
 * "Inbound webhooks"). No secret key: the environment is named in the path, and the request must be
 * signed with the integration's webhook secret: HMAC-SHA256 of `<timestamp>.<raw body>`, the
 * timestamp (Unix seconds) in its own header and within the tolerance of now, each signature accepted
 * once. An integration without a secret gets its webhooks only where the environment accepts
 * unsigned ones (`allow_unsigned_webhooks`).
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
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';
import type { Request } from 'express';
import { isServiceError, ServiceError } from '../../errors.js';
import type { ServiceConfig } from '../../config/types.js';
import type { QueuedWebhook } from '../../runtime/definitions.js';
import type { ApiDeps } from '../deps.js';
import { readBodyBytes } from '../body.js';
import { JSON_TYPES } from '../server.js';
import { bodyCharge, MAX_JSON_TOKENS, utf8MediaType, weighJsonBody } from '../jsonBody.js';
import type { RateLimiter } from '../rateLimit.js';
import type { InboundSignatureStore } from '../../webhooks/inboundSignatures.js';
import type { InboundWebhookSettings } from '../../webhooks/settings.js';

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

/** The signature a sender puts in the signature header: hex HMAC-SHA256 of `<timestamp>.<raw body>`. */
export function signWebhook(secret: string, timestamp: string | number, body: Buffer | string): string {
  return createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest('hex');
}

/** `sha256=<hex>` or `<hex>` (signWebhook), compared in constant time. */
export function verifySignature(
  secret: string,
  timestamp: string,
  body: Buffer,
  presented: string | undefined,
): boolean {
  if (presented === undefined) return false;
  const hex = presented.trim().replace(/^sha256=/i, '');
  if (!/^[0-9a-f]{64}$/i.test(hex)) return false;
  return timingSafeEqual(Buffer.from(signWebhook(secret, timestamp, body), 'hex'), Buffer.from(hex, 'hex'));
}

/**
 * Checks that the request is the integration's own (signature, time, first use) and returns what
 * undoes the record of its signature, for a delivery that then fails (the sender's retry of the
 * same request must not be taken for a replay); undefined when it was accepted unsigned.
 */
async function authenticate(
  signatures: InboundSignatureStore,
  environment: { id: string; name: string; allowUnsignedWebhooks: boolean },
  integrationId: string,
  settings: InboundWebhookSettings,
  req: Request,
  body: Buffer,
): Promise<(() => Promise<void>) | undefined> {
  if (settings.secret === undefined) {
    if (environment.allowUnsignedWebhooks) return undefined;
    throw new ServiceError(
      'webhook_signature_required',
      `integration '${integrationId}' has no webhook secret and environment '${environment.name}' does not accept unsigned webhooks`,
    );
  }
  const timestamp = req.header(settings.timestampHeader)?.trim() ?? '';
  if (!verifySignature(settings.secret, timestamp, body, req.header(settings.signatureHeader))) {
    throw new ServiceError(
      'invalid_webhook_signature',
      `the webhook's ${settings.signatureHeader} header is missing or is not the HMAC-SHA256 of \`<${settings.timestampHeader}>.<body>\` with the integration's webhook secret`,
    );
  }
  const signedAt = /^\d{1,12}$/.test(timestamp) ? Number(timestamp) * 1000 : Number.NaN;
  if (!(Math.abs(Date.now() - signedAt) <= settings.toleranceSeconds * 1000)) {
    throw new ServiceError(
      'webhook_timestamp_out_of_tolerance',
      `the webhook was signed at ${Number.isNaN(signedAt) ? `'${timestamp.slice(0, 40)}'` : new Date(signedAt).toISOString()}, more than ${settings.toleranceSeconds} s from now: a replay, or the sender's clock is off (${settings.timestampHeader} is Unix seconds)`,
    );
  }
  const digest = createHash('sha256')
    .update(signWebhook(settings.secret, timestamp, body))
    .digest('hex');
  if (!(await signatures.record(environment.id, digest, Number(timestamp), settings.toleranceSeconds))) {
    throw new ServiceError('webhook_replayed', 'this signed webhook was already received; a signature works once');
  }
  return () => signatures.forget(environment.id, digest);
}

export async function receiveWebhook(
  deps: ApiDeps,
  settingsOf: (environmentId: string, integrationId: string) => Promise<InboundWebhookSettings>,
  req: Request,
  params: { environment: string; integration: string },
  limiter?: RateLimiter,
): Promise<InboundResult> {
  const environment = await deps.environments.getByName(params.environment);
  if (!environment) throw new ServiceError('unknown_environment', `no environment named '${params.environment}'`);
  const integrationId = params.integration;
  await deps.integrations.get(environment.id, integrationId);
  const settings = await settingsOf(environment.id, integrationId);
  const raw = await readBodyBytes(req);
  const forget = await authenticate(deps.inboundSignatures, environment, integrationId, settings, req, raw);
  try {
    // Counted once the webhook is known to be the integration's own, so that no one else can spend
    // its budget; a refused one's signature is forgotten below, so the sender's retry is taken.
    // Weighed before it is parsed (one of more JSON tokens than any body may have is refused unparsed),
    // and what parsing it took is charged to the same budget (src/api/jsonBody.ts).
    weighJsonBody(raw, MAX_JSON_TOKENS);
    const bucket = `${environment.id}\u0000${integrationId}`;
    const verdict = limiter?.take(bucket);
    if (verdict && !verdict.allowed) {
      throw new ServiceError(
        'rate_limited',
        `Too many webhooks for integration '${integrationId}' of environment '${environment.name}'; retry after ${verdict.retryAfterSeconds} s.`,
        { retryable: true, retryAfterSeconds: verdict.retryAfterSeconds },
      );
    }
    const parsing = performance.now();
    let payload: unknown;
    try {
      payload = parseWebhookBody(req, raw);
    } finally {
      limiter?.charge(bucket, bodyCharge(performance.now() - parsing));
    }
    return await deliver(deps, settings, req, payload, { environmentId: environment.id, integrationId });
  } catch (error) {
    await forget?.().catch(() => undefined);
    throw error;
  }
}

/** A webhook's body: one sent as JSON must be JSON (UTF-8); any other is read as JSON when it is, else kept as text. */
function parseWebhookBody(req: Request, raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  const json = req.is(JSON_TYPES) !== false;
  // Decoded as UTF-8 below whatever the header says; one that plainly names another charset is refused.
  if (json) utf8MediaType(req.header('content-type'));
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    if (json) throw new ServiceError('invalid_json', 'The request body is not valid JSON.');
    return raw.toString('utf8');
  }
}

async function deliver(
  deps: ApiDeps,
  settings: InboundWebhookSettings,
  req: Request,
  payload: unknown,
  scope: { environmentId: string; integrationId: string },
): Promise<InboundResult> {
  const { environmentId, integrationId } = scope;
  const typeValue = settings.typeHeader ? req.header(settings.typeHeader) : valueAt(payload, settings.typePath);
  if (typeof typeValue !== 'string' || typeValue === '') {
    throw new ServiceError(
      'missing_webhook_type',
      settings.typeHeader
        ? `the webhook has no ${settings.typeHeader} header giving its type`
        : `the webhook body has no string at '${settings.typePath}' giving its type (set type_path or type_header of the integration's webhook settings)`,
    );
  }
  const type = typeValue;
  const definitions = (await deps.deployments.syncDefinitions(environmentId, integrationId)).filter((definition) =>
    definition.webhookSubscriptions.includes(type),
  );
  if (definitions.length === 0) return { type, delivered: [], reason: 'no_subscribed_sync' };

  const queryConnection = typeof req.query['connection_id'] === 'string' ? req.query['connection_id'] : undefined;
  let connectionIds: string[];
  if (queryConnection !== undefined) {
    connectionIds = await deps.connections.connectionIdsWhere(scope, 'connection_id', queryConnection);
  } else if (settings.connectionPath !== null) {
    const value = valueAt(payload, settings.connectionPath);
    connectionIds =
      typeof value === 'string' || typeof value === 'number'
        ? await deps.connections.connectionIdsWhere(scope, settings.connectionField, String(value))
        : [];
  } else {
    connectionIds = (await deps.connections.listConnections(environmentId, { integrationId })).map(
      (c) => c.connection_id,
    );
  }
  if (connectionIds.length === 0) return { type, delivered: [], reason: 'no_matching_connection' };

  // Queued first, all or nothing (429 webhook_queue_full when a sync or the environment has no room):
  // the entities are signalled the queue entry, and the payload only when it is small.
  const targets = connectionIds.flatMap((connectionId) =>
    definitions.map((definition) => ({ connectionId, definition })),
  );
  const queued = await deps.inboundQueue.enqueue(
    scope,
    targets.map(({ connectionId, definition }) => ({ connectionId, syncName: definition.syncName })),
    payload,
  );
  const receivedAt = new Date().toISOString();
  const delivered: InboundResult['delivered'] = [];
  for (const [index, { connectionId, definition }] of targets.entries()) {
    const entry = queued.entries[index]!;
    const event: QueuedWebhook = queued.inline
      ? { type, payload, receivedAt, queueId: entry.id }
      : { type, payload: undefined, receivedAt, queueId: entry.id, stored: true };
    const ref = { ...definition, connectionId };
    try {
      try {
        await deps.syncs.deliverWebhook(ref, event);
      } catch (error) {
        if (!isServiceError(error) || error.code !== 'sync_not_found') throw error;
        await deps.syncs.ensureSync(definition, connectionId);
        await deps.syncs.deliverWebhook(ref, event);
      }
    } catch (error) {
      // What no entity was told of waits for nothing: the entries of this sync and of those after it go.
      for (let later = index; later < targets.length; later++) {
        const target = targets[later]!;
        await deps.inboundQueue
          .complete(
            { ...scope, connectionId: target.connectionId, syncName: target.definition.syncName },
            queued.entries[later]!.id,
          )
          .catch(() => undefined);
      }
      throw error;
    }
    delivered.push({ connection_id: connectionId, sync: definition.syncName });
  }
  return { type, delivered };
}

/**
 * What a deploy should say about inbound webhooks: each integration with syncs subscribed to webhooks
 * whose webhooks would be refused (no secret, unsigned not accepted), or accepted from anyone (no
 * secret, unsigned accepted).
 */
export async function webhookDeployWarnings(
  environment: { name: string; allowUnsignedWebhooks: boolean },
  config: ServiceConfig,
  hasSecret: (integrationId: string) => Promise<boolean>,
): Promise<string[]> {
  const warnings: string[] = [];
  for (const integration of config.integrations) {
    const subscribed = integration.syncs.filter((sync) => sync.webhookSubscriptions.length > 0).map((s) => s.name);
    if (subscribed.length === 0 || (await hasSecret(integration.id))) continue;
    const syncs = `sync${subscribed.length > 1 ? 's' : ''} ${subscribed.join(', ')}`;
    warnings.push(
      environment.allowUnsignedWebhooks
        ? `integration '${integration.id}' has no webhook secret, and environment '${environment.name}' accepts unsigned webhooks: anyone who knows the webhook URL can send events to ${syncs}; set a secret (PATCH /integrations/${integration.id} with webhook.secret)`
        : `integration '${integration.id}' has no webhook secret, and environment '${environment.name}' does not accept unsigned webhooks: every webhook for ${syncs} will be refused until you set a secret (PATCH /integrations/${integration.id} with webhook.secret) or allow unsigned webhooks (PATCH /environment-settings)`,
    );
  }
  return warnings;
}
