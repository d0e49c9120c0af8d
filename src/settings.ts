/**
 * The service's settings, read from the environment once at boot and failing fast with every problem
 * listed. docs/operations.md documents each variable.
 */
import { z } from 'zod';
import { ServiceError } from './errors.js';
import { OutboundPolicy } from './runtime/outbound.js';

const port = z.coerce.number().int().min(0).max(65_535);

export const settingsSchema = z.object({
  /** Postgres of the service; when unset, `npm start` creates a local cluster. */
  DATABASE_URL: z.string().min(1).optional(),
  /** Temporal frontend `host:port`; when unset, `npm start` starts a dev server. */
  TEMPORAL_ADDRESS: z.string().min(1).optional(),
  TEMPORAL_NAMESPACE: z.string().min(1).default('default'),
  TEMPORAL_TASK_QUEUE: z.string().min(1).default('integration-service'),
  /** Which processes this one runs: both (one machine), or only the API or only the worker (scaling out). */
  SERVICE_ROLE: z.enum(['all', 'api', 'worker']).default('all'),
  /** Port and interface of the API server. */
  PORT: port.default(3003),
  HOST: z.string().min(1).default('127.0.0.1'),
  /** Public base URL of the API, as end users' browsers and OAuth providers reach it. */
  SERVICE_PUBLIC_URL: z.url().optional(),
  /** Folder of local state for `npm start` (Temporal's SQLite file, the Postgres cluster, the dev key). */
  SERVICE_DATA_DIR: z.string().min(1).default('.service-data'),
  /** Most connections of the Postgres pool of this process. */
  DATABASE_POOL_SIZE: z.coerce.number().int().min(1).max(500).default(20),
  /** Sustained API requests per second per key, and the burst. */
  RATE_LIMIT_PER_SECOND: z.coerce.number().int().min(1).default(200),
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
  /** Largest JSON request body, in the notation of the `bytes` package (`5mb`). */
  BODY_LIMIT: z
    .string()
    .regex(/^\d+(b|kb|mb)$/i)
    .default('5mb'),
});

export type Settings = z.infer<typeof settingsSchema>;

export function loadSettings(env: NodeJS.ProcessEnv = process.env): Settings {
  const result = settingsSchema.safeParse(env);
  if (result.success) return result.data;
  const problems = result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
  throw new ServiceError('invalid_settings', `Invalid environment: ${problems.join('; ')}. See docs/operations.md.`, {
    details: problems,
  });
}
