/**
 * Environment variables (SPEC.md "Other resources"): name and value, values encrypted at rest, read by
 * scripts through `svc.getEnvironmentVariables`.
 */
import { z } from 'zod';
import { inTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import type { EnvironmentVariable } from '../runtime/public.js';
import type { Encryptor } from './encryption.js';
import type { EnvironmentVariableStore } from './types.js';

const variableName = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]{0,255}$/, 'letters, digits and _, not starting with a digit, at most 256 characters');
/** Large enough for a certificate or a JSON service-account key; bounded so one variable cannot fill a page. */
const MAX_VALUE_BYTES = 64 * 1024;

/** The environment variables as the API manages them; the runtime only lists them (EnvironmentVariableStore). */
export interface EnvironmentVariableManager extends EnvironmentVariableStore {
  /** Creates or replaces one variable. */
  set(environmentId: string, variable: EnvironmentVariable): Promise<void>;
  /** Replaces the whole set in one transaction (the dashboard's "save all"). */
  replaceAll(environmentId: string, variables: EnvironmentVariable[]): Promise<void>;
  /** Deletes one variable; true when it existed. */
  delete(environmentId: string, name: string): Promise<boolean>;
}

export function createEnvironmentVariableStore({
  db,
  encryptor,
}: {
  db: Pool;
  encryptor: Encryptor;
}): EnvironmentVariableManager {
  async function upsert(
    client: Pool | PoolClient,
    environmentId: string,
    variable: EnvironmentVariable,
  ): Promise<void> {
    const name = variableName.safeParse(variable.name);
    if (!name.success) {
      throw new ServiceError(
        'invalid_environment_variable',
        `variable name '${variable.name}': ${name.error.issues[0]?.message}`,
      );
    }
    if (typeof variable.value !== 'string' || Buffer.byteLength(variable.value) > MAX_VALUE_BYTES) {
      throw new ServiceError(
        'invalid_environment_variable',
        `variable '${variable.name}': the value must be a string of at most ${MAX_VALUE_BYTES} bytes`,
      );
    }
    try {
      await client.query(
        `INSERT INTO environment_variables (environment_id, name, value_encrypted) VALUES ($1, $2, $3)
         ON CONFLICT (environment_id, name) DO UPDATE SET value_encrypted = EXCLUDED.value_encrypted, updated_at = now()`,
        [environmentId, name.data, encryptor.encrypt(variable.value, 'environment_variable')],
      );
    } catch (error) {
      if ((error as { code?: string }).code === '23503') {
        throw new ServiceError('unknown_environment', `environment '${environmentId}' does not exist`);
      }
      throw error;
    }
  }

  return {
    async list(environmentId) {
      const { rows } = await db.query<{ name: string; value_encrypted: string }>(
        'SELECT name, value_encrypted FROM environment_variables WHERE environment_id = $1 ORDER BY name',
        [environmentId],
      );
      return rows.map((row) => ({
        name: row.name,
        value: encryptor.decrypt(row.value_encrypted, 'environment_variable'),
      }));
    },

    async set(environmentId, variable) {
      await upsert(db, environmentId, variable);
    },

    async replaceAll(environmentId, variables) {
      const names = new Set<string>();
      for (const variable of variables) {
        if (names.has(variable.name)) {
          throw new ServiceError('invalid_environment_variable', `variable '${variable.name}' is given twice`);
        }
        names.add(variable.name);
      }
      await inTransaction(db, async (client) => {
        await client.query('DELETE FROM environment_variables WHERE environment_id = $1', [environmentId]);
        for (const variable of variables) await upsert(client, environmentId, variable);
      });
    },

    async delete(environmentId, name) {
      const { rowCount } = await db.query('DELETE FROM environment_variables WHERE environment_id = $1 AND name = $2', [
        environmentId,
        name,
      ]);
      return (rowCount ?? 0) > 0;
    },
  };
}
