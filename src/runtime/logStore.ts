import { redactSecrets } from './redaction.js';
import type { ConnectionScope } from './connectionAccess.js';
import type { Pool } from '../db/pool.js';
import { holdingsOfTables } from '../db/environmentHoldings.js';
import { expiryByAge, type Expiring } from '../db/expiry.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** One `svc.log` line, as the run workflow hands it over. */
export interface ScriptLogEntry {
  level: LogLevel;
  message: string;
  /** ISO instant (workflow time) when the script logged it. */
  loggedAt: string;
  /** Position of the line within its run; a replayed flush of the same line is ignored. */
  seq: number;
}

export interface ScriptLogContext {
  environmentId: string;
  integrationId: string;
  connectionId: string;
  scriptKind: 'sync' | 'action';
  scriptName: string;
  runId: string;
}

export interface StoredScriptLog extends ScriptLogContext {
  id: string;
  level: LogLevel;
  message: string;
  loggedAt: string;
}

export interface SearchLogsOptions {
  environmentId: string;
  integrationId?: string | undefined;
  connectionId?: string | undefined;
  /** A sync or action name. */
  scriptName?: string | undefined;
  runId?: string | undefined;
  level?: LogLevel | undefined;
  /** Case-insensitive substring of the message. */
  text?: string | undefined;
  /** Only lines older than this id (the previous page's last id). */
  beforeId?: string | undefined;
  /** @default 100, at most 1000 */
  limit?: number | undefined;
}

/** The `svc.log` lines of every run (table script_logs); the API exposes `search`. */
export interface ScriptLogStore extends Expiring {
  append(context: ScriptLogContext, entries: readonly ScriptLogEntry[]): Promise<void>;
  /** Newest first. */
  search(options: SearchLogsOptions): Promise<StoredScriptLog[]>;
}

// A script can log anything; a line longer than this is cut so one call cannot bloat the table.
const MAX_MESSAGE_LENGTH = 64 * 1024;

export interface PostgresLogStoreOptions {
  db: Pool;
  /**
   * The credential values of a connection in every spelling (ConnectionService.credentialSecrets): a
   * script that logs what it read (`svc.log(token)`) has it stored, and shown by `GET /logs` and the
   * dashboard, as `[redacted]`. Undefined: the connection no longer exists (deleted while its run went
   * on), and its lines are not stored: its logs were erased with it, and its secrets could no longer
   * be redacted. Without `secretsOf` lines are stored as logged (tests of the store alone).
   */
  secretsOf?: ((scope: ConnectionScope) => Promise<string[] | undefined>) | undefined;
}

export function createPostgresLogStore({ db, secretsOf }: PostgresLogStoreOptions): ScriptLogStore {
  return {
    async append(context, entries) {
      if (entries.length === 0) return;
      // Redacted before the cut below, so a cut can only shorten a line, never leave part of a secret
      // that redaction would have found whole.
      const secrets = secretsOf ? await secretsOf(context) : [];
      if (secrets === undefined) return;
      await db.query(
        `INSERT INTO script_logs
           (environment_id, integration_id, connection_id, script_kind, script_name, run_id, level, message, logged_at, seq)
         SELECT $1, $2, $3, $4, $5, $6, e.level, e.message, e.logged_at, e.seq
           FROM unnest($7::text[], $8::text[], $9::timestamptz[], $10::int[]) AS e(level, message, logged_at, seq)
         ON CONFLICT (run_id, seq) DO NOTHING`,
        [
          context.environmentId,
          context.integrationId,
          context.connectionId,
          context.scriptKind,
          context.scriptName,
          context.runId,
          entries.map((entry) => entry.level),
          entries.map((entry) => redactSecrets(entry.message, secrets).slice(0, MAX_MESSAGE_LENGTH)),
          entries.map((entry) => entry.loggedAt),
          entries.map((entry) => entry.seq),
        ],
      );
    },
    async search(options) {
      const where: string[] = ['environment_id = $1'];
      const values: unknown[] = [options.environmentId];
      const add = (column: string, value: string | undefined, operator = '='): void => {
        if (value === undefined) return;
        values.push(value);
        where.push(`${column} ${operator} $${values.length}`);
      };
      add('integration_id', options.integrationId);
      add('connection_id', options.connectionId);
      add('script_name', options.scriptName);
      add('run_id', options.runId);
      add('level', options.level);
      if (options.text !== undefined) add('message', `%${options.text.replace(/[\\%_]/g, '\\$&')}%`, 'ILIKE');
      if (options.beforeId !== undefined) add('id', options.beforeId, '<');
      const limit = Math.min(Math.max(options.limit ?? 100, 1), 1000);
      const result = await db.query<{
        id: string;
        environment_id: string;
        integration_id: string;
        connection_id: string;
        script_kind: 'sync' | 'action';
        script_name: string;
        run_id: string;
        level: LogLevel;
        message: string;
        logged_at: Date;
      }>(
        `SELECT id, environment_id, integration_id, connection_id, script_kind, script_name, run_id, level, message, logged_at
           FROM script_logs WHERE ${where.join(' AND ')} ORDER BY id DESC LIMIT ${limit}`,
        values,
      );
      return result.rows.map((row) => ({
        id: row.id,
        environmentId: row.environment_id,
        integrationId: row.integration_id,
        connectionId: row.connection_id,
        scriptKind: row.script_kind,
        scriptName: row.script_name,
        runId: row.run_id,
        level: row.level,
        message: row.message,
        loggedAt: row.logged_at.toISOString(),
      }));
    },

    /** Deletes the lines stored before `cutoff` (retention: RETENTION_SCRIPT_LOGS). */
    expireBefore: expiryByAge(db, 'script_logs', 'created_at', ['id']),
  };
}

/** Script logs go with their environment (src/db/environmentHoldings.ts). */
export const logEnvironmentHoldings = holdingsOfTables('script_logs');
