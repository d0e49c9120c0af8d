/**
 * Integrations per environment: which catalog provider an integration id (provider_config_key) uses,
 * with the OAuth client of the application (its secret encrypted), the scopes to ask for, and
 * per-integration overrides of the provider's catalog entry.
 */
import { z } from 'zod';
import { inTransaction, type Pool } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import type { Encryptor } from './encryption.js';
import { withOverrides, type Provider, type ProviderCatalog } from './providers/catalog.js';

/** An integration as the API shows it: the client secret never leaves the store this way. */
export interface Integration {
  environmentId: string;
  id: string;
  provider: string;
  /** The display name set for the integration, else the provider's. */
  displayName: string;
  /** The display name as set; null when the provider's is shown. */
  displayNameOverride: string | null;
  /** The provider's authentication mode (OAUTH2, OAUTH1, API_KEY, BASIC); null when the catalog lost the provider. */
  authMode: string | null;
  oauthClientId: string | null;
  hasOAuthClientSecret: boolean;
  oauthScopes: string[];
  providerSettings: Record<string, unknown>;
  createdAt: string;
  updatedAt: string;
}

/** What the OAuth flows and request signing need: the integration, its resolved provider, its client. */
export interface ResolvedIntegration {
  integration: Integration;
  provider: Provider;
  clientId: string | undefined;
  clientSecret: string | undefined;
}

