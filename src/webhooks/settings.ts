/**
 * Webhook settings: per integration, how inbound webhooks are read and verified; per environment,
 * where outbound webhooks go and the secret that signs them. Secrets are encrypted at rest and never
 * returned, except an outbound secret the service generated, once.
 */
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Encryptor } from '../connections/encryption.js';
import type { Pool } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import { OUTBOUND_REFUSED, outboundPolicy } from '../runtime/outbound.js';

// The Encryptor's purposes are a closed list owned by src/connections; webhook secrets are secrets of an
// integration's external API like its client secret. A purpose of their own is proposed in the report
// (with these tables added to reencryptAll, for key rotation).
const WEBHOOK_SECRET_PURPOSE = 'integration_client_secret';

/** Where the signed time travels, and how far from now it may be: replays older than that are refused. */
export const DEFAULT_TIMESTAMP_HEADER = 'X-Signature-Timestamp';
export const DEFAULT_TOLERANCE_SECONDS = 300;

const headerName = z.string().regex(/^[A-Za-z0-9-]{1,100}$/, 'an HTTP header name');
const dottedPath = z.string().regex(/^[A-Za-z0-9_$-]+(\.[A-Za-z0-9_$-]+)*$/, 'a dotted path such as `data.account.id`');

export const inboundWebhookInput = z
  .object({
    secret: z.string().min(8).max(4096).nullable().optional().describe('HMAC-SHA256 secret; null removes it.'),
    signature_header: headerName
      .optional()
      .describe(
        'Header carrying the hex HMAC-SHA256 of `<timestamp>.<body>` (`sha256=` prefix allowed). Default X-Signature-256.',
      ),
    timestamp_header: headerName
      .optional()
      .describe('Header carrying the Unix time (seconds) the sender signed at. Default X-Signature-Timestamp.'),
    tolerance_seconds: z
      .number()
      .int()
      .min(30)
      .max(3600)
      .optional()
      .describe('How far the signed time may be from now, either way, in seconds (30 to 3600). Default 300.'),
    type_header: headerName
      .nullable()
      .optional()
      .describe('Header with the webhook type; the body path is used when absent.'),
    type_path: dottedPath.optional().describe('Dotted path of the type in the JSON body. Default `type`.'),
    connection_path: dottedPath.nullable().optional().describe('Dotted path of the value identifying the connection.'),
    connection_field: z
      .string()
      .regex(
        /^(connection_id|metadata\.[A-Za-z0-9_-]+|connection_config\.[A-Za-z0-9_-]+)$/,
        '`connection_id`, `metadata.<key>` or `connection_config.<key>`',
      )
      .optional()
      .describe('What the value is compared with. Default `connection_id`.'),
  })
  .strict();
export type InboundWebhookInput = z.output<typeof inboundWebhookInput>;

export interface InboundWebhookSettings {
  secret: string | undefined;
  signatureHeader: string;
  timestampHeader: string;
  toleranceSeconds: number;
  typeHeader: string | null;
  typePath: string;
  connectionPath: string | null;
  connectionField: string;
}

export const inboundWebhookView = z.object({
  has_secret: z.boolean(),
  signature_header: z.string(),
  timestamp_header: z.string(),
  tolerance_seconds: z.number(),
  type_header: z.string().nullable(),
  type_path: z.string(),
  connection_path: z.string().nullable(),
  connection_field: z.string(),
});
export type InboundWebhookView = z.infer<typeof inboundWebhookView>;

interface InboundRow {
  secret_encrypted: string | null;
  signature_header: string;
  timestamp_header: string;
  tolerance_seconds: number;
  type_header: string | null;
  type_path: string;
  connection_path: string | null;
  connection_field: string;
}

export interface OutboundWebhookSettings {
  url: string | null;
  secret: string;
}

