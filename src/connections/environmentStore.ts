/**
 * Environments (production, staging, a developer's own…) and the keys that reach them. The secret key
 * authenticates the application's API calls and is stored only as a SHA-256 hash: it is shown once,
 * at creation or rotation. The public key names the environment in end users' browsers and is not a
 * secret; a connect link with only the public key works only where the environment opted in to it.
 */
import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import type { EnvironmentHoldings } from '../db/environmentHoldings.js';
import { ENVIRONMENT_CHANGES, startEnvironmentKeyCache, type EnvironmentKeyCache } from './environmentKeyCache.js';

export interface Environment {
  id: string;
  name: string;
  publicKey: string;
  accountId: number;
  createdAt: string;
  /** Connect links may name the environment by its public key alone (new connections only). @default false */
  allowPublicKeyConnect: boolean;
  /** Inbound webhooks of integrations without a webhook secret are accepted unsigned. @default false */
  allowUnsignedWebhooks: boolean;
}

/** The per-environment opt-ins; each off until the environment's owner turns it on. */
export interface EnvironmentSettings {
  allowPublicKeyConnect?: boolean | undefined;
  allowUnsignedWebhooks?: boolean | undefined;
}

interface EnvironmentRow {
  id: string;
  name: string;
  public_key: string;
  secret_key_hash: string;
  account_id: number;
  created_at: Date;
  allow_public_key_connect: boolean;
  allow_unsigned_webhooks: boolean;
}

const environmentName = z
  .string()
  .regex(/^[a-z0-9][a-z0-9_-]{0,62}$/, 'lower-case letters, digits, _ and -, at most 63 characters');

const SECRET_PREFIX = 'sk_';
const PUBLIC_PREFIX = 'pk_';

function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

function newSecretKey(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64url');
}

function toEnvironment(row: EnvironmentRow): Environment {
  return {
    id: row.id,
    name: row.name,
    publicKey: row.public_key,
    accountId: row.account_id,
    createdAt: row.created_at.toISOString(),
    allowPublicKeyConnect: row.allow_public_key_connect,
    allowUnsignedWebhooks: row.allow_unsigned_webhooks,
  };
}

// Any fixed number works; it only has to be the same for every process (src/db/migrate.ts uses another).
const FIRST_ENVIRONMENT_LOCK = 7_411_101;

/**
 * What a secret key must look like to be accepted: generated keys are `sk_` and 43 base64url
 * characters; a declared one (SERVICE_FIRST_SECRET_KEY) needs at least 32 characters after the prefix,
 * and at most 200 in all (longer ones are never looked up).
 */
export const SECRET_KEY_PATTERN = /^sk_[A-Za-z0-9_-]{32,197}$/;

export function assertSecretKeyShape(secretKey: string): void {
  if (!SECRET_KEY_PATTERN.test(secretKey)) {
    throw new ServiceError(
      'invalid_secret_key',
      'a secret key is sk_ followed by 32 to 197 letters, digits, - or _ (for example: echo "sk_$(openssl rand -hex 32)")',
      { status: 400 },
    );
  }
}

async function insertEnvironment(
  db: Pool | PoolClient,
  input: { name: string; id?: string | undefined; secretKey: string },
): Promise<Environment> {
  const name = validName(input.name);
  // Workflow ids carry the environment id first (src/temporal/runAuthority.ts): a colon in it would
  // make the environment of a run ambiguous.
  if (input.id !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(input.id)) {
    throw new ServiceError(
      'invalid_environment_id',
      `environment id '${input.id}': use 1 to 64 letters, digits, '-' or '_'`,
    );
  }
  const publicKey = PUBLIC_PREFIX + randomBytes(16).toString('base64url');
  try {
    const { rows } = await db.query<EnvironmentRow>(
      `INSERT INTO environments (id, name, secret_key_hash, public_key) VALUES ($1, $2, $3, $4)
       RETURNING *`,
      [input.id ?? randomUUID(), name, hashKey(input.secretKey), publicKey],
    );
    return toEnvironment(rows[0]!);
  } catch (error) {
    throw nameTaken(error, name);
  }
}

