/**
 * Deployments: preview and apply a compiled service.yaml with its script bundles, and read what is
 * deployed (for the runtime's definitions, the API's generated endpoints and the dashboard).
 *
 * Apply writes the new version first (the desired state), then brings workflows and records in line,
 * then marks the version active. Invalid input changes nothing. A crash in the middle leaves the
 * version `applying`; the next deploy of the environment re-applies everything (each step is
 * idempotent: workflow ids are business keys, erasing twice erases nothing more). Deploys of one
 * environment are serialised by a Postgres advisory lock, across processes.
 */
import { z } from 'zod';
import { compileConfig, formatProblems } from '../config/index.js';
import { modelsReferenced } from '../config/checkRecord.js';
import type { ModelConfig, ServiceConfig, SyncConfig } from '../config/types.js';
import type { Pool, PoolClient } from '../db/pool.js';
import { ServiceError } from '../errors.js';
import type { RecordStore } from '../records/types.js';
import type { ActionDefinition, SyncDefinition } from '../runtime/definitions.js';
import type { ScriptStore } from '../runtime/scriptStore.js';
import { scriptHash } from '../runtime/scriptStore.js';
import {
  describeChange,
  diffDeployments,
  isDestructive,
  scriptKey,
  type DeployChange,
  type DeployedState,
  type ScriptRef,
} from './diff.js';

export const deployRequestSchema = z
  .object({
    /** The service.yaml text; the server compiles it again, so a hand-made request cannot skip validation. */
    yaml: z.string().min(1).max(1_000_000),
    scripts: z
      .array(
        z
          .object({
            integration: z.string().min(1),
            kind: z.enum(['sync', 'action']),
            name: z.string().min(1),
            /** The bundle `service compile` produced (CommonJS, see src/cli/compile.ts). */
            code: z.string().min(1).max(5_000_000),
            /** The TypeScript it was built from, for the dashboard's Script tab. */
            source: z.string().max(5_000_000).default(''),
            sourcePath: z.string().max(1000).default(''),
          })
          .strict(),
      )
      .max(10_000),
  })
  .strict();
export type DeployRequest = z.input<typeof deployRequestSchema>;

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

export interface PlannedChange {
  change: DeployChange;
  description: string;
  destructive: boolean;
  /** Connections whose workflows this change touches. */
  connections: number;
  /** Records this change erases (sync removals). */
  recordsErased: number;
}

export interface DeployPlan {
  /** Version the deploy would create. */
  version: number;
  previousVersion: number | null;
  changes: PlannedChange[];
  destructive: boolean;
  /** What the deploy does not refuse but the deployer should know (DeploymentsDeps.warnings). */
  warnings: string[];
}

/** What deploy needs of the sync workflows (src/temporal/syncControl.ts). */
export interface SyncWorkflows {
  ensureSync(definition: SyncDefinition, connectionId: string): Promise<string>;
  stop(
    ref: { environmentId: string; integrationId: string; connectionId: string; syncName: string },
    reason: string,
  ): Promise<void>;
}

