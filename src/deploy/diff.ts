/**
 * What a deploy changes, computed from the deployed and the new configuration (pure). Each change
 * says what happens to running syncs and stored records, as SPEC.md "Effects of deploying a
 * configuration" lays down. An integration id that changed shows as its syncs removed under the old
 * id and added under the new one, which is what it is.
 */
import type { ActionConfig, ModelConfig, ServiceConfig, SyncConfig } from '../config/types.js';

export type ScriptKind = 'sync' | 'action';

/** A deployed (or to-be-deployed) script: which sync or action, and the hash of its bundle. */
export interface ScriptRef {
  integration: string;
  kind: ScriptKind;
  name: string;
  hash: string;
}

export interface DeployedState {
  config: ServiceConfig;
  scripts: readonly ScriptRef[];
}

/** Every sync and action of a configuration, in declaration order, with the hash `hashOf` gives it. */
export function scriptRefsOf(config: ServiceConfig, hashOf: (script: Omit<ScriptRef, 'hash'>) => string): ScriptRef[] {
  return config.integrations.flatMap((integration) => {
    const refs: Omit<ScriptRef, 'hash'>[] = [
      ...integration.syncs.map((sync) => ({ integration: integration.id, kind: 'sync' as const, name: sync.name })),
      ...integration.actions.map((action) => ({
        integration: integration.id,
        kind: 'action' as const,
        name: action.name,
      })),
    ];
    return refs.map((ref) => ({ ...ref, hash: hashOf(ref) }));
  });
}

export type SyncField =
  | 'script'
  | 'models'
  | 'runs'
  | 'sync_type'
  | 'track_deletes'
  | 'record_validation'
  | 'auto_start'
  | 'endpoints'
  | 'input'
  | 'webhook_subscriptions'
  | 'description'
  | 'scopes';

export type DeployChange =
  | { kind: 'sync_added'; integration: string; sync: string; autoStart: boolean }
  | { kind: 'sync_removed'; integration: string; sync: string }
  | { kind: 'sync_changed'; integration: string; sync: string; syncType: 'full' | 'incremental'; fields: SyncField[] }
  | { kind: 'action_added'; integration: string; action: string }
  | { kind: 'action_removed'; integration: string; action: string }
  | { kind: 'action_changed'; integration: string; action: string; fields: string[] };

export const scriptKey = (integration: string, kind: ScriptKind, name: string): string =>
  `${integration}/${kind}/${name}`;

function hashes(state: DeployedState | null): Map<string, string> {
  return new Map(
    (state?.scripts ?? []).map((script) => [scriptKey(script.integration, script.kind, script.name), script.hash]),
  );
}

function syncsOf(config: ServiceConfig | undefined): Map<string, SyncConfig> {
  const syncs = new Map<string, SyncConfig>();
  for (const integration of config?.integrations ?? []) {
    for (const sync of integration.syncs) syncs.set(scriptKey(integration.id, 'sync', sync.name), sync);
  }
  return syncs;
}

function actionsOf(config: ServiceConfig | undefined): Map<string, ActionConfig> {
  const actions = new Map<string, ActionConfig>();
  for (const integration of config?.integrations ?? []) {
    for (const action of integration.actions) actions.set(scriptKey(integration.id, 'action', action.name), action);
  }
  return actions;
}

/**
 * JSON with object keys sorted: a deployed config read back from jsonb has its keys in Postgres's order,
 * not the compiler's, and must still compare equal.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, inner: unknown) =>
    inner !== null && typeof inner === 'object' && !Array.isArray(inner)
      ? Object.fromEntries(
          Object.entries(inner as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
        )
      : inner,
  );
}

const same = (a: unknown, b: unknown): boolean => canonicalJson(a) === canonicalJson(b);

/** The model definitions a sync's records follow, referenced models included, as comparable JSON. */
function modelShape(config: ServiceConfig, names: readonly string[]): string {
  const byName = new Map<string, ModelConfig>(config.models.map((model) => [model.name, model]));
  const seen = new Set<string>();
  const pending = [...names];
  while (pending.length > 0) {
    const name = pending.pop();
    if (name === undefined || seen.has(name)) continue;
    seen.add(name);
    const model = byName.get(name);
    if (model) pending.push(...referencedModels(model.fields));
  }
  return canonicalJson([...seen].sort().map((name) => byName.get(name) ?? null));
}

/** Names of the models a type expression tree refers to (walks any nesting). */
function referencedModels(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(referencedModels);
  if (value === null || typeof value !== 'object') return [];
  const node = value as Record<string, unknown>;
  const own = node['kind'] === 'model' && typeof node['name'] === 'string' ? [node['name']] : [];
  return [...own, ...Object.values(node).flatMap(referencedModels)];
}

