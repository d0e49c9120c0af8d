import { describe, expect, it } from 'vitest';
import { compileConfig } from '../../config/index.js';
import type { ServiceConfig } from '../../config/types.js';
import { modelSchemas } from '../generated.js';
import { modelIndex } from '../../config/checkRecord.js';
import { buildToolSet, inputFromArguments, structuredOutput, toolOf } from './tools.js';

function config(text: string): ServiceConfig {
  const { config: compiled, problems } = compileConfig(text);
  if (compiled === null) throw new Error(JSON.stringify(problems));
  return compiled;
}

const YAML = `
integrations:
  tracker:
    actions:
      create-issue:
        description: Creates an issue
        input: IssueInput
        output: Issue
        endpoint: POST /issues
      whoami:
        description: Says who the connection is
        output: Me
        endpoint: GET /me
  crm:
    actions:
      ping:
        description: Pong
        output: Me
        endpoint: GET /ping
models:
  IssueInput:
    title: string
    parent?: IssueInput
    labels?: Label[]
  Issue:
    id: string
    labels: Label[]
  Label:
    name: string
  Me:
    name: string
`;

describe('buildToolSet', () => {
  it('makes one tool per action of the integration, its schemas self-contained ($defs, recursion included)', () => {
    const set = buildToolSet(config(YAML), 'tracker');
    expect(set.tools.map((tool) => tool.name)).toEqual(['create-issue', 'whoami']);
    const create = set.byName.get('create-issue');
    expect(create?.inputSchema).toMatchObject({
      type: 'object',
      required: ['title'],
      properties: { parent: { $ref: '#/$defs/IssueInput' }, labels: { items: { $ref: '#/$defs/Label' } } },
      $defs: { IssueInput: { properties: { parent: { $ref: '#/$defs/IssueInput' } } }, Label: { type: 'object' } },
    });
    expect(JSON.stringify(create)).not.toContain('#/components/');
    // No input: no arguments.
    expect(set.byName.get('whoami')?.inputSchema).toEqual({
      type: 'object',
      properties: {},
      additionalProperties: false,
    });
    expect(buildToolSet(config(YAML), 'nobody').tools).toEqual([]);
  });

  it('exposes only what mcp_tools lists, in the order of the actions; an empty list exposes none', () => {
    const only = YAML.replace('  crm:\n', '    mcp_tools: [whoami]\n  crm:\n');
    expect(buildToolSet(config(only), 'tracker').tools.map((tool) => tool.name)).toEqual(['whoami']);
    const none = YAML.replace('  crm:\n', '    mcp_tools: []\n  crm:\n');
    expect(buildToolSet(config(none), 'tracker').tools).toEqual([]);
  });

  it('fingerprints what an agent sees: a description changes it, another integration does not', () => {
    const base = buildToolSet(config(YAML), 'tracker').fingerprint;
    expect(buildToolSet(config(YAML.replace('Pong', 'Pong!')), 'tracker').fingerprint).toBe(base);
    expect(buildToolSet(config(YAML.replace('Creates an issue', 'Opens an issue')), 'tracker').fingerprint).not.toBe(
      base,
    );
  });

  it('checks an output against the outputSchema', () => {
    const set = buildToolSet(config(YAML), 'tracker');
    const tool = set.byName.get('create-issue');
    if (!tool) throw new Error('no tool');
    expect(set.checkOutput(tool, { id: 'i', labels: [{ name: 'bug' }] })).toEqual({ valid: true });
    expect(set.checkOutput(tool, { id: 5, labels: [] }).valid).toBe(false);
    expect(set.checkOutput(tool, [{ id: 'i', labels: [] }]).valid).toBe(false);
    expect(set.checkOutput(tool, null).valid).toBe(false);
  });
});