export interface EnvironmentStore {
  /**
   * Keeps environments by key digest from now on (src/connections/environmentKeyCache.ts: forgotten
   * at every change of an environment, in every process, as soon as Postgres notifies it). The API
   * process turns it on; the returned function turns it off.
   */
  cacheSecretKeys(options?: { ttlMs?: number }): Promise<() => Promise<void>>;
  /** Creates an environment and returns its secret key: the only time the key is readable. */
  create(input: { name: string; id?: string }): Promise<{ environment: Environment; secretKey: string }>;
  /**
   * The first environment of a new deployment: created only when the database has none, under an
   * advisory lock, so that API processes starting at once on an empty database create exactly one and
   * none of them fails. `secretKey` declares its key (SERVICE_FIRST_SECRET_KEY); otherwise one is
   * generated and returned, the only time it is readable. Returns undefined when an environment exists.
   */
  createFirst(input: {
    name: string;
    secretKey?: string | undefined;
  }): Promise<{ environment: Environment; secretKey: string } | undefined>;
  /**
   * Gives the environment another name. Only the name changes: its id (in workflow ids, records and
   * webhook URLs), its keys and everything in it stay.
   */
  rename(id: string, newName: string): Promise<Environment>;
  /**
   * Deletes an environment that has no connections left, with everything else it holds: integrations
   * (and their OAuth client secrets), environment variables, webhook settings and secrets, deployments,
   * logs, run history and delivery log. An environment with connections is refused
   * (`environment_not_empty`): deleting a connection stops its syncs and erases its records
   * (DELETE /connections/:id), which a plain row delete could not do, so the caller does that first.
   */
  delete(id: string): Promise<{ environment: Environment; removed: Record<string, number> }>;
  get(id: string): Promise<Environment>;
  getByName(name: string): Promise<Environment | undefined>;
  list(): Promise<Environment[]>;
  /**
   * The environment a presented secret key belongs to, or undefined. The key is hashed first, so the
   * lookup and the comparison operate on its digest: how long they take tells nothing about the key.
   */
  findBySecretKey(presented: string): Promise<Environment | undefined>;
  findByPublicKey(publicKey: string): Promise<Environment | undefined>;
  /** Changes the per-environment opt-ins given; the others keep their value. */
  updateSettings(id: string, settings: EnvironmentSettings): Promise<Environment>;
  /**
   * Replaces the secret key; the old one stops working at once (in processes that keep keys, as soon
   * as they are notified: cacheSecretKeys). Returns the new key, shown once.
   */
  rotateSecretKey(id: string): Promise<string>;
}

/**
 * @param holdings every other module's rows of an environment (src/service.ts passes them); without
 *   them `delete` refuses to run, since it would leave those rows behind.
 */
