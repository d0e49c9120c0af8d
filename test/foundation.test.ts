import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { createActivities } from '../activities/index.js';
import type { checkHealth } from '../workflows/index.js';
import { workflowIds } from '../src/temporal/connection.js';
import { useTemporalClient, useWorker } from './kit/stack.js';
import { useDatabase } from './kit/db.js';

describe('foundation: a real workflow on the real Temporal server writes to the real Postgres', () => {
  it('runs checkHealth: the activity writes a row and the workflow returns it as read back', async () => {
    const { pool } = await useDatabase();
    const client = await useTemporalClient();
    const { taskQueue } = await useWorker(createActivities({ db: pool }));

    const token = randomUUID();
    const result = await client.workflow.execute<typeof checkHealth>('checkHealth', {
      taskQueue,
      workflowId: workflowIds.healthCheck(token),
      args: [token],
    });

    expect(result.token).toBe(token);
    const stored = await pool.query<{ token: string }>('SELECT token FROM health_checks WHERE id = $1', [result.id]);
    expect(stored.rows).toEqual([{ token }]);
    expect(Date.parse(result.checkedAt)).toBeGreaterThan(Date.now() - 60_000);
  });

  it('gives each test file a database of its own', async () => {
    const first = await useDatabase();
    const second = await useDatabase();
    await first.pool.query("INSERT INTO health_checks (token) VALUES ('only-in-first')");
    const inSecond = await second.pool.query("SELECT 1 FROM health_checks WHERE token = 'only-in-first'");
    expect(first.name).not.toBe(second.name);
    expect(inSecond.rowCount).toBe(0);
  });
});
