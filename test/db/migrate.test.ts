/** src/db/migrate.ts: a failing migration rolls back every migration of the same call. */
import { describe, expect, it } from 'vitest';
import { loadMigrations, migrate } from '../../src/db/migrate.js';
import { useDatabase } from '../kit/db.js';

describe('migrate', () => {
  it('applies the pending migrations in one transaction: one that fails rolls back the others of its call', async () => {
    const { pool } = await useDatabase(); // cloned from the migrated template
    const pending = [
      { name: '99990101000000_first', sql: 'CREATE TABLE migrate_test_first (x int)' },
      { name: '99990101000001_broken', sql: 'ALTER TABLE no_such_table ADD COLUMN y int' },
    ];
    await expect(migrate(pool, [...loadMigrations(), ...pending])).rejects.toThrow(
      /^migration 99990101000001_broken failed: relation "no_such_table" does not exist/,
    );
    const table = await pool.query("SELECT to_regclass('migrate_test_first') AS name");
    expect(table.rows).toEqual([{ name: null }]);
    const recorded = await pool.query("SELECT name FROM service_migrations WHERE name LIKE '9999%'");
    expect(recorded.rows).toEqual([]);

    expect(await migrate(pool, [...loadMigrations(), pending[0]!])).toEqual(['99990101000000_first']);
    expect(await migrate(pool, [...loadMigrations(), pending[0]!])).toEqual([]);
  });
});