export function createEnvironmentStore({
  db,
  holdings,
}: {
  db: Pool;
  holdings?: readonly EnvironmentHoldings[] | undefined;
}): EnvironmentStore {
  let keyCache: EnvironmentKeyCache<Environment> | undefined;

  /** Every process forgets its kept keys when this transaction commits; this one at once. */
  async function changed(client: Pool | PoolClient, id: string): Promise<void> {
    await client.query('SELECT pg_notify($1, $2)', [ENVIRONMENT_CHANGES, id]);
    keyCache?.invalidate();
  }

  return {
    async cacheSecretKeys(options?: { ttlMs?: number }): Promise<() => Promise<void>> {
      const cache = await startEnvironmentKeyCache<Environment>(db, options);
      keyCache = cache;
      return async () => {
        if (keyCache === cache) keyCache = undefined;
        await cache.stop();
      };
    },

    async create(input: { name: string; id?: string }): Promise<{ environment: Environment; secretKey: string }> {
      const secretKey = newSecretKey();
      return { environment: await insertEnvironment(db, { ...input, secretKey }), secretKey };
    },

    async createFirst(input: {
      name: string;
      secretKey?: string | undefined;
    }): Promise<{ environment: Environment; secretKey: string } | undefined> {
      const secretKey = input.secretKey ?? newSecretKey();
      assertSecretKeyShape(secretKey);
      return inTransaction(db, async (client) => {
        await client.query('SELECT pg_advisory_xact_lock($1)', [FIRST_ENVIRONMENT_LOCK]);
        const { rows } = await client.query('SELECT 1 FROM environments LIMIT 1');
        if (rows.length > 0) return undefined;
        return { environment: await insertEnvironment(client, { name: input.name, secretKey }), secretKey };
      });
    },

    async rename(id: string, newName: string): Promise<Environment> {
      const name = validName(newName);
      try {
        const rows = await inTransaction(db, async (client) => {
          const updated = await client.query<EnvironmentRow>(
            'UPDATE environments SET name = $2, updated_at = now() WHERE id = $1 RETURNING *',
            [id, name],
          );
          if (updated.rows[0]) await changed(client, id);
          return updated.rows;
        });
        if (!rows[0]) throw unknownEnvironment(id);
        return toEnvironment(rows[0]);
      } catch (error) {
        throw nameTaken(error, name);
      }
    },

    async delete(id: string): Promise<{ environment: Environment; removed: Record<string, number> }> {
      if (!holdings) throw new Error("EnvironmentStore.delete needs every module's holdings: create it with them");
      return inTransaction(db, async (client) => {
        const { rows } = await client.query<EnvironmentRow>('SELECT * FROM environments WHERE id = $1 FOR UPDATE', [
          id,
        ]);
        if (!rows[0]) throw unknownEnvironment(id);
        const environment = toEnvironment(rows[0]);
        // Connections and the other modules' rows hold no foreign key to the environment: counted under
        // the row lock, which a connection insert does not take, so a connect racing this delete is
        // refused by the integrations' foreign key (RESTRICT) when the cascade reaches them.
        const counts = await client.query<{ connections: string }>(
          'SELECT count(*) AS connections FROM connections WHERE environment_id = $1',
          [id],
        );
        const connections = Number(counts.rows[0]?.connections ?? 0);
        if (connections > 0) {
          throw new ServiceError(
            'environment_not_empty',
            `environment '${environment.name}' still has ${connections} connection(s): delete them first (DELETE /connections/:id with this environment's key stops their syncs and erases their records)`,
            { details: { connections } },
          );
        }
        for (const holding of holdings) {
          const blocker = await holding.blocker?.(client, id);
          if (blocker) {
            throw new ServiceError(
              'environment_not_empty',
              `environment '${environment.name}' still has ${blocker.message}`,
              {
                details: { connections, [blocker.key]: blocker.count },
              },
            );
          }
        }
        const removed: Record<string, number> = {};
        for (const holding of holdings) Object.assign(removed, await holding.remove(client, id));
        try {
          const integrations = await client.query('DELETE FROM integrations WHERE environment_id = $1', [id]);
          removed['integrations'] = integrations.rowCount ?? 0;
        } catch (error) {
          // A connection created after the count (connections → integrations is RESTRICT).
          if ((error as { code?: string }).code !== '23503') throw error;
          throw new ServiceError(
            'environment_not_empty',
            `environment '${environment.name}' got a connection while it was being deleted: delete it first`,
          );
        }
        await client.query('DELETE FROM environments WHERE id = $1', [id]);
        await changed(client, id);
        return { environment, removed };
      });
    },

    async get(id: string): Promise<Environment> {
      const { rows } = await db.query<EnvironmentRow>('SELECT * FROM environments WHERE id = $1', [id]);
      if (!rows[0]) throw unknownEnvironment(id);
      return toEnvironment(rows[0]);
    },

    async getByName(name: string): Promise<Environment | undefined> {
      const { rows } = await db.query<EnvironmentRow>('SELECT * FROM environments WHERE name = $1', [name]);
      return rows[0] ? toEnvironment(rows[0]) : undefined;
    },

    async list(): Promise<Environment[]> {
      const { rows } = await db.query<EnvironmentRow>('SELECT * FROM environments ORDER BY name');
      return rows.map(toEnvironment);
    },

    async findBySecretKey(presented: string): Promise<Environment | undefined> {
      if (!presented.startsWith(SECRET_PREFIX) || presented.length > 200) return undefined;
      const digest = hashKey(presented);
      const cache = keyCache;
      const kept = cache?.get(digest);
      if (kept) return kept;
      const generation = cache?.generation();
      const { rows } = await db.query<EnvironmentRow>('SELECT * FROM environments WHERE secret_key_hash = $1', [
        digest,
      ]);
      const row = rows[0];
      if (!row) return undefined;
      const equal = timingSafeEqual(Buffer.from(row.secret_key_hash, 'hex'), Buffer.from(digest, 'hex'));
      if (!equal) return undefined;
      const environment = toEnvironment(row);
      if (generation !== undefined) cache?.set(digest, environment, generation);
      return environment;
    },

    async findByPublicKey(publicKey: string): Promise<Environment | undefined> {
      const { rows } = await db.query<EnvironmentRow>('SELECT * FROM environments WHERE public_key = $1', [publicKey]);
      return rows[0] ? toEnvironment(rows[0]) : undefined;
    },

    async updateSettings(id: string, settings: EnvironmentSettings): Promise<Environment> {
      const rows = await inTransaction(db, async (client) => {
        const updated = await client.query<EnvironmentRow>(
          `UPDATE environments SET
             allow_public_key_connect = COALESCE($2, allow_public_key_connect),
             allow_unsigned_webhooks = COALESCE($3, allow_unsigned_webhooks),
             updated_at = now()
           WHERE id = $1 RETURNING *`,
          [id, settings.allowPublicKeyConnect ?? null, settings.allowUnsignedWebhooks ?? null],
        );
        if (updated.rows[0]) await changed(client, id);
        return updated.rows;
      });
      if (!rows[0]) throw new ServiceError('unknown_environment', `environment '${id}' does not exist`);
      return toEnvironment(rows[0]);
    },

    async rotateSecretKey(id: string): Promise<string> {
      const secretKey = newSecretKey();
      const rotated = await inTransaction(db, async (client) => {
        const { rowCount } = await client.query(
          'UPDATE environments SET secret_key_hash = $2, updated_at = now() WHERE id = $1',
          [id, hashKey(secretKey)],
        );
        if (rowCount) await changed(client, id);
        return rowCount !== 0;
      });
      if (!rotated) throw unknownEnvironment(id);
      return secretKey;
    },
  };
}

function validName(input: string): string {
  const name = environmentName.safeParse(input);
  if (!name.success) {
    throw new ServiceError('invalid_environment_name', `environment name '${input}': ${name.error.issues[0]?.message}`);
  }
  return name.data;
}

function unknownEnvironment(id: string): ServiceError {
  return new ServiceError('unknown_environment', `environment '${id}' does not exist`);
}

/** A unique violation on the name becomes 409 `environment_exists`; anything else passes through. */
function nameTaken(error: unknown, name: string): unknown {
  if ((error as { code?: string }).code === '23505') {
    return new ServiceError('environment_exists', `an environment named '${name}' already exists`);
  }
  return error;
}