export function createWebhookSettingsStore({ db, encryptor }: { db: Pool; encryptor: Encryptor }) {
  const view = (row: InboundRow): InboundWebhookView => ({
    has_secret: row.secret_encrypted !== null,
    signature_header: row.signature_header,
    timestamp_header: row.timestamp_header,
    tolerance_seconds: row.tolerance_seconds,
    type_header: row.type_header,
    type_path: row.type_path,
    connection_path: row.connection_path,
    connection_field: row.connection_field,
  });
  async function inboundRow(environmentId: string, integrationId: string): Promise<InboundRow | undefined> {
    const { rows } = await db.query<InboundRow>(
      'SELECT * FROM integration_webhook_settings WHERE environment_id = $1 AND integration_id = $2',
      [environmentId, integrationId],
    );
    return rows[0];
  }
  return {
    async inboundView(environmentId: string, integrationId: string): Promise<InboundWebhookView | null> {
      const row = await inboundRow(environmentId, integrationId);
      return row ? view(row) : null;
    },

    /** The settings of an integration with its secret decrypted; the defaults when none are stored. */
    async inbound(environmentId: string, integrationId: string): Promise<InboundWebhookSettings> {
      const row = await inboundRow(environmentId, integrationId);
      return {
        secret: row?.secret_encrypted ? encryptor.decrypt(row.secret_encrypted, WEBHOOK_SECRET_PURPOSE) : undefined,
        signatureHeader: row?.signature_header ?? 'X-Signature-256',
        timestampHeader: row?.timestamp_header ?? DEFAULT_TIMESTAMP_HEADER,
        toleranceSeconds: row?.tolerance_seconds ?? DEFAULT_TOLERANCE_SECONDS,
        typeHeader: row?.type_header ?? null,
        typePath: row?.type_path ?? 'type',
        connectionPath: row?.connection_path ?? null,
        connectionField: row?.connection_field ?? 'connection_id',
      };
    },

    /** Creates or changes the settings; fields not given keep their stored value. */
    async setInbound(
      environmentId: string,
      integrationId: string,
      input: InboundWebhookInput,
    ): Promise<InboundWebhookView> {
      const current = await inboundRow(environmentId, integrationId);
      const secret =
        input.secret === undefined
          ? (current?.secret_encrypted ?? null)
          : input.secret === null
            ? null
            : encryptor.encrypt(input.secret, WEBHOOK_SECRET_PURPOSE);
      const pick = <K extends keyof InboundRow>(key: K, given: InboundRow[K] | undefined, fallback: InboundRow[K]) =>
        given !== undefined ? given : current ? current[key] : fallback;
      const { rows } = await db.query<InboundRow>(
        `INSERT INTO integration_webhook_settings
           (environment_id, integration_id, secret_encrypted, signature_header, type_header, type_path, connection_path, connection_field, timestamp_header, tolerance_seconds)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (environment_id, integration_id) DO UPDATE SET
           secret_encrypted = EXCLUDED.secret_encrypted, signature_header = EXCLUDED.signature_header,
           timestamp_header = EXCLUDED.timestamp_header, tolerance_seconds = EXCLUDED.tolerance_seconds,
           type_header = EXCLUDED.type_header, type_path = EXCLUDED.type_path,
           connection_path = EXCLUDED.connection_path, connection_field = EXCLUDED.connection_field, updated_at = now()
         RETURNING *`,
        [
          environmentId,
          integrationId,
          secret,
          pick('signature_header', input.signature_header, 'X-Signature-256'),
          pick('type_header', input.type_header, null),
          pick('type_path', input.type_path, 'type'),
          pick('connection_path', input.connection_path, null),
          pick('connection_field', input.connection_field, 'connection_id'),
          pick('timestamp_header', input.timestamp_header, DEFAULT_TIMESTAMP_HEADER),
          pick('tolerance_seconds', input.tolerance_seconds, DEFAULT_TOLERANCE_SECONDS),
        ],
      );
      return view(rows[0]!);
    },

    async outbound(environmentId: string): Promise<OutboundWebhookSettings | undefined> {
      const { rows } = await db.query<{ url: string | null; secret_encrypted: string }>(
        'SELECT url, secret_encrypted FROM outbound_webhook_settings WHERE environment_id = $1',
        [environmentId],
      );
      const row = rows[0];
      return row
        ? { url: row.url, secret: encryptor.decrypt(row.secret_encrypted, WEBHOOK_SECRET_PURPOSE) }
        : undefined;
    },

    /**
     * Sets where outbound webhooks go. A secret given replaces the stored one; without one the stored
     * secret stays, or a new one is generated and returned (the only time it can be read).
     */
    async setOutbound(
      environmentId: string,
      input: { url: string | null; secret?: string | undefined },
    ): Promise<{ url: string | null; generated_secret?: string }> {
      // The same rule as every delivery (which checks again when it connects): an internal address is
      // refused now, with a clear error, rather than stored to fail at each delivery.
      if (input.url !== null) {
        const refused = await outboundPolicy().refusedUrl(new URL(input.url));
        if (refused) {
          throw new ServiceError('webhook_url_refused', `url: ${refused.message}`, {
            details: [{ path: 'body.url', code: OUTBOUND_REFUSED, message: refused.message }],
          });
        }
      }
      const existing = await this.outbound(environmentId);
      const generated =
        input.secret === undefined && !existing ? `whsec_${randomBytes(24).toString('base64url')}` : undefined;
      const secret = input.secret ?? generated ?? existing?.secret;
      if (secret === undefined) throw new ServiceError('internal_error', 'no webhook secret to store');
      await db.query(
        `INSERT INTO outbound_webhook_settings (environment_id, url, secret_encrypted) VALUES ($1, $2, $3)
         ON CONFLICT (environment_id) DO UPDATE SET url = EXCLUDED.url, secret_encrypted = EXCLUDED.secret_encrypted, updated_at = now()`,
        [environmentId, input.url, encryptor.encrypt(secret, WEBHOOK_SECRET_PURPOSE)],
      );
      return { url: input.url, ...(generated === undefined ? {} : { generated_secret: generated }) };
    },
  };
}

export type WebhookSettingsStore = ReturnType<typeof createWebhookSettingsStore>;