export function diffDeployments(previous: DeployedState | null, next: DeployedState): DeployChange[] {
  const changes: DeployChange[] = [];
  const oldHashes = hashes(previous);
  const newHashes = hashes(next);
  const oldSyncs = syncsOf(previous?.config);
  const newSyncs = syncsOf(next.config);

  for (const [key, sync] of newSyncs) {
    const before = oldSyncs.get(key);
    if (!before || !previous) {
      changes.push({ kind: 'sync_added', integration: sync.integration, sync: sync.name, autoStart: sync.autoStart });
      continue;
    }
    const fields: SyncField[] = [];
    if (oldHashes.get(key) !== newHashes.get(key)) fields.push('script');
    const outputModels = (s: SyncConfig): string[] => s.outputs.map((output) => output.model);
    if (
      !same(outputModels(before), outputModels(sync)) ||
      modelShape(previous.config, outputModels(before)) !== modelShape(next.config, outputModels(sync))
    ) {
      fields.push('models');
    }
    if (before.runsMs !== sync.runsMs) fields.push('runs');
    if (before.syncType !== sync.syncType) fields.push('sync_type');
    if (before.trackDeletes !== sync.trackDeletes) fields.push('track_deletes');
    if (before.autoStart !== sync.autoStart) fields.push('auto_start');
    if ((before.recordValidation ?? 'off') !== (sync.recordValidation ?? 'off')) fields.push('record_validation');
    if (
      !same(
        before.outputs.map((o) => o.endpoint),
        sync.outputs.map((o) => o.endpoint),
      )
    )
      fields.push('endpoints');
    if (before.input !== sync.input) fields.push('input');
    if (!same(before.webhookSubscriptions, sync.webhookSubscriptions)) fields.push('webhook_subscriptions');
    if (before.description !== sync.description) fields.push('description');
    if (!same(before.scopes, sync.scopes)) fields.push('scopes');
    if (fields.length > 0) {
      changes.push({
        kind: 'sync_changed',
        integration: sync.integration,
        sync: sync.name,
        syncType: sync.syncType,
        fields,
      });
    }
  }
  for (const [key, sync] of oldSyncs) {
    if (!newSyncs.has(key)) changes.push({ kind: 'sync_removed', integration: sync.integration, sync: sync.name });
  }

  const oldActions = actionsOf(previous?.config);
  const newActions = actionsOf(next.config);
  for (const [key, action] of newActions) {
    const before = oldActions.get(key);
    if (!before) {
      changes.push({ kind: 'action_added', integration: action.integration, action: action.name });
      continue;
    }
    const fields: string[] = [];
    if (oldHashes.get(key) !== newHashes.get(key)) fields.push('script');
    if (!same(before.endpoint, action.endpoint)) fields.push('endpoint');
    if (before.input !== action.input || before.output !== action.output) fields.push('models');
    if (before.description !== action.description) fields.push('description');
    if (fields.length > 0)
      changes.push({ kind: 'action_changed', integration: action.integration, action: action.name, fields });
  }
  for (const [key, action] of oldActions) {
    if (!newActions.has(key))
      changes.push({ kind: 'action_removed', integration: action.integration, action: action.name });
  }
  return changes;
}

/** Removing a sync erases its records; removing an action makes its trigger fail. Both need consent. */
export function isDestructive(change: DeployChange): boolean {
  return change.kind === 'sync_removed' || change.kind === 'action_removed';
}

/** One line of the preview: the change and, per SPEC.md, what it does. */
export function describeChange(change: DeployChange): string {
  switch (change.kind) {
    case 'sync_added':
      return `+ sync ${change.integration}/${change.sync}: ${change.autoStart ? 'starts for every connection of the integration' : 'created paused (auto_start: false); start it through the API'}`;
    case 'sync_removed':
      return `- sync ${change.integration}/${change.sync}: stops, and ALL its cached records are erased for every connection`;
    case 'sync_changed':
      return `~ sync ${change.integration}/${change.sync} (${change.fields.join(', ')}): ${
        change.fields.includes('script') || change.fields.includes('models')
          ? change.syncType === 'full'
            ? 'the new script and model apply to all records from the next run'
            : 'older records keep their content; trigger a full resync to refetch them with the new script and model'
          : 'takes effect from the next run, keeping the sync’s state'
      }`;
    case 'action_added':
      return `+ action ${change.integration}/${change.action}`;
    case 'action_removed':
      return `- action ${change.integration}/${change.action}: any request that triggers it fails from now on`;
    case 'action_changed':
      return `~ action ${change.integration}/${change.action} (${change.fields.join(', ')})`;
  }
}