export const integrationInput = z
  .object({
    id: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'letters, digits, . _ -, at most 128 characters'),
    provider: z.string().min(1),
    /** Null or absent: the provider's display name is shown. */
    display_name: z.string().min(1).max(255).nullable().optional(),
    oauth_client_id: z.string().min(1).max(1024).optional(),
    oauth_client_secret: z.string().min(1).max(4096).optional(),
    oauth_scopes: z.array(z.string().min(1).max(512)).max(200).optional(),
    provider_settings: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type IntegrationInput = z.input<typeof integrationInput>;

interface IntegrationRow {
  environment_id: string;
  id: string;
  provider: string;
  display_name: string | null;
  oauth_client_id: string | null;
  oauth_client_secret_encrypted: string | null;
  oauth_scopes: string[];
  provider_settings: Record<string, unknown>;
  created_at: Date;
  updated_at: Date;
}

function toIntegration(row: IntegrationRow, catalog: ProviderCatalog): Integration {
  let provider: Provider | undefined;
  try {
    provider = catalog.get(row.provider);
  } catch {
    // A provider that left the catalog (a removed SERVICE_PROVIDERS_FILE entry): still listed, still deletable.
    provider = undefined;
  }
  return {
    environmentId: row.environment_id,
    id: row.id,
    provider: row.provider,
    displayName: row.display_name ?? provider?.display_name ?? row.provider,
    displayNameOverride: row.display_name,
    authMode: provider?.auth_mode ?? null,
    oauthClientId: row.oauth_client_id,
    hasOAuthClientSecret: row.oauth_client_secret_encrypted !== null,
    oauthScopes: row.oauth_scopes,
    providerSettings: row.provider_settings,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

function parseInput(input: unknown): z.infer<typeof integrationInput> {
  const parsed = integrationInput.safeParse(input);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(body)'}: ${issue.message}`);
    throw new ServiceError('invalid_integration', `invalid integration: ${problems.join('; ')}`, {
      details: problems,
    });
  }
  return parsed.data;
}

export interface IntegrationStore {
  /** Creates or replaces an integration; a secret not given keeps the stored one. */
  upsert(environmentId: string, input: IntegrationInput): Promise<Integration>;
  /** The authentication mode of a catalog provider; 400 `unknown_provider` for one the catalog does not have. */
  providerAuthMode(provider: string): string;
  list(environmentId: string): Promise<Integration[]>;
  get(environmentId: string, id: string): Promise<Integration>;
  /** The integration with its provider (overrides applied) and its decrypted OAuth client. */
  resolve(environmentId: string, id: string): Promise<ResolvedIntegration>;
  /**
   * Deletes an integration. Its connections hold users' credentials, so an integration that still has
   * some is refused unless `deleteConnections` says to delete them too.
   */
  delete(environmentId: string, id: string, options?: { deleteConnections?: boolean }): Promise<void>;
}

export function createIntegrationStore({
  db,
  encryptor,
  catalog,
}: {
  db: Pool;
  encryptor: Encryptor;
  catalog: ProviderCatalog;
}): IntegrationStore {
  /**
   * Secrets already stored keep going where they went when they were given: otherwise anyone with the
   * environment's key could move token_url (through provider_settings or another provider) to a host
   * of theirs and have the next refresh send them what the API never shows.
   * - The integration's client secret is kept by an upsert without one only while its endpoints stay
   *   the same (400 `client_secret_required`: give it again).
   * - The connections of the minted modes hold a secret of their own (a client secret, a private key
   *   that signs what goes to the token URL), which the key holder cannot give again: while any exist,
   *   the endpoints do not change (409 `connection_secrets_bound`).
   */
  async function keepSecretsWhereTheyGo(
    environmentId: string,
    id: string,
    next: Provider,
    clientSecretGiven: boolean,
  ): Promise<void> {
    const { rows } = await db.query<IntegrationRow>(
      'SELECT * FROM integrations WHERE environment_id = $1 AND id = $2',
      [environmentId, id],
    );
    const row = rows[0];
    if (!row) return;
    const after = secretDestinations(next);
    if (after.every((url) => url === undefined)) return;
    let previous: Provider | undefined;
    try {
      previous = withOverrides(catalog.get(row.provider), row.provider_settings, row.id);
    } catch {
      previous = undefined;
    }
    if (previous !== undefined && JSON.stringify(secretDestinations(previous)) === JSON.stringify(after)) return;
    const destinations = after.filter((url) => url !== undefined).join(', ');
    if (row.oauth_client_secret_encrypted !== null && !clientSecretGiven) {
      throw new ServiceError(
        'client_secret_required',
        `integration '${id}': the change sends its OAuth client secret to another endpoint (${destinations}); give the client secret again in \`credentials\` to confirm it`,
      );
    }
    // A previous provider the catalog no longer resolves may have been of a minted mode: counted as one.
    const mintedBefore = previous === undefined || CONNECTION_SECRET_MODES.has(previous.auth_mode);
    if (!mintedBefore && !CONNECTION_SECRET_MODES.has(next.auth_mode)) return;
    const { rows: held } = await db.query<{ count: string }>(
      'SELECT count(*) AS count FROM connections WHERE environment_id = $1 AND provider_config_key = $2',
      [environmentId, id],
    );
    const count = Number(held[0]?.count ?? 0);
    if (count === 0) return;
    throw new ServiceError(
      'connection_secrets_bound',
      `integration '${id}' has ${count} connection${count === 1 ? '' : 's'} holding a client secret or private key given for its current token endpoint; the change would send ${count === 1 ? 'it' : 'them'} to another (${destinations}). Delete ${count === 1 ? 'that connection' : 'those connections'} first (their users connect again), or create another integration for the new endpoint`,
    );
  }

  async function rowOf(environmentId: string, id: string): Promise<IntegrationRow> {
    const { rows } = await db.query<IntegrationRow>(
      'SELECT * FROM integrations WHERE environment_id = $1 AND id = $2',
      [environmentId, id],
    );
    if (!rows[0]) {
      throw new ServiceError('unknown_integration', `integration '${id}' does not exist in this environment`);
    }
    return rows[0];
  }

  return {
    async upsert(environmentId: string, input: IntegrationInput): Promise<Integration> {
      const data = parseInput(input);
      // Refuse a provider or overrides that would make the integration unusable, before storing them.
      const provider = withOverrides(catalog.get(data.provider), data.provider_settings ?? {}, data.id);
      await keepSecretsWhereTheyGo(environmentId, data.id, provider, data.oauth_client_secret !== undefined);
      const secret =
        data.oauth_client_secret === undefined
          ? null
          : encryptor.encrypt(data.oauth_client_secret, 'integration_client_secret');
      try {
        const { rows } = await db.query<IntegrationRow>(
          `INSERT INTO integrations (environment_id, id, provider, oauth_client_id, oauth_client_secret_encrypted, oauth_scopes, provider_settings, display_name)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
           ON CONFLICT (environment_id, id) DO UPDATE SET
             provider = EXCLUDED.provider,
             display_name = EXCLUDED.display_name,
             oauth_client_id = EXCLUDED.oauth_client_id,
             oauth_client_secret_encrypted = COALESCE(EXCLUDED.oauth_client_secret_encrypted, integrations.oauth_client_secret_encrypted),
             oauth_scopes = EXCLUDED.oauth_scopes,
             provider_settings = EXCLUDED.provider_settings,
             updated_at = now()
           RETURNING *`,
          [
            environmentId,
            data.id,
            data.provider,
            data.oauth_client_id ?? null,
            secret,
            data.oauth_scopes ?? [],
            JSON.stringify(data.provider_settings ?? {}),
            data.display_name ?? null,
          ],
        );
        return toIntegration(rows[0]!, catalog);
      } catch (error) {
        if ((error as { code?: string }).code === '23503') {
          throw new ServiceError('unknown_environment', `environment '${environmentId}' does not exist`);
        }
        throw error;
      }
    },

    providerAuthMode(provider: string): string {
      return catalog.get(provider).auth_mode;
    },

    async list(environmentId: string): Promise<Integration[]> {
      const { rows } = await db.query<IntegrationRow>(
        'SELECT * FROM integrations WHERE environment_id = $1 ORDER BY id',
        [environmentId],
      );
      return rows.map((row) => toIntegration(row, catalog));
    },

    async get(environmentId: string, id: string): Promise<Integration> {
      return toIntegration(await rowOf(environmentId, id), catalog);
    },

    async resolve(environmentId: string, id: string): Promise<ResolvedIntegration> {
      const row = await rowOf(environmentId, id);
      const provider = withOverrides(catalog.get(row.provider), row.provider_settings, row.id);
      return {
        integration: toIntegration(row, catalog),
        provider,
        clientId: row.oauth_client_id ?? undefined,
        clientSecret:
          row.oauth_client_secret_encrypted === null
            ? undefined
            : encryptor.decrypt(row.oauth_client_secret_encrypted, 'integration_client_secret'),
      };
    },

    async delete(environmentId: string, id: string, options: { deleteConnections?: boolean } = {}): Promise<void> {
      await rowOf(environmentId, id);
      try {
        await inTransaction(db, async (client) => {
          if (options.deleteConnections) {
            await client.query('DELETE FROM connections WHERE environment_id = $1 AND provider_config_key = $2', [
              environmentId,
              id,
            ]);
          }
          await client.query('DELETE FROM integrations WHERE environment_id = $1 AND id = $2', [environmentId, id]);
        });
      } catch (error) {
        if ((error as { code?: string }).code === '23503') {
          throw new ServiceError(
            'integration_has_connections',
            `integration '${id}' still has connections; delete them first or pass deleteConnections`,
          );
        }
        throw error;
      }
    },
  };
}

/**
 * The modes whose connections hold a long-lived secret of their own that the service sends to the token
 * URL (OAUTH2_CC's client secret) or signs what it sends there with (JWT's and APP's private key).
 */
const CONNECTION_SECRET_MODES = new Set<string>(['OAUTH2_CC', 'JWT', 'APP']);

/**
 * The URLs an integration's client secret is sent to (OAuth 2 token requests) or signs requests to (OAuth 1),
 * and those a connection's own secret goes to (the minted modes' token URL).
 */
function secretDestinations(provider: Provider): (string | undefined)[] {
  const fields = provider as unknown as Record<string, unknown>;
  return ['token_url', 'access_token_url', 'request_token_url'].map((name) =>
    typeof fields[name] === 'string' ? fields[name] : undefined,
  );
}
