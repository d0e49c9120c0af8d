/**
 * The rows that name an environment: in every table with an `environment_id` column, and its own row
 * of `environments`. Empty after the environment's delete; unchanged for the environments it spares.
 */
import type { Pool } from '../../src/db/pool.js';

export async function environmentRows(db: Pool, environmentId: string): Promise<Record<string, number>> {
  const { rows: tables } = await db.query<{ table_name: string }>(
    `SELECT table_name FROM information_schema.columns WHERE column_name = 'environment_id' AND table_schema = 'public'`,
  );
  const found: Record<string, number> = {};
  const count = async (table: string, column: string): Promise<void> => {
    const { rows } = await db.query<{ n: string }>(`SELECT count(*) AS n FROM "${table}" WHERE ${column} = $1`, [
      environmentId,
    ]);
    if (Number(rows[0]?.n) > 0) found[table] = Number(rows[0]?.n);
  };
  for (const { table_name } of tables) await count(table_name, 'environment_id');
  await count('environments', 'id');
  return found;
}
