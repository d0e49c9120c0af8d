/**
 * The settings schema is the one list of the variables the service reads, and docs/operations.md
 * ("Environment variables") documents that same list: a variable added to one and not the other fails here.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadSettings, settingsSchema } from './settings.js';

const OPERATIONS = new URL('../docs/operations.md', import.meta.url);

/** The variables named in the first column of the table under "## Environment variables". */
function documentedVariables(markdown: string): string[] {
  const section = markdown.split(/^## /m).find((part) => part.startsWith('Environment variables\n'));
  if (section === undefined) throw new Error('docs/operations.md has no "## Environment variables" section');
  const names = section
    .split('\n')
    .filter((line) => line.startsWith('| `'))
    .flatMap((line) => [...(line.split('|')[1] ?? '').matchAll(/`([A-Z][A-Z0-9_]*)`/g)].map((match) => match[1] ?? ''));
  return [...new Set(names)].sort();
}

describe('settings', () => {
  it('declares every variable docs/operations.md lists, and the doc lists every one it declares', () => {
    const documented = documentedVariables(readFileSync(OPERATIONS, 'utf8'));
    const declared = Object.keys(settingsSchema.shape).sort();
    expect(documented.length).toBeGreaterThan(40);
    expect(documented.filter((name) => !declared.includes(name))).toEqual([]);
    expect(declared.filter((name) => !documented.includes(name))).toEqual([]);
  });

  it('finds a variable missing from the doc', () => {
    const table =
      '## Environment variables\n\n| variable | default | meaning |\n| --- | --- | --- |\n| `PORT`, `HOST` | x | y |\n';
    expect(documentedVariables(table)).toEqual(['HOST', 'PORT']);
  });

  it('reads an empty path or name as unset, and refuses a malformed callback URL naming it', () => {
    const settings = loadSettings({
      SERVICE_PROVIDERS_FILE: '',
      SERVICE_WORKFLOW_BUNDLE: ' ',
      SERVICE_ENCRYPTION_KEY: '',
    });
    expect(settings.SERVICE_PROVIDERS_FILE).toBeUndefined();
    expect(settings.SERVICE_WORKFLOW_BUNDLE).toBeUndefined();
    expect(settings.SERVICE_ENCRYPTION_KEY).toBeUndefined();
    expect(loadSettings({ SERVICE_THREAD_MARKS_DIR: '/tmp/marks' }).SERVICE_THREAD_MARKS_DIR).toBe('/tmp/marks');
    expect(() => loadSettings({ SERVICE_CALLBACK_URL: 'not a url' })).toThrow(/SERVICE_CALLBACK_URL/);
  });

  it('reads SYNC_EXECUTION_TIME_LIMIT as ms (30 min by default), `none` as no limit, and refuses anything else naming it', () => {
    expect(loadSettings({}).SYNC_EXECUTION_TIME_LIMIT).toBe(1_800_000);
    expect(loadSettings({ SYNC_EXECUTION_TIME_LIMIT: '2h' }).SYNC_EXECUTION_TIME_LIMIT).toBe(7_200_000);
    expect(loadSettings({ SYNC_EXECUTION_TIME_LIMIT: ' None ' }).SYNC_EXECUTION_TIME_LIMIT).toBeNull();
    expect(loadSettings({ SYNC_EXECUTION_TIME_LIMIT: '' }).SYNC_EXECUTION_TIME_LIMIT).toBe(1_800_000);
    for (const bad of ['5s', '25h', '30', 'soon']) {
      expect(() => loadSettings({ SYNC_EXECUTION_TIME_LIMIT: bad }), bad).toThrow(
        /SYNC_EXECUTION_TIME_LIMIT.*expected a duration from 10s to 24h/s,
      );
    }
  });

  it('reads SYNC_RUN_MAX_EXECUTIONS (1000 by default) and refuses what is not a whole number from 2, naming it', () => {
    expect(loadSettings({}).SYNC_RUN_MAX_EXECUTIONS).toBe(1000);
    expect(loadSettings({ SYNC_RUN_MAX_EXECUTIONS: '50' }).SYNC_RUN_MAX_EXECUTIONS).toBe(50);
    for (const bad of ['1', '2.5', 'many']) {
      expect(() => loadSettings({ SYNC_RUN_MAX_EXECUTIONS: bad }), bad).toThrow(/SYNC_RUN_MAX_EXECUTIONS/);
    }
  });

  it('reads SYNC_EXECUTION_OPERATION_LIMIT (1000 by default) and refuses what is not a whole number from 100 to 48,000, naming it', () => {
    expect(loadSettings({}).SYNC_EXECUTION_OPERATION_LIMIT).toBe(1000);
    expect(loadSettings({ SYNC_EXECUTION_OPERATION_LIMIT: '400' }).SYNC_EXECUTION_OPERATION_LIMIT).toBe(400);
    for (const bad of ['99', '48001', '500.5', 'lots']) {
      expect(() => loadSettings({ SYNC_EXECUTION_OPERATION_LIMIT: bad }), bad).toThrow(
        /SYNC_EXECUTION_OPERATION_LIMIT/,
      );
    }
  });
});
