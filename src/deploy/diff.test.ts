import { describe, expect, it } from 'vitest';
import { compileConfig } from '../config/index.js';
import type { ServiceConfig } from '../config/types.js';
import { describeChange, diffDeployments, isDestructive, scriptRefsOf, type DeployedState } from './diff.js';

function config(yaml: string): ServiceConfig {
  const result = compileConfig(yaml);
  if (!result.config) throw new Error(JSON.stringify(result.problems));
  return result.config;
}

function state(yaml: string, hashes: Record<string, string> = {}): DeployedState {
  const compiled = config(yaml);
  return { config: compiled, scripts: scriptRefsOf(compiled, (script) => hashes[script.name] ?? 'h1') };
}

const base = `
integrations:
  tracker:
    syncs:
      issues:
        description: Issues
        output: Issue
        endpoint: GET /issues
        sync_type: incremental
        runs: every hour
      users:
        description: Users
        output: User
        endpoint: GET /users
        sync_type: full
        track_deletes: true
    actions:
      create-issue:
        description: Create
        output: Issue
        endpoint: POST /issues
models:
  Issue:
    id: string
    title: string
  User:
    id: string
    name: string
`;

describe('diffDeployments: what a deploy changes (SPEC.md "Effects of deploying a configuration")', () => {
  it('a first deploy adds every sync and action', () => {
    const changes = diffDeployments(null, state(base));
    expect(changes.map((change) => change.kind).sort()).toEqual(['action_added', 'sync_added', 'sync_added']);
    expect(changes.some(isDestructive)).toBe(false);
  });

  it('the same deploy again changes nothing', () => {
    expect(diffDeployments(state(base), state(base))).toEqual([]);
  });

  it('a removed sync and a removed action are destructive and say what they do', () => {
    const next = base
      .replace(/ {6}users:[\s\S]*?track_deletes: true\n/, '')
      .replace(/ {4}actions:[\s\S]*?endpoint: POST \/issues\n/, '');
    const changes = diffDeployments(state(base), state(next));
    expect(changes).toEqual([
      { kind: 'sync_removed', integration: 'tracker', sync: 'users' },
      { kind: 'action_removed', integration: 'tracker', action: 'create-issue' },
    ]);
    expect(changes.every(isDestructive)).toBe(true);
    expect(describeChange(changes[0]!)).toMatch(/records are erased/);
    expect(describeChange(changes[1]!)).toMatch(/fails/);
  });

  it('a changed integration id is the old syncs removed and new ones added', () => {
    const changes = diffDeployments(state(base), state(base.replace('  tracker:', '  tracker-v2:')));
    expect(changes.filter((change) => change.kind === 'sync_removed').map((change) => change.integration)).toEqual([
      'tracker',
      'tracker',
    ]);
    expect(changes.filter((change) => change.kind === 'sync_added').map((change) => change.integration)).toEqual([
      'tracker-v2',
      'tracker-v2',
    ]);
  });

  it('a changed script or model says how full and incremental syncs take it', () => {
    const changedModel = base.replace('    name: string', '    name: string\n    email: string');
    const [users] = diffDeployments(state(base), state(changedModel));
    expect(users).toEqual({
      kind: 'sync_changed',
      integration: 'tracker',
      sync: 'users',
      syncType: 'full',
      fields: ['models'],
    });
    expect(describeChange(users!)).toMatch(/apply to all records from the next run/);

    const [issues] = diffDeployments(state(base), state(base, { issues: 'h2' }));
    expect(issues).toEqual({
      kind: 'sync_changed',
      integration: 'tracker',
      sync: 'issues',
      syncType: 'incremental',
      fields: ['script'],
    });
    expect(describeChange(issues!)).toMatch(/full resync/);
  });

  it('a changed runs is a change of schedule that keeps the sync', () => {
    const [change] = diffDeployments(state(base), state(base.replace('every hour', 'every 30 minutes')));
    expect(change).toMatchObject({ kind: 'sync_changed', sync: 'issues', fields: ['runs'] });
    expect(describeChange(change!)).toMatch(/keeping the sync/);
  });
});