describe('inputFromArguments', () => {
  const set = buildToolSet(config(YAML), 'tracker');
  const create = set.byName.get('create-issue');
  const whoami = set.byName.get('whoami');
  if (!create || !whoami) throw new Error('no tools');

  it('passes arguments that fit the input model as the input, unchanged', () => {
    const args = { title: 't', parent: { title: 'p' }, labels: [{ name: 'bug' }] };
    expect(inputFromArguments(create, args, set.models)).toEqual({ ok: true, input: args });
    expect(inputFromArguments(whoami, undefined, set.models)).toEqual({ ok: true, input: undefined });
    expect(inputFromArguments(whoami, {}, set.models)).toEqual({ ok: true, input: undefined });
  });

  it('names every problem with its path, nested ones included', () => {
    const result = inputFromArguments(create, { parent: { title: 1 }, labels: [{}], extra: true }, set.models);
    expect(result.ok).toBe(false);
    const paths = result.ok ? [] : result.problems.map((problem) => problem.path).sort();
    expect(paths).toEqual(['extra', 'labels[0].name', 'parent.title', 'title']);
    expect(inputFromArguments(whoami, { connection_id: 'c2' }, set.models)).toEqual({
      ok: false,
      problems: [{ path: 'connection_id', message: 'is not an argument: this tool takes no arguments' }],
    });
  });
});

describe('a type that is not an object at the top (the type expressions the de-facto format allows)', () => {
  const compiled = config(YAML);
  const models = modelSchemas(compiled);
  const index = modelIndex(compiled.models);
  const label = { kind: 'model', name: 'Label' } as const;
  const tool = toolOf(
    {
      name: 'tag',
      description: 'Tags',
      input: { kind: 'array', element: label },
      output: { kind: 'primitive', name: 'boolean' },
    },
    models,
    index,
  );

  it('is wrapped: the tool takes { input } and answers { result }, the models in $defs', () => {
    expect(tool.inputSchema).toEqual({
      type: 'object',
      properties: { input: { type: 'array', items: { $ref: '#/$defs/Label' } } },
      required: ['input'],
      additionalProperties: false,
      $defs: { Label: models['Label'] },
    });
    expect(tool.outputSchema).toEqual({
      type: 'object',
      properties: { result: { type: 'boolean' } },
      required: ['result'],
      additionalProperties: false,
    });
    expect(structuredOutput(tool, true)).toEqual({ result: true });
  });

  it('checks the wrapped input with paths under `input`', () => {
    expect(inputFromArguments(tool, { input: [{ name: 'bug' }] }, index)).toEqual({
      ok: true,
      input: [{ name: 'bug' }],
    });
    const bad = inputFromArguments(tool, { input: [{ name: 1 }], other: 1 }, index);
    expect(bad.ok ? [] : bad.problems.map((problem) => problem.path).sort()).toEqual(['input[0].name', 'other']);
    const missing = inputFromArguments(tool, {}, index);
    expect(missing.ok ? [] : missing.problems.map((problem) => problem.path)).toEqual(['input']);
  });

  it('leaves `input` optional when the type takes undefined, and gives no outputSchema for an action that returns nothing', () => {
    const optional = toolOf(
      {
        name: 'maybe',
        description: 'Maybe',
        input: {
          kind: 'union',
          members: [
            { kind: 'primitive', name: 'string' },
            { kind: 'primitive', name: 'undefined' },
          ],
        },
        output: { kind: 'primitive', name: 'undefined' },
      },
      models,
      index,
    );
    expect(optional.inputSchema.required).toBeUndefined();
    expect(optional.outputSchema).toBeUndefined();
    expect(inputFromArguments(optional, {}, index)).toEqual({ ok: true, input: undefined });
  });
});

describe('type expressions as an action’s input and output in service.yaml', () => {
  it('wraps them: `input: Label[]` takes { input }, `output: boolean` answers { result }, `output: void` has no outputSchema', () => {
    const text = YAML.replace(
      '  crm:\n',
      `      tag:
        description: Tags
        input: Label[]
        output: boolean
        endpoint: POST /tag
      forget:
        description: Forgets
        output: void
        endpoint: POST /forget
  crm:
`,
    );
    const set = buildToolSet(config(text), 'tracker');
    const tag = set.byName.get('tag');
    expect(tag?.inputSchema).toMatchObject({ properties: { input: { type: 'array' } }, required: ['input'] });
    expect(tag?.outputSchema).toMatchObject({ properties: { result: { type: 'boolean' } } });
    expect(set.byName.get('forget')?.outputSchema).toBeUndefined();
  });
});
