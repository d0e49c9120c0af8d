/**
 * The deployed versions of each environment (table `deployments`): the only module that reads or
 * writes it. A version is recorded `applying` with its changes, in the same transaction that
 * supersedes the one before; the apply workflow marks it `active` once every sync is in line.
 */
import type { ServiceConfig } from '../config/types.js';
import type { Pool, PoolClient } from '../db/pool.js';
import type { DeployChange, ScriptRef } from './diff.js';

export interface DeployedScript extends ScriptRef {
  source: string;
  sourcePath: string;
}

export interface Deployment {
  environmentId: string;
  version: number;
  status: 'applying' | 'active' | 'superseded';
  config: ServiceConfig;
  yaml: string;
  scripts: DeployedScript[];
  changes: DeployChange[];
  redeployOf: number | null;
  createdAt: string;
  activatedAt: string | null;
}

export interface NewDeployment {
  version: number;
  config: ServiceConfig;
  yaml: string;
  scripts: readonly DeployedScript[];
  changes: readonly DeployChange[];
  redeployOf: number | null;
}

export interface DeploymentStore {
  /** The version in force (`applying` or `active`), or null when nothing is deployed. */
  current(environmentId: string): Promise<Deployment | null>;
  /** Its number only (one indexed read, for the generated endpoints' routing on every request). */
  currentVersion(environmentId: string): Promise<number | null>;
  /** The highest version ever recorded, 0 when none. */
  latestVersion(environmentId: string): Promise<number>;
  get(environmentId: string, version: number): Promise<Deployment | null>;
  /** Newest first. */
  list(environmentId: string, limit: number): Promise<Deployment[]>;
  /** The last superseded versions, newest first (to name an endpoint a deploy removed). */
  superseded(environmentId: string, limit: number): Promise<Pick<Deployment, 'version' | 'config'>[]>;
  /** Supersedes the version in force and records `next` as `applying`, in one transaction. */
  record(environmentId: string, next: NewDeployment): Promise<void>;
  /** Marks the version `active` if it is still the one in force; false when it is not. */
  activate(environmentId: string, version: number): Promise<boolean>;
  /** Runs `work` holding the environment's deploy lock, across processes. */
  withLock<T>(environmentId: string, work: () => Promise<T>): Promise<T>;
}

interface DeploymentRow {
  environment_id: string;
  version: number;
  status: Deployment['status'];
  config: ServiceConfig;
  yaml: string;
  scripts: DeployedScript[];
  changes: DeployChange[];
  redeploy_of: number | null;
  created_at: Date;
  activated_at: Date | null;
}

const toDeployment = (row: DeploymentRow): Deployment => ({
  environmentId: row.environment_id,
  version: row.version,
  status: row.status,
  config: row.config,
  yaml: row.yaml,
  scripts: row.scripts,
  changes: row.changes,
  redeployOf: row.redeploy_of,
  createdAt: row.created_at.toISOString(),
  activatedAt: row.activated_at?.toISOString() ?? null,
});

export function createPostgresDeploymentStore({ db }: { db: Pool }): DeploymentStore {
  const IN_FORCE = `status IN ('applying', 'active')`;
  return {
    async current(environmentId) {
      const { rows } = await db.query<DeploymentRow>(
        `SELECT * FROM deployments WHERE environment_id = $1 AND ${IN_FORCE}`,
        [environmentId],
      );
      return rows[0] ? toDeployment(rows[0]) : null;
    },

    async currentVersion(environmentId) {
      const { rows } = await db.query<{ version: number }>(
        `SELECT version FROM deployments WHERE environment_id = $1 AND ${IN_FORCE}`,
        [environmentId],
      );
      return rows[0]?.version ?? null;
    },

    async latestVersion(environmentId) {
      const { rows } = await db.query<{ version: number | null }>(
        'SELECT max(version) AS version FROM deployments WHERE environment_id = $1',
        [environmentId],
      );
      return rows[0]?.version ?? 0;
    },

    async get(environmentId, version) {
      const { rows } = await db.query<DeploymentRow>(
        'SELECT * FROM deployments WHERE environment_id = $1 AND version = $2',
        [environmentId, version],
      );
      return rows[0] ? toDeployment(rows[0]) : null;
    },

    async list(environmentId, limit) {
      const { rows } = await db.query<DeploymentRow>(
        'SELECT * FROM deployments WHERE environment_id = $1 ORDER BY version DESC LIMIT $2',
        [environmentId, limit],
      );
      return rows.map(toDeployment);
    },

    async superseded(environmentId, limit) {
      const { rows } = await db.query<{ version: number; config: ServiceConfig }>(
        `SELECT version, config FROM deployments WHERE environment_id = $1 AND status = 'superseded'
          ORDER BY version DESC LIMIT $2`,
        [environmentId, limit],
      );
      return rows;
    },

    async record(environmentId, next) {
      const client = await db.connect();
      try {
        await client.query('BEGIN');
        try {
          await client.query(`UPDATE deployments SET status = 'superseded' WHERE environment_id = $1 AND ${IN_FORCE}`, [
            environmentId,
          ]);
          await client.query(
            `INSERT INTO deployments (environment_id, version, config, yaml, scripts, changes, status, redeploy_of)
             VALUES ($1, $2, $3, $4, $5, $6, 'applying', $7)`,
            [
              environmentId,
              next.version,
              JSON.stringify(next.config),
              next.yaml,
              JSON.stringify(next.scripts),
              JSON.stringify(next.changes),
              next.redeployOf,
            ],
          );
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
      } finally {
        client.release();
      }
    },

    async activate(environmentId, version) {
      const result = await db.query(
        `UPDATE deployments SET status = 'active', activated_at = coalesce(activated_at, now())
          WHERE environment_id = $1 AND version = $2 AND ${IN_FORCE}`,
        [environmentId, version],
      );
      return (result.rowCount ?? 0) > 0;
    },

    async withLock(environmentId, work) {
      // Session-level, so it spans the apply; held on a connection of its own.
      const client: PoolClient = await db.connect();
      try {
        await client.query(`SELECT pg_advisory_lock(hashtext('deploy:' || $1))`, [environmentId]);
        try {
          return await work();
        } finally {
          await client.query(`SELECT pg_advisory_unlock(hashtext('deploy:' || $1))`, [environmentId]);
        }
      } finally {
        client.release();
      }
    },
  };
}
