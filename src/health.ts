/**
 * Liveness and readiness, shared by the API (GET /livez, GET /readyz) and a worker process's health
 * port (SERVICE_HEALTH_PORT). Liveness says only that the process answers; readiness runs every check
 * at once, each bounded by a deadline, and names the ones that failed. The answers carry check names
 * and `ok`/`down` only: no address, no driver message, nothing an unauthenticated caller should learn.
 */
import { createServer, type Server } from 'node:http';
import type { ConnectionLike } from '@temporalio/client';
import type { Pool } from './db/pool.js';
import type { ErrorCode } from './errors.js';

/** Resolves true when the dependency answers; false or a rejection means it is down. */
export type ReadinessCheck = () => Promise<boolean>;

export type ReadinessChecks = Record<string, ReadinessCheck>;

export interface ReadinessReport {
  ready: boolean;
  checks: Record<string, 'ok' | 'down'>;
}

/** Longest a readiness answer waits for one check. */
export const READINESS_TIMEOUT_MS = 2000;

/** Runs the checks in parallel; a check that has not answered within `timeoutMs` counts as down. */
export async function checkReadiness(
  checks: ReadinessChecks,
  timeoutMs = READINESS_TIMEOUT_MS,
): Promise<ReadinessReport> {
  const entries = await Promise.all(
    Object.entries(checks).map(async ([name, check]) => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
      const ok = await Promise.race([check().catch(() => false), timeout]);
      clearTimeout(timer);
      return [name, ok ? 'ok' : 'down'] as const;
    }),
  );
  return { ready: entries.every(([, state]) => state === 'ok'), checks: Object.fromEntries(entries) };
}

/** Postgres answers `SELECT 1`. */
export function databaseCheck(db: Pool): ReadinessCheck {
  return async () => {
    await db.query('SELECT 1');
    return true;
  };
}

/** The Temporal frontend answers GetSystemInfo on this connection within the deadline. */
export function temporalCheck(connection: ConnectionLike, timeoutMs = READINESS_TIMEOUT_MS): ReadinessCheck {
  return async () => {
    await connection.withDeadline(Date.now() + timeoutMs, () => connection.workflowService.getSystemInfo({}));
    return true;
  };
}

/** The JSON body of a readiness answer: the report, and when not ready, the error naming what is down. */
export function readinessBody(report: ReadinessReport): Record<string, unknown> {
  if (report.ready) return { status: 'ready', checks: report.checks };
  const down = Object.entries(report.checks)
    .filter(([, state]) => state === 'down')
    .map(([name]) => name);
  return {
    status: 'not_ready',
    checks: report.checks,
    error: {
      code: 'not_ready' satisfies ErrorCode,
      message: `Not ready: ${down.join(', ')} ${down.length === 1 ? 'is' : 'are'} down.`,
    },
  };
}

/**
 * A worker process's health port: GET /livez answers 200 while the process runs, GET /readyz 200 when
 * every check passes and 503 with the report otherwise. Anything else is 404. Returns once listening.
 */
export async function startHealthServer(options: {
  host: string;
  port: number;
  checks: () => ReadinessChecks;
}): Promise<{ server: Server; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    const answer = (status: number, body: unknown): void => {
      res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
      res.end(JSON.stringify(body));
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      answer(405, { error: { code: 'method_not_allowed', message: 'Use GET.' } });
    } else if (path === '/livez') {
      answer(200, { status: 'ok' });
    } else if (path === '/readyz') {
      void checkReadiness(options.checks()).then((report) => answer(report.ready ? 200 : 503, readinessBody(report)));
    } else {
      answer(404, { error: { code: 'not_found', message: 'GET /livez or GET /readyz.' } });
    }
  });
  server.listen(options.port, options.host);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return {
    server,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

export interface HealthCheckRow {
  id: string;
  token: string;
  checkedAt: string;
}

/**
 * Writes a row of `health_checks` and reads it back: a worker's proof, through an activity, that
 * Postgres takes writes (the foundation workflow, workflows/checkHealth.ts).
 */
export async function recordHealthCheck(db: Pool, token: string): Promise<HealthCheckRow> {
  const inserted = await db.query<{ id: string }>('INSERT INTO health_checks (token) VALUES ($1) RETURNING id', [
    token,
  ]);
  const id = inserted.rows[0]?.id;
  const read = await db.query<{ id: string; token: string; checked_at: Date }>(
    'SELECT id, token, checked_at FROM health_checks WHERE id = $1',
    [id],
  );
  const row = read.rows[0];
  if (!row) throw new Error(`health check row ${String(id)} vanished between insert and read`);
  return { id: row.id, token: row.token, checkedAt: row.checked_at.toISOString() };
}
