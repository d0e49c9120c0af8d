/**
 * What the REST API is built from. Everything is passed in (STYLE.md "Dependencies are passed in"):
 * the composition root builds the stores once and tests build the same over their own database.
 */
import type { Client } from '@temporalio/client';
import type { Encryptor } from '../connections/encryption.js';
import type { EnvironmentStore } from '../connections/environmentStore.js';
import type { EnvironmentVariableManager } from '../connections/environmentVariableStore.js';
import type { IntegrationStore } from '../connections/integrationStore.js';
import type { OAuthFlow } from '../connections/oauthFlow.js';
import type { SyncFrequencyStore } from '../connections/syncFrequencyStore.js';
import type { ConnectionManager } from '../connections/types.js';
import type { Deployments } from '../deploy/deployments.js';
import type { RecordStore } from '../records/types.js';
import type { ScriptLogStore } from '../runtime/logStore.js';
import type { RunHistory } from '../runtime/runHistory.js';
import type { RunSlots } from '../runtime/runSlots.js';
import type { SyncControl } from '../temporal/syncControl.js';
import type { DashboardOptions } from '../dashboard/index.js';
import type { ReadinessCheck, ReadinessChecks } from '../health.js';
import type { CheckpointStore } from '../syncs/checkpointStore.js';
import type { WebhookDeliveryStore } from '../webhooks/deliveries.js';
import type { InboundSignatureStore } from '../webhooks/inboundSignatures.js';
import type { InboundWebhookQueue } from '../webhooks/inboundQueue.js';
import type { WebhookSettingsStore } from '../webhooks/settings.js';
import type { GeneratedRouting } from './generatedRouting.js';
import type { Logger } from './logger.js';
import type { McpSessionLimits, McpSessionRegistry } from './mcp/sessions.js';
import type { RateLimitOptions } from './rateLimit.js';

export interface ProxyOptions {
  /** First back-off of a retried proxy request, doubled on each attempt. @default 1000 */
  retryInitialMs?: number;
  /** Longest back-off (and longest `Retry-After` honoured). @default 30000 */
  retryMaximumMs?: number;
  /** Per-attempt time limit. @default 60000 */
  timeoutMs?: number;
}

export interface ApiDeps {
  /** Postgres answers (`SELECT 1`): GET /health, and GET /readyz's `database` unless `readiness` is given. */
  database: ReadinessCheck;
  environments: EnvironmentStore;
  connections: ConnectionManager;
  integrations: IntegrationStore;
  variables: EnvironmentVariableManager;
  records: RecordStore;
  logs: ScriptLogStore;
  /** The history of sync runs (GET /sync/runs). */
  runHistory: RunHistory;
  syncs: SyncControl;
  /** Per-connection sync frequencies (PUT /sync/update-connection-frequency, GET /sync/status). */
  syncFrequencies: SyncFrequencyStore;
  /** The checkpoints sync scripts saved (GET and DELETE /sync/checkpoint). */
  checkpoints: CheckpointStore;
  /** The Temporal client with the runtime's data converter: it decodes run histories (GET /runs/:run_id/history). */
  temporal: Client;
  deployments: Deployments;
  /** The routes that deployed endpoints generate, read from the current deployment (src/api/generated.ts). */
  generated: GeneratedRouting;
  /** Inbound webhook settings per integration and outbound per environment, secrets encrypted. */
  webhookSettings: WebhookSettingsStore;
  /** The signatures of accepted inbound webhooks, which refuse a replay. */
  inboundSignatures: InboundSignatureStore;
  /** Inbound webhooks waiting for their syncs: bounded per sync and per environment. */
  inboundQueue: InboundWebhookQueue;
  /** The delivery log of outbound webhooks (GET /webhook-deliveries). */
  webhookDeliveries: WebhookDeliveryStore;
  /** The runs each environment has going (actions here, sync runs on the workers), bounded per environment. */
  runSlots?: RunSlots | undefined;
  /** Actions one environment may have running at once. @default 25 */
  actionConcurrency?: number | undefined;
  /** Inbound webhooks per environment and integration (after the signature check). @default 100/s */
  webhookRateLimit?: RateLimitOptions | undefined;
  /** Encrypts the webhook secrets (inbound per integration, outbound per environment). */
  encryptor: Encryptor;
  /** The service's public URL (no trailing slash): what `webhook_url` of an integration starts with. */
  publicUrl?: string | undefined;
  /** The end user's OAuth connect flow; its router is mounted when given. */
  oauthFlow?: OAuthFlow | undefined;
  proxy?: ProxyOptions | undefined;
  /**
   * SERVICE_ADMIN_KEY: the key of the routes that create, list, rename and delete environments and
   * rotate their keys. Unset: those routes are off (403 `admin_key_not_configured`).
   */
  adminKey?: string | undefined;
  /** @default '5mb' */
  bodyLimit?: string | undefined;
  /** Bounds of the MCP sessions of POST /mcp (src/api/mcp/sessions.ts); used when `mcpSessions` is not given. */
  mcp?: McpSessionLimits | undefined;
  /**
   * The MCP sessions of this process, for a caller that closes them when it stops (createService does);
   * by default the API makes its own, whose timers run only while sessions are open.
   */
  mcpSessions?: McpSessionRegistry | undefined;
  rateLimit?: RateLimitOptions | undefined;
  logger?: Logger | undefined;
  /** What GET /readyz checks; by default the database only. createService (src/service.ts) adds Temporal. */
  readiness?: ReadinessChecks | undefined;
  /** The dashboard at /dashboard: where the Temporal Web UI is, for links from runs. */
  dashboard?: Omit<DashboardOptions, 'environments'> | undefined;
}
