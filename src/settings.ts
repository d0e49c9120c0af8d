/**
 * The service's settings, read from the environment once at boot and failing fast with every problem
 * listed. docs/operations.md documents each variable.
 */
import ms from 'ms';
import { z } from 'zod';
import { SECRET_KEY_PATTERN } from './connections/environmentStore.js';
import { ServiceError } from './errors.js';
import { LOG_LEVELS } from './log.js';
import { DEFAULT_EXECUTION_OPERATION_LIMIT } from './runtime/definitions.js';
import { OutboundPolicy } from './runtime/outbound.js';

const port = z.coerce.number().int().min(0).max(65_535);

/** A retention in the ms notation (`30d`, `12h`), at least `min`; `forever` keeps the rows. */
function retention(fallback: string, min: number, minText: string) {
  return z
    .string()
    .default(fallback)
    .transform((text, ctx): number | null => {
      const value = text.trim();
      if (/^forever$/i.test(value)) return null;
      const millis = /^\d+(\.\d+)?\s*(s|m|h|d|w|y|seconds?|minutes?|hours?|days?|weeks?|years?)$/i.test(value)
        ? ms(value as ms.StringValue)
        : Number.NaN;
      if (!Number.isFinite(millis)) {
        ctx.addIssue({
          code: 'custom',
          message: `expected a duration such as "30d" or "12h", or "forever"; got "${text}"`,
        });
        return z.NEVER;
      }
      if (millis < min) {
        ctx.addIssue({ code: 'custom', message: `must be at least ${minText} (got "${text}")` });
        return z.NEVER;
      }
      return millis;
    });
}

/** SYNC_EXECUTION_TIME_LIMIT: a duration in the ms notation from 10 s to 24 h, or `none` (null). */
export function executionTimeLimit(fallback: string) {
  return z
    .string()
    .default(fallback)
    .transform((text, ctx): number | null => {
      // Empty is unset (Compose passes `${VAR:-}` as '').
      const value = text.trim() || fallback;
      if (/^none$/i.test(value)) return null;
      const millis = /^\d+(\.\d+)?\s*(ms|s|m|h|seconds?|minutes?|hours?)$/i.test(value)
        ? ms(value as ms.StringValue)
        : Number.NaN;
      if (!Number.isFinite(millis) || millis < 10_000 || millis > 24 * 3_600_000) {
        ctx.addIssue({
          code: 'custom',
          message: `expected a duration from 10s to 24h such as "30m" or "2h", or "none"; got "${text}"`,
        });
        return z.NEVER;
      }
      return millis;
    });
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/** Addresses that only this machine reaches: a metrics listener there needs no token. */
export function isLoopbackHost(host: string): boolean {
  return host === 'localhost' || host === '::1' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);
}

/** A path or name that an empty value leaves unset (Compose passes `${VAR:-}` as ''). */
const optionalText = z
  .string()
  .optional()
  .transform((value) => (value === undefined || value.trim() === '' ? undefined : value));

const hostPort = z
  .string()
  .regex(/^(\[[0-9a-f:.]+\]|[A-Za-z0-9.-]+):\d{1,5}$/i, 'expected host:port, such as 127.0.0.1:9465');