export interface DeploymentsDeps {
  db: Pool;
  scripts: ScriptStore;
  records: RecordStore;
  syncs: SyncWorkflows;
  /** Connection ids of one integration of an environment. */
  connectionIds(environmentId: string, integrationId: string): Promise<string[]>;
  /** How many workflow calls run at once while applying. @default 16 */
  concurrency?: number;
  /**
   * What a deploy should say but does not refuse (a sync subscribed to webhooks that the environment
   * will not accept, say): shown by preview and apply, and by `service deploy`.
   */
  warnings?: (environmentId: string, config: ServiceConfig) => Promise<string[]>;
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

/** The definition the workflows run, from the deployed config. */
export function syncDefinition(
  environmentId: string,
  sync: SyncConfig,
  hash: string,
  models: readonly ModelConfig[],
): SyncDefinition {
  const validation = sync.recordValidation ?? 'off';
  return {
    environmentId,
    integrationId: sync.integration,
    syncName: sync.name,
    syncType: sync.syncType,
    runsMs: sync.runsMs,
    autoStart: sync.autoStart,
    trackDeletes: sync.trackDeletes,
    models: sync.outputs.map((output) => output.model),
    scriptHash: hash,
    webhookSubscriptions: sync.webhookSubscriptions,
    ...(validation === 'off'
      ? {}
      : {
          recordValidation: {
            mode: validation,
            models: modelsReferenced(
              models,
              sync.outputs.map((output) => output.model),
            ),
          },
        }),
  };
}

// Fields whose change alters what the sync workflows run; the others are documentation.
const DEFINITION_FIELDS = new Set([
  'script',
  'models',
  'runs',
  'sync_type',
  'track_deletes',
  'auto_start',
  'webhook_subscriptions',
  'record_validation',
]);

async function mapLimit<T>(items: readonly T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const lanes = Array.from({ length: Math.min(limit, items.length) }, async () => {
    while (next < items.length) {
      const item = items[next++] as T;
      await work(item);
    }
  });
  await Promise.all(lanes);
}

export function createDeployments(deps: DeploymentsDeps) {
  const { db } = deps;
  const concurrency = deps.concurrency ?? 16;

  async function current(environmentId: string, client: Pool | PoolClient = db): Promise<Deployment | null> {
    const result = await client.query<DeploymentRow>(
      `SELECT * FROM deployments WHERE environment_id = $1 AND status IN ('applying', 'active')`,
      [environmentId],
    );
    const row = result.rows[0];
    return row ? toDeployment(row) : null;
  }

  /** Compiles and checks a request; throws with every problem, changing nothing. */
  function prepare(request: DeployRequest): {
    config: ServiceConfig;
    yaml: string;
    scripts: DeployedScript[];
    codes: Map<string, string>;
  } {
    const parsed = deployRequestSchema.safeParse(request);
    if (!parsed.success) {
      throw new ServiceError('invalid_deploy_request', 'The deploy request is malformed.', {
        details: parsed.error.issues,
      });
    }
    const compiled = compileConfig(parsed.data.yaml);
    if (compiled.config === null) {
      throw new ServiceError('invalid_config', formatProblems('service.yaml', compiled.problems, parsed.data.yaml), {
        details: compiled.problems,
      });
    }
    const config = compiled.config;
    const declared = new Set<string>();
    for (const integration of config.integrations) {
      for (const sync of integration.syncs) declared.add(scriptKey(integration.id, 'sync', sync.name));
      for (const action of integration.actions) declared.add(scriptKey(integration.id, 'action', action.name));
    }
    const codes = new Map<string, string>();
    const scripts: DeployedScript[] = [];
    const problems: string[] = [];
    for (const script of parsed.data.scripts) {
      const key = scriptKey(script.integration, script.kind, script.name);
      if (!declared.has(key)) problems.push(`script ${key} is not declared in service.yaml`);
      else if (codes.has(key)) problems.push(`script ${key} is given twice`);
      const hash = scriptHash(script.code);
      codes.set(key, script.code);
      scripts.push({
        integration: script.integration,
        kind: script.kind,
        name: script.name,
        hash,
        source: script.source,
        sourcePath: script.sourcePath,
      });
    }
    for (const key of declared)
      if (!codes.has(key))
        problems.push(`script ${key} is declared in service.yaml but missing; run \`service compile\``);
    if (problems.length > 0) {
      throw new ServiceError(
        'invalid_deploy_request',
        `The scripts do not match service.yaml: ${problems.join('; ')}.`,
        {
          status: 422,
          details: problems,
        },
      );
    }
    return { config, yaml: parsed.data.yaml, scripts, codes };
  }

  async function plan(environmentId: string, next: DeployedState, previous: Deployment | null): Promise<DeployPlan> {
    const changes = diffDeployments(previous, next);
    const planned: PlannedChange[] = [];
    const connectionCounts = new Map<string, number>();
    const connectionsOf = async (integration: string): Promise<number> => {
      if (!connectionCounts.has(integration)) {
        connectionCounts.set(integration, (await deps.connectionIds(environmentId, integration)).length);
      }
      return connectionCounts.get(integration) ?? 0;
    };
    for (const change of changes) {
      let recordsErased = 0;
      if (change.kind === 'sync_removed') {
        recordsErased = await countSyncRecords(environmentId, change.integration, change.sync);
      }
      planned.push({
        change,
        description: describeChange(change),
        destructive: isDestructive(change),
        connections: change.kind.startsWith('sync') ? await connectionsOf(change.integration) : 0,
        recordsErased,
      });
    }
    return {
      version: (await latestVersion(environmentId)) + 1,
      previousVersion: previous?.version ?? null,
      changes: planned,
      destructive: planned.some((change) => change.destructive),
      warnings: (await deps.warnings?.(environmentId, next.config)) ?? [],
    };
  }

  async function countSyncRecords(environmentId: string, integrationId: string, syncName: string): Promise<number> {
    const result = await db.query<{ count: string }>(
      `SELECT count(*)::text AS count FROM records r JOIN record_scopes s ON s.scope_id = r.scope_id
        WHERE s.environment_id = $1 AND s.integration_id = $2 AND r.sync_name = $3`,
      [environmentId, integrationId, syncName],
    );
    return Number(result.rows[0]?.count ?? 0);
  }

  async function latestVersion(environmentId: string, client: Pool | PoolClient = db): Promise<number> {
    const result = await client.query<{ version: number | null }>(
      'SELECT max(version) AS version FROM deployments WHERE environment_id = $1',
      [environmentId],
    );
    return result.rows[0]?.version ?? 0;
  }

  /** Holds the environment's deploy lock (session-level, so it spans the workflow calls) around `work`. */
  async function withDeployLock<T>(environmentId: string, work: (client: PoolClient) => Promise<T>): Promise<T> {
    const client = await db.connect();
    try {
      await client.query(`SELECT pg_advisory_lock(hashtext('deploy:' || $1))`, [environmentId]);
      try {
        return await work(client);
      } finally {
        await client.query(`SELECT pg_advisory_unlock(hashtext('deploy:' || $1))`, [environmentId]);
      }
    } finally {
      client.release();
    }
  }

  async function reconcile(
    environmentId: string,
    deployment: { config: ServiceConfig; scripts: readonly ScriptRef[] },
    changes: readonly DeployChange[],
    everything: boolean,
    onProgress: (message: string) => void,
  ): Promise<void> {
    const hashes = new Map(
      deployment.scripts.map((script) => [scriptKey(script.integration, script.kind, script.name), script.hash]),
    );
    // Removals first: a removed sync stops before its records go, so no run writes after the erase.
    for (const change of changes) {
      if (change.kind !== 'sync_removed') continue;
      const connections = await deps.connectionIds(environmentId, change.integration);
      onProgress(`stopping ${change.integration}/${change.sync} for ${connections.length} connection(s)`);
      await mapLimit(connections, concurrency, (connectionId) =>
        deps.syncs.stop(
          { environmentId, integrationId: change.integration, connectionId, syncName: change.sync },
          `sync removed by deploy`,
        ),
      );
      const erased = await deps.records.eraseSync({
        environmentId,
        integrationId: change.integration,
        syncName: change.sync,
      });
      onProgress(`erased ${erased} record(s) of ${change.integration}/${change.sync}`);
    }
    const toEnsure = new Set<string>();
    for (const change of changes) {
      if (change.kind === 'sync_added') toEnsure.add(scriptKey(change.integration, 'sync', change.sync));
      if (change.kind === 'sync_changed' && change.fields.some((field) => DEFINITION_FIELDS.has(field))) {
        toEnsure.add(scriptKey(change.integration, 'sync', change.sync));
      }
    }
    for (const integration of deployment.config.integrations) {
      const syncs = integration.syncs.filter(
        (sync) => everything || toEnsure.has(scriptKey(integration.id, 'sync', sync.name)),
      );
      if (syncs.length === 0) continue;
      const connections = await deps.connectionIds(environmentId, integration.id);
      onProgress(
        `starting or updating ${syncs.length} sync(s) of ${integration.id} for ${connections.length} connection(s)`,
      );
      const work = connections.flatMap((connectionId) => syncs.map((sync) => ({ connectionId, sync })));
      let done = 0;
      await mapLimit(work, concurrency, async ({ connectionId, sync }) => {
        const hash = hashes.get(scriptKey(integration.id, 'sync', sync.name));
        if (!hash) throw new ServiceError('deploy_inconsistent', `no script for sync ${integration.id}/${sync.name}`);
        await deps.syncs.ensureSync(syncDefinition(environmentId, sync, hash, deployment.config.models), connectionId);
        done++;
        if (done % 1000 === 0) onProgress(`${done}/${work.length} sync workflows in line`);
      });
    }
  }

  return {
    current,

    /** The changes a deploy would make, with their reach; changes nothing. */
    async preview(environmentId: string, request: DeployRequest): Promise<DeployPlan> {
      const prepared = prepare(request);
      return plan(environmentId, { config: prepared.config, scripts: prepared.scripts }, await current(environmentId));
    },

    /**
     * Applies a deploy. Destructive changes (sync or action removed) need `allowDestructive`; without
     * it the deploy fails with `destructive_change_not_confirmed` and changes nothing.
     */
    async apply(
      environmentId: string,
      request: DeployRequest,
      options: { allowDestructive?: boolean; redeployOf?: number; onProgress?: (message: string) => void } = {},
    ): Promise<{ plan: DeployPlan; deployment: Deployment }> {
      const prepared = prepare(request);
      const onProgress = options.onProgress ?? (() => undefined);
      return withDeployLock(environmentId, async (client) => {
        const previous = await current(environmentId, client);
        const next = { config: prepared.config, scripts: prepared.scripts };
        const deployPlan = await plan(environmentId, next, previous);
        if (deployPlan.destructive && !options.allowDestructive) {
          const destructive = deployPlan.changes
            .filter((change) => change.destructive)
            .map((change) => change.description);
          throw new ServiceError(
            'destructive_change_not_confirmed',
            `This deploy removes things: ${destructive.join('; ')}. Confirm it (service deploy asks, or pass --allow-destructive).`,
            { details: deployPlan },
          );
        }
        for (const code of prepared.codes.values()) await deps.scripts.put(code, environmentId);
        const changes = deployPlan.changes.map((planned) => planned.change);
        await client.query('BEGIN');
        try {
          await client.query(
            `UPDATE deployments SET status = 'superseded' WHERE environment_id = $1 AND status IN ('applying', 'active')`,
            [environmentId],
          );
          await client.query(
            `INSERT INTO deployments (environment_id, version, config, yaml, scripts, changes, status, redeploy_of)
             VALUES ($1, $2, $3, $4, $5, $6, 'applying', $7)`,
            [
              environmentId,
              deployPlan.version,
              JSON.stringify(prepared.config),
              prepared.yaml,
              JSON.stringify(prepared.scripts),
              JSON.stringify(changes),
              options.redeployOf ?? null,
            ],
          );
          await client.query('COMMIT');
        } catch (error) {
          await client.query('ROLLBACK');
          throw error;
        }
        onProgress(`version ${deployPlan.version} recorded; applying ${changes.length} change(s)`);
        // A previous deploy that did not finish left its changes half applied: bring everything in line.
        await reconcile(environmentId, next, changes, previous?.status === 'applying', onProgress);
        await client.query(
          `UPDATE deployments SET status = 'active', activated_at = now() WHERE environment_id = $1 AND version = $2`,
          [environmentId, deployPlan.version],
        );
        const deployment = await current(environmentId, client);
        if (!deployment) throw new ServiceError('deploy_inconsistent', 'the deployment vanished while it was applied');
        onProgress(`version ${deployPlan.version} active`);
        return { plan: deployPlan, deployment };
      });
    },

    async list(environmentId: string): Promise<Omit<Deployment, 'config' | 'yaml' | 'scripts'>[]> {
      const result = await db.query<DeploymentRow>(
        'SELECT * FROM deployments WHERE environment_id = $1 ORDER BY version DESC LIMIT 100',
        [environmentId],
      );
      return result.rows.map((row) => {
        const { config: _config, yaml: _yaml, scripts: _scripts, ...rest } = toDeployment(row);
        return rest;
      });
    },

    async get(environmentId: string, version: number): Promise<Deployment> {
      const result = await db.query<DeploymentRow>(
        'SELECT * FROM deployments WHERE environment_id = $1 AND version = $2',
        [environmentId, version],
      );
      const row = result.rows[0];
      if (!row) throw new ServiceError('deployment_not_found', `Environment has no deployment version ${version}.`);
      return toDeployment(row);
    },

    /** The request that re-deploys an earlier version (its YAML and bundles), for rollbacks. */
    async requestFor(environmentId: string, version: number): Promise<DeployRequest> {
      const deployment = await this.get(environmentId, version);
      const scripts = await Promise.all(
        deployment.scripts.map(async (script) => ({
          integration: script.integration,
          kind: script.kind,
          name: script.name,
          code: await deps.scripts.get(script.hash, environmentId),
          source: script.source,
          sourcePath: script.sourcePath,
        })),
      );
      return { yaml: deployment.yaml, scripts };
    },

    /** The deployed definitions of one integration's syncs (to start them for a new connection). */
    async syncDefinitions(environmentId: string, integrationId: string): Promise<SyncDefinition[]> {
      const deployment = await current(environmentId);
      const integration = deployment?.config.integrations.find((candidate) => candidate.id === integrationId);
      if (!deployment || !integration) return [];
      return integration.syncs.flatMap((sync) => {
        const script = deployment.scripts.find(
          (s) => s.integration === integrationId && s.kind === 'sync' && s.name === sync.name,
        );
        return script ? [syncDefinition(environmentId, sync, script.hash, deployment.config.models)] : [];
      });
    },

    /** The deployed action, or `action_not_found` (never deployed, or removed by a deploy). */
    async actionDefinition(
      environmentId: string,
      integrationId: string,
      actionName: string,
    ): Promise<ActionDefinition> {
      const deployment = await current(environmentId);
      const script = deployment?.scripts.find(
        (s) => s.integration === integrationId && s.kind === 'action' && s.name === actionName,
      );
      if (!script) {
        throw new ServiceError(
          'action_not_found',
          `Integration '${integrationId}' has no deployed action '${actionName}'${deployment ? '' : ' (nothing is deployed in this environment)'}. Check the name, or deploy it.`,
        );
      }
      return { environmentId, integrationId, actionName, scriptHash: script.hash };
    },
  };
}

export type Deployments = ReturnType<typeof createDeployments>;
