import { describe, expect, it } from 'vitest';
import { compileConfig } from '../config/index.js';
import { scriptRefsOf, type DeployedState } from './diff.js';
import { applySteps, planDeployment, syncDefinition } from './plan.js';

function state(yaml: string, hashes: Record<string, string> = {}): DeployedState {
  const result = compileConfig(yaml);
  if (!result.config) throw new Error(JSON.stringify(result.problems));
  return { config: result.config, scripts: scriptRefsOf(result.config, (script) => hashes[script.name] ?? 'h1') };
}

const yaml = (options: { runs?: string; description?: string; contacts?: boolean; ping?: boolean } = {}) => `
integrations:
  tracker:
    syncs:
      issues:
        description: ${options.description ?? 'Issues'}
        output: Issue
        endpoint: GET /issues
        sync_type: incremental
        runs: ${options.runs ?? 'every hour'}
${
  options.contacts === false
    ? ''
    : `      contacts:
        description: Contacts
        output: Contact
        endpoint: GET /contacts
        sync_type: full
        auto_start: false
`
}${
  options.ping === false
    ? ''
    : `    actions:
      ping:
        description: Ping
        output: Pong
        endpoint: POST /ping
`
}  crm:
    syncs:
      people:
        description: People
        output: Person
        endpoint: GET /people
        sync_type: full
        runs: every day
models:
  Issue:
    id: string
  Contact:
    id: string
  Person:
    id: string
  Pong:
    pong: boolean
`;

describe('planDeployment (pure: no database, no Temporal)', () => {
  it('a first deploy adds everything and ensures every sync, grouped by integration', () => {
    const plan = planDeployment(null, state(yaml()));
    expect(plan.changes.map((planned) => planned.description.slice(0, 2) + planned.change.kind)).toEqual([
      '+ sync_added',
      '+ sync_added',
      '+ sync_added',
      '+ action_added',
    ]);
    expect(plan.destructive).toBe(false);
    expect(plan.steps).toEqual([
      { kind: 'ensure_syncs', integration: 'tracker', syncs: ['issues', 'contacts'] },
      { kind: 'ensure_syncs', integration: 'crm', syncs: ['people'] },
    ]);
  });

  it('the same state again changes nothing and has nothing to do', () => {
    const plan = planDeployment({ ...state(yaml()), status: 'active' }, state(yaml()));
    expect(plan).toEqual({ changes: [], destructive: false, steps: [] });
  });

  it('only definition changes reach the entities: a new frequency does, a new description does not', () => {
    const before = { ...state(yaml()), status: 'active' as const };
    const runs = planDeployment(before, state(yaml({ runs: 'every 2 hours' })));
    expect(runs.changes.map((planned) => planned.change)).toEqual([
      { kind: 'sync_changed', integration: 'tracker', sync: 'issues', syncType: 'incremental', fields: ['runs'] },
    ]);
    expect(runs.steps).toEqual([{ kind: 'ensure_syncs', integration: 'tracker', syncs: ['issues'] }]);

    const described = planDeployment(before, state(yaml({ description: 'All issues' })));
    expect(described.changes).toHaveLength(1);
    expect(described.steps).toEqual([]);

    const script = planDeployment(before, state(yaml(), { people: 'h2' }));
    expect(script.steps).toEqual([{ kind: 'ensure_syncs', integration: 'crm', syncs: ['people'] }]);
  });

  it('removals are destructive and come before every start', () => {
    const plan = planDeployment(
      { ...state(yaml()), status: 'active' },
      state(yaml({ contacts: false, ping: false, runs: 'every 2 hours' })),
    );
    expect(plan.destructive).toBe(true);
    expect(plan.changes.filter((planned) => planned.destructive).map((planned) => planned.change.kind)).toEqual([
      'sync_removed',
      'action_removed',
    ]);
    expect(plan.steps).toEqual([
      { kind: 'remove_sync', integration: 'tracker', sync: 'contacts' },
      { kind: 'ensure_syncs', integration: 'tracker', syncs: ['issues'] },
    ]);
  });

  it('over a version whose apply did not finish, every sync is ensured again', () => {
    const plan = planDeployment({ ...state(yaml()), status: 'applying' }, state(yaml({ runs: 'every 2 hours' })));
    expect(plan.steps).toEqual([
      { kind: 'ensure_syncs', integration: 'tracker', syncs: ['issues', 'contacts'] },
      { kind: 'ensure_syncs', integration: 'crm', syncs: ['people'] },
    ]);
    expect(applySteps(state(yaml()).config, [], true)).toEqual(plan.steps);
  });

  it('a renamed integration: the old syncs removed first, the new ones ensured', () => {
    const renamed = state(yaml().replace('  crm:', '  crm-v2:'));
    const plan = planDeployment({ ...state(yaml()), status: 'active' }, renamed);
    expect(plan.steps).toEqual([
      { kind: 'remove_sync', integration: 'crm', sync: 'people' },
      { kind: 'ensure_syncs', integration: 'crm-v2', syncs: ['people'] },
    ]);
  });

  it('the definition an entity runs comes from the deployed config and the script hash', () => {
    const { config } = state(yaml());
    const people = config.integrations.find((integration) => integration.id === 'crm')!.syncs[0]!;
    expect(syncDefinition('env1', people, 'hash-people', config.models)).toEqual({
      environmentId: 'env1',
      integrationId: 'crm',
      syncName: 'people',
      syncType: 'full',
      runsMs: 86_400_000,
      autoStart: true,
      trackDeletes: false,
      models: ['Person'],
      scriptHash: 'hash-people',
      webhookSubscriptions: [],
    });
  });
});
