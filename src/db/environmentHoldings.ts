/**
 * What one module keeps of an environment in its own tables, which name the environment without a
 * foreign key to it. Deleting an environment (src/connections/environmentStore.ts) asks each module's
 * holdings, inside its transaction, whether something still blocks the delete and then to remove its
 * rows, so the environment store touches no other module's tables. The composition root
 * (src/service.ts) passes every module's holdings in.
 */
import type { PoolClient } from './pool.js';

export interface EnvironmentBlocker {
  /** The detail's name in the `environment_not_empty` error (`record_scopes`). */
  key: string;
  count: number;
  /** Why, and what to do: "records of 2 deleted connection(s) are being erased; try again shortly". */
  message: string;
}

export interface EnvironmentHoldings {
  /** Something of the environment that must be gone before it is deleted, if any. */
  blocker?(client: PoolClient, environmentId: string): Promise<EnvironmentBlocker | undefined>;
  /** Deletes the module's rows of the environment; the rows removed, per table. */
  remove(client: PoolClient, environmentId: string): Promise<Record<string, number>>;
}

/** Deletes the rows of `environmentId` from each of `tables`; the rows removed, per table. */
export async function deleteEnvironmentRows(
  client: PoolClient,
  environmentId: string,
  tables: readonly string[],
): Promise<Record<string, number>> {
  const removed: Record<string, number> = {};
  for (const table of tables) {
    const result = await client.query(`DELETE FROM ${table} WHERE environment_id = $1`, [environmentId]);
    removed[table] = result.rowCount ?? 0;
  }
  return removed;
}

/** Holdings that are a plain `DELETE … WHERE environment_id = $1` of each table in `tables`. */
export function holdingsOfTables(...tables: readonly string[]): EnvironmentHoldings {
  return { remove: (client, environmentId) => deleteEnvironmentRows(client, environmentId, tables) };
}