export const settingsSchema = z.object({
  /** Postgres of the service; when unset, `npm start` creates a local cluster. */
  DATABASE_URL: z.string().min(1).optional(),
  /** Temporal frontend `host:port`; when unset, `npm start` starts a dev server. */
  TEMPORAL_ADDRESS: z.string().min(1).optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('integration-service'),
  /**
   * TLS to the Temporal frontend (src/temporal/connection.ts): `true` or `false`; by default on when a
   * certificate, a server name or an API key is set. The names are those of Temporal's own
   * environment configuration (the `temporal` CLI reads the same).
   */
  TEMPORAL_TLS: z.enum(['true', 'false']).optional(),
  /** PEM file of the CA(s) that signed the server's certificate; the system's roots when unset. */
  TEMPORAL_TLS_SERVER_CA_CERT_PATH: z.string().min(1).optional(),
  /** PEM files of the client certificate and its private key, for mTLS; both or neither. */
  TEMPORAL_TLS_CLIENT_CERT_PATH: z.string().min(1).optional(),
  TEMPORAL_TLS_CLIENT_KEY_PATH: z.string().min(1).optional(),
  /** Name to verify the server's certificate against, when it differs from the address's host. */
  TEMPORAL_TLS_SERVER_NAME: z.string().min(1).optional(),
  /** API key (Temporal Cloud), sent as `Authorization: Bearer …` on every call. */
  TEMPORAL_API_KEY: z.string().min(1).optional(),
  /** Which processes this one runs: both (one machine), or only the API or only the worker (scaling out). */
  SERVICE_ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  /**
   * With SERVICE_ROLE=all, a second worker child that waits, loaded and connected, to take over when the
   * active one dies (src/main.ts `superviseWorker`). `false` saves its memory and slows recovery.
   */
  SERVICE_WORKER_STANDBY: z.enum(['true', 'false']).default('true'),
  /**
   * A worker process (SERVICE_ROLE=worker, or the worker child of `all`) serves GET /livez and
   * GET /readyz on this port of HOST when set (docs/operations.md, "Health and readiness").
   */
  SERVICE_HEALTH_PORT: port.optional(),
  /** The level of the service's log (src/log.ts): its access log, background jobs and the Temporal runtime. */
  SERVICE_LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  /** Name of the environment a new deployment's first API start creates. */
  SERVICE_FIRST_ENVIRONMENT: z
    .string()
    .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'lower-case letters, digits, _ and -, at most 63 characters')
    .default('production'),
  /** The secret key of that first environment, declared by the operator instead of generated. */
  SERVICE_FIRST_SECRET_KEY: z
    .string()
    .regex(SECRET_KEY_PATTERN, 'sk_ followed by 32 to 197 letters, digits, - or _ (echo "sk_$(openssl rand -hex 32)")')
    .optional(),
  /** Port and interface of the API server. */
  PORT: port.default(3003),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** Public base URL of the API, as end users' browsers and OAuth providers reach it. */
  SERVICE_PUBLIC_URL: z.url().optional(),
  /** The redirect URI registered with OAuth providers; by default SERVICE_PUBLIC_URL + `/oauth/callback`. */
  SERVICE_CALLBACK_URL: z.url().optional(),
  /**
   * Base64 of the 32-byte key that encrypts secrets at rest; required outside local mode (checked by
   * loadEncryptor, src/connections/encryption.ts, which names the variable in its errors).
   */
  SERVICE_ENCRYPTION_KEY: optionalText,
  /** Older keys, comma separated, still read during a rotation (docs/connections.md). */
  SERVICE_ENCRYPTION_KEYS: optionalText,
  /** YAML of extra or replacement providers, beside the built-in catalog. */
  SERVICE_PROVIDERS_FILE: optionalText,
  /** The prebuilt workflow bundle; by default dist/workflow-bundle.js (src/temporal/workflowBundle.ts). */
  SERVICE_WORKFLOW_BUNDLE: optionalText,
  /** Folder of the worker's thread marks (src/temporal/scriptThreads.ts); by default one per install. */
  SERVICE_THREAD_MARKS_DIR: optionalText,
  /** `0`: with SERVICE_ROLE=all the worker runs in this process instead of a supervised child. */
  SERVICE_SUPERVISE_WORKER: optionalText,
  /** Set to `1` by a SERVICE_ROLE=all process for its worker child: it prints nothing its parent printed. */
  SERVICE_SUPERVISED_CHILD: optionalText,
  /**
   * The local stack of `npm start` (src/devstack): where `initdb` and `postgres` are, the Temporal CLI,
   * the cache of built binaries, and `1` to silence its progress lines. The dev stack reads them from
   * the environment it also hands to the processes it spawns; they are declared here so that every
   * variable the service reads is in one schema and parsed at start.
   */
  PG_BIN_DIR: optionalText,
  TEMPORAL_CLI_PATH: optionalText,
  SERVICE_CACHE_DIR: optionalText,
  SERVICE_DEVSTACK_QUIET: optionalText,
  /** Folder of local state for `npm start` (Temporal's SQLite file, the Postgres cluster, the dev key). */
  SERVICE_DATA_DIR: z.string().min(1).default('.service-data'),
  /** Most connections of the Postgres pool of this process. */
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(500).default(20),
  /** Sustained API requests per second per key, and the burst. */
  RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).default(200),
  /**
   * How long an API process keeps an environment found by its secret key (src/connections/
   * environmentKeyCache.ts; forgotten at once when any process changes an environment). 0: every
   * request looks its key up in Postgres.
   */
  SERVICE_KEY_CACHE_SECONDS: z.coerce.number().int().min(0).max(3600).default(10),
  /**
   * What outbound requests (svc, proxy, OAuth token requests, outbound webhooks) may reach beyond
   * public addresses: host names, addresses and CIDR blocks, each optionally with a port.
   */
  SERVICE_OUTBOUND_ALLOW: z
    .string()
    .default('')
    .superRefine((value, ctx) => {
      try {
        new OutboundPolicy(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
      }
    }),
  /**
   * The service admin key: manages environments through the API, CLI and dashboard (create, list,
   * rename, delete, rotate keys) and opens no environment's data. Unset: that management is off.
   */
  SERVICE_ADMIN_KEY: z
    .string()
    .min(32, 'at least 32 characters (e.g. `openssl rand -base64 32`)')
    .max(200)
    .regex(/^\S+$/, 'no spaces')
    .optional(),
  /** Open MCP sessions (POST /mcp) per environment in one API process; one more closes the least recently used. */
  SERVICE_MCP_SESSIONS_PER_ENVIRONMENT: z.coerce.number().int().min(1).max(100_000).default(100),
  /** How long an MCP session without an open notification stream lives after its last request, in seconds. */
  SERVICE_MCP_SESSION_IDLE_SECONDS: z.coerce.number().int().min(10).max(86_400).default(1800),
  /**
   * Inbound webhooks (POST /webhook/…) accepted per second per environment and integration, per API
   * process, after their signature is checked; bursts of twice that. Past it: 429 `rate_limited`.
   */
  WEBHOOK_RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).default(100),
  /** Bytes of webhook payloads that may wait for one sync (paused, or busy with a run). Past it: 429. */
  WEBHOOK_QUEUE_SYNC_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(64 * 1024 * 1024),
  /** Bytes of webhook payloads that may wait in one environment, all syncs together. Past it: 429. */
  WEBHOOK_QUEUE_ENVIRONMENT_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .default(512 * 1024 * 1024),
  /** Actions one environment may have running at once, across every API process. Past it: 429 `too_many_runs`. */
  ACTION_CONCURRENCY_PER_ENVIRONMENT: z.coerce.number().int().min(1).default(25),
  /**
   * Sync runs one environment may have running at once, across every worker. A run past it waits to
   * begin (retried for about 90 s), then fails with `environment_busy` and runs again soon.
   */
  SYNC_RUN_CONCURRENCY_PER_ENVIRONMENT: z.coerce.number().int().min(1).default(100),
  /**
   * How long one execution of a sync run that checkpoints may go on (issue 32): past it, the run ends
   * the execution after its next `svc.saveCheckpoint` and continues at once in a next one. It bounds
   * the history a worker replays to take a run over (after a crash, or when the run leaves its cache).
   * A worker setting: each execution takes the value of the worker that loads its script. `none`:
   * only the history budget ends an execution.
   */
  SYNC_EXECUTION_TIME_LIMIT: executionTimeLimit('30m'),
  /**
   * How many executions one sync run may span (issue 32): a run about to start one more fails
   * `run_max_executions`, its checkpoint kept, so that no run goes on unbounded whatever its script
   * does. 1,000 executions hold ~330,000 pages of get + batchSave + saveCheckpoint at the default
   * SYNC_EXECUTION_OPERATION_LIMIT, or 500 hours at the default time limit. A worker setting, read when an execution loads its script.
   */
  SYNC_RUN_MAX_EXECUTIONS: z.coerce.number().int().min(2).max(1_000_000).default(1000),
  /**
   * How many svc operations one execution of a sync run that checkpoints may take: past it, as past
   * SYNC_EXECUTION_TIME_LIMIT, the run ends the execution when its script next calls
   * `svc.saveCheckpoint` and continues in a next one. It bounds the replay a worker must finish within
   * a run's 4 s workflow task timeout to take the run over after a crash (one activation per
   * operation; docs/architecture.md "Recovery"). A worker setting, read when an execution loads its script.
   */
  SYNC_EXECUTION_OPERATION_LIMIT: z.coerce
    .number()
    .int()
    .min(100)
    .max(48_000)
    .default(DEFAULT_EXECUTION_OPERATION_LIMIT),
  /**
   * Token requests the background refresher has in flight at once, per worker process, and of those
   * one environment's at most (src/connections/tokenRefresher.ts).
   */
  TOKEN_REFRESH_CONCURRENCY: z.coerce.number().int().min(1).max(64).default(4),
  TOKEN_REFRESH_PER_ENVIRONMENT: z.coerce.number().int().min(1).max(64).default(2),
  /** Largest JSON request body, in the notation of the `bytes` package (`5mb`). */
  BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)$/i)
    .default('5mb'),
  /** Port of this process's `GET /metrics` listener (Prometheus); unset: no listener. */
  METRICS_PORT: port.optional(),
  /** Interface of the metrics listener; anything but loopback requires METRICS_TOKEN. */
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  /** When set, scrapes send `Authorization: Bearer <METRICS_TOKEN>`. */
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  /** `host:port` where the Temporal SDK serves its worker metrics (Prometheus). */
  TEMPORAL_METRICS_PROMETHEUS_ADDRESS: hostPort.optional(),
  /** An OpenTelemetry collector that the Temporal SDK pushes its worker metrics to. */
  TEMPORAL_METRICS_OTEL_URL: z.url().optional(),
  /** `grpc` (OTLP/gRPC, port 4317) or `http` (OTLP/HTTP, `…:4318/v1/metrics`). */
  TEMPORAL_METRICS_OTEL_PROTOCOL: z.enum(['grpc', 'http']).default('grpc'),
  /** Retention of the run history (sync_runs); the latest run of each sync always stays. */
  RETENTION_SYNC_RUNS: retention('90d', DAY_MS, '1d'),
  /** Retention of script log lines (script_logs). */
  RETENTION_SCRIPT_LOGS: retention('30d', DAY_MS, '1d'),
  /** Retention of the outbound webhook log (webhook_deliveries). */
  RETENTION_WEBHOOK_DELIVERIES: retention('30d', DAY_MS, '1d'),
  /** Least age of a claim-checked payload (payload_blobs) before it may go; Temporal's histories also hold it. */
  RETENTION_PAYLOAD_BLOBS: retention('7d', HOUR_MS, '1h'),
  /** How long a webhook may wait for its sync (paused, say) before it is dropped. */
  RETENTION_QUEUED_WEBHOOKS: retention('7d', HOUR_MS, '1h'),
  /** Retention of the step ledger's leftovers (script_steps). */
  RETENTION_STEP_LEDGER: retention('1h', HOUR_MS, '1h'),
});

export type Settings = z.infer<typeof settingsSchema>;

/** What no single variable can say: the combinations that are refused. */
const checkedSettings = settingsSchema.superRefine((settings, ctx) => {
  if (settings.METRICS_PORT !== undefined && !isLoopbackHost(settings.METRICS_HOST) && !settings.METRICS_TOKEN) {
    ctx.addIssue({
      code: 'custom',
      path: ['METRICS_HOST'],
      message: `the metrics listener on ${settings.METRICS_HOST} would be reachable from other machines: set METRICS_TOKEN too`,
    });
  }
  if (settings.TEMPORAL_METRICS_PROMETHEUS_ADDRESS && settings.TEMPORAL_METRICS_OTEL_URL) {
    ctx.addIssue({
      code: 'custom',
      path: ['TEMPORAL_METRICS_OTEL_URL'],
      message:
        'the Temporal SDK exports its metrics one way: set TEMPORAL_METRICS_PROMETHEUS_ADDRESS or TEMPORAL_METRICS_OTEL_URL, not both',
    });
  }
});

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const result = checkedSettings.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
  throw new ServiceError('invalid_settings', `Invalid environment: ${problems.join('; ')}. See docs/operations.md.`, {
    details: problems,
  });
}
