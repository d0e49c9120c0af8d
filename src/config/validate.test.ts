import { describe, expect, it } from 'vitest';
import { formatProblems, type ConfigProblem } from './problems.js';
import type { ServiceConfig, SyncConfig } from './types.js';
import { compileConfig } from './validate.js';

/** Strips the indentation of the first line from every line, so YAML can be written inline. */
function yaml(text: string): string {
  const lines = text.replace(/^\n/, '').split('\n');
  const indent = /^ */.exec(lines[0] ?? '')?.[0].length ?? 0;
  return lines.map((line) => line.slice(indent)).join('\n');
}

function compile(text: string): { config: ServiceConfig | null; problems: ConfigProblem[] } {
  return compileConfig(yaml(text));
}

function valid(text: string): ServiceConfig {
  const result = compile(text);
  const errors = result.problems.filter((p) => p.severity === 'error');
  expect(errors, formatProblems('service.yaml', errors)).toEqual([]);
  if (result.config === null) throw new Error('no config');
  return result.config;
}

function codes(text: string): string[] {
  return compile(text).problems.map((p) => p.code);
}

function only(text: string): ConfigProblem {
  const { problems, config } = compile(text);
  expect(problems, formatProblems('service.yaml', problems)).toHaveLength(1);
  const [problem] = problems;
  if (problem === undefined) throw new Error('unreachable');
  if (problem.severity === 'error') expect(config).toBeNull();
  return problem;
}

const MODELS = `
models:
  Issue:
    id: string
    title: string
`;

/** A config with one sync whose body is `body` (indented under the sync), plus the Issue model. */
function withSync(body: string, models = MODELS): string {
  const indented = yaml(body)
    .split('\n')
    .map((line) => `        ${line}`)
    .join('\n');
  return `
integrations:
  github:
    syncs:
      issues:
${indented}
${yaml(models)}`;
}

function sync(body: string, models = MODELS): SyncConfig {
  const config = valid(withSync(body, models));
  const found = config.integrations[0]?.syncs[0];
  if (found === undefined) throw new Error('no sync');
  return found;
}

const BASE_SYNC = `
description: d
output: Issue
endpoint: GET /issues
sync_type: incremental
`;

describe('layout and required fields', () => {
  it('normalizes a minimal sync with the SPEC defaults: runs 24h, auto_start true, track_deletes false', () => {
    expect(sync(BASE_SYNC)).toEqual({
      name: 'issues',
      integration: 'github',
      description: 'd',
      syncType: 'incremental',
      runs: '24h',
      runsMs: 86_400_000,
      autoStart: true,
      trackDeletes: false,
      outputs: [{ model: 'Issue', endpoint: { method: 'GET', path: '/issues' } }],
      input: null,
      scopes: [],
      webhookSubscriptions: [],
      recordValidation: 'off',
    });
  });

  it('reads every sync field', () => {
    const result = sync(
      `
      description: d
      output: Issue
      endpoint: GET /issues
      sync_type: full
      runs: 30m
      input: Repo
      scopes: [repo, user]
      auto_start: false
      track_deletes: true
      webhook_subscriptions: issue.created
    `,
      `${MODELS}  Repo:\n    name: string\n`,
    );
    expect(result).toMatchObject({
      syncType: 'full',
      runsMs: 1_800_000,
      input: 'Repo',
      scopes: ['repo', 'user'],
      autoStart: false,
      trackDeletes: true,
      webhookSubscriptions: ['issue.created'],
    });
  });

  it('reads an action with its defaults', () => {
    const config = valid(`
      integrations:
        github:
          actions:
            create-issue:
              description: create
              output: Issue
              endpoint: POST /issues
      ${MODELS.replace(/\n/g, '\n      ')}
    `);
    expect(config.integrations[0]?.actions).toEqual([
      {
        name: 'create-issue',
        integration: 'github',
        description: 'create',
        output: 'Issue',
        endpoint: { method: 'POST', path: '/issues' },
        input: null,
        scopes: [],
      },
    ]);
  });

  it('reports each missing required field of a sync at the sync', () => {
    const { problems } = compile(withSync('scopes: []'));
    expect(problems.map((p) => [p.code, p.path.join('.')]).sort()).toEqual([
      ['missing_field', 'integrations.github.syncs.issues.description'],
      ['missing_field', 'integrations.github.syncs.issues.endpoint'],
      ['missing_field', 'integrations.github.syncs.issues.output'],
      ['missing_field', 'integrations.github.syncs.issues.sync_type'],
    ]);
    expect(problems.map((p) => `${p.line}:${p.column}`)).toEqual(['4:7', '4:7', '4:7', '4:7']);
  });

  it('reports missing action fields and a missing integrations key', () => {
    expect(codes('integrations:\n  x:\n    actions:\n      a:\n        description: d\n')).toEqual([
      'missing_field',
      'missing_field',
    ]);
    expect(only('models: {}').code).toBe('missing_field');
  });

  it('reads empty maps (`syncs:` with nothing after it) as empty, and an empty file as an error', () => {
    expect(valid('integrations:\n  github:\n    syncs:\n    actions:\nmodels:\n').integrations).toEqual([
      { id: 'github', syncs: [], actions: [] },
    ]);
    expect(only('').code).toBe('empty_config');
    expect(only('# only a comment\n').code).toBe('empty_config');
  });

  it('reports a wrong value type with what was expected and what was found', () => {
    const problem = only(withSync(`${BASE_SYNC}\nauto_start: yes please`));
    expect(problem).toMatchObject({ code: 'invalid_type', line: 10, column: 21 });
    expect(problem.message).toContain('expected true or false, got the string "yes please"');
    expect(only(withSync(BASE_SYNC.replace('description: d', 'description: 3'))).message).toContain('got number 3');
    expect(only('integrations:\n  g:\n    syncs:\n      s: hello\n').message).toBe(
      'expected a mapping, got the string "hello"',
    );
  });

  it('rejects a sync_type outside the enum, suggesting the nearest', () => {
    const problem = only(withSync(BASE_SYNC.replace('incremental', 'ful')));
    expect(problem.code).toBe('invalid_value');
    expect(problem.message).toContain("did you mean 'full'?");
  });
});

describe('unknown keys', () => {
  it('are errors with a did-you-mean suggestion, at the key', () => {
    const problem = only(withSync(`${BASE_SYNC}\nauto_strat: false`));
    expect(problem).toMatchObject({ code: 'unknown_key', line: 10, column: 9 });
    expect(problem.message).toBe("unknown key 'auto_strat' in sync 'issues'; did you mean 'auto_start'?");
  });

  it('are warnings, listing the keys read there, when nothing is close (the file stays valid)', () => {
    const problem = only(`integrations: {}\nmodels: {}\nzzz: 1\n`);
    expect(problem).toMatchObject({ severity: 'warning', code: 'ignored_key', line: 3, column: 1 });
    expect(problem.message).toBe(
      "unknown key 'zzz' at the top level is ignored (the keys read here: integrations, models)",
    );
  });

  it('apply to integrations, actions and reserved model keys', () => {
    expect(codes('integrations:\n  x:\n    sincs: {}\n')).toEqual(['unknown_key']);
    const model = only(`integrations: {}\nmodels:\n  A:\n    __extend: B\n  B:\n    x: string\n`);
    expect(model.message).toContain("did you mean '__extends'?");
  });
});

describe('auto_starts alias', () => {
  it('is read as auto_start with a warning naming the right spelling', () => {
    const { config, problems } = compile(withSync(`${BASE_SYNC}\nauto_starts: false`));
    expect(problems).toMatchObject([{ severity: 'warning', code: 'deprecated_key', line: 10 }]);
    expect(problems[0]?.message).toContain("write 'auto_start'");
    expect(config?.integrations[0]?.syncs[0]?.autoStart).toBe(false);
  });

  it('together with auto_start is an error', () => {
    expect(only(withSync(`${BASE_SYNC}\nauto_start: true\nauto_starts: false`)).code).toBe('conflicting_keys');
  });
});

describe('output and endpoint', () => {
  const twoModels = `${MODELS}  Comment:\n    id: number\n`;

  it('pairs the n-th endpoint with the n-th output model', () => {
    const result = sync(
      `description: d\noutput: [Issue, Comment]\nendpoint: [GET /issues, POST /comments/:id]\nsync_type: full`,
      twoModels,
    );
    expect(result.outputs).toEqual([
      { model: 'Issue', endpoint: { method: 'GET', path: '/issues' } },
      { model: 'Comment', endpoint: { method: 'POST', path: '/comments/:id' } },
    ]);
  });

  it('requires a list of endpoints of the same length when output is a list', () => {
    const single = only(
      withSync(`description: d\noutput: [Issue, Comment]\nendpoint: GET /issues\nsync_type: full`, twoModels),
    );
    expect(single.code).toBe('output_endpoint_mismatch');
    expect(single.message).toContain('endpoint must be a list of 2');
    const short = only(
      withSync(`description: d\noutput: [Issue, Comment]\nendpoint: [GET /issues]\nsync_type: full`, twoModels),
    );
    expect(short.code).toBe('output_endpoint_mismatch');
    expect(only(withSync(`description: d\noutput: Issue\nendpoint: [GET /a, GET /b]\nsync_type: full`)).code).toBe(
      'output_endpoint_mismatch',
    );
  });

  it('rejects one model twice in an output list', () => {
    expect(
      codes(withSync(`description: d\noutput: [Issue, Issue]\nendpoint: [GET /a, GET /b]\nsync_type: full`)),
    ).toEqual(['duplicate_output']);
  });

  it.each([
    ['get /issues', "write the method in capitals: 'GET'"],
    ['FETCH /issues', "'FETCH' is not one of GET, POST, PUT, PATCH, DELETE"],
    ['GET issues', "the path must start with '/'"],
    ['GET /issues?state=open', 'the path must not carry a query string'],
    ['GET /my issues', 'the path must not contain spaces'],
  ])('rejects the endpoint %j with the expected form and a hint', (endpoint, hint) => {
    const problem = only(withSync(BASE_SYNC.replace('GET /issues', endpoint)));
    expect(problem.code).toBe('invalid_endpoint');
    expect(problem.message).toContain(hint);
    expect(problem.message).toContain('"<METHOD> <URL-PATH>"');
  });

  it('checks each endpoint of a list, at its index', () => {
    const problem = only(
      withSync(`description: d\noutput: [Issue, Comment]\nendpoint: [GET /a, get /b]\nsync_type: full`, twoModels),
    );
    expect(problem).toMatchObject({
      code: 'invalid_endpoint',
      path: ['integrations', 'github', 'syncs', 'issues', 'endpoint', 1],
    });
  });

  it('checks action endpoints the same way', () => {
    const text = `integrations:\n  g:\n    actions:\n      a:\n        description: d\n        output: Issue\n        endpoint: PUSH /x\n${MODELS}`;
    expect(codes(text)).toEqual(['invalid_endpoint']);
  });
});

describe('runs', () => {
  it.each([
    ['30m', 1_800_000],
    ['1h', 3_600_000],
    ['2 hours', 7_200_000],
    ['1d', 86_400_000],
    ['"90000"', 90_000],
    ['every 30 minutes', 1_800_000],
    ['every hour', 3_600_000],
    ['every day', 86_400_000],
    ['every 2 hours', 7_200_000],
    ['Every  Week', 604_800_000],
    ['every minute', 60_000],
  ])('accepts %j as %d ms', (runs, ms) => {
    expect(sync(`${BASE_SYNC}\nruns: ${runs}`).runsMs).toBe(ms);
  });

  it.each(['every other day', 'hourly', '1 fortnight', 'every', 'soon'])(
    'rejects %j listing the accepted forms',
    (runs) => {
      const problem = only(withSync(`${BASE_SYNC}\nruns: ${runs}`));
      expect(problem.code).toBe('invalid_runs');
      expect(problem.message).toContain('"every 30 minutes"');
    },
  );

  it.each(['29s', 'every 10 seconds', '"500"', '-1h'])('rejects %j as below the 30-second minimum', (runs) => {
    const problem = only(withSync(`${BASE_SYNC}\nruns: ${runs}`));
    expect(problem.code).toBe('runs_below_minimum');
    expect(problem.message).toContain('every 30 seconds');
  });

  it.each([
    ['30s', 30_000],
    ['45 seconds', 45_000],
    ['every 30 seconds', 30_000],
    ['"30000"', 30_000],
  ])('accepts %j, at or above the 30-second minimum', (runs, millis) => {
    const { config, problems } = compileConfig(withSync(`${BASE_SYNC}\nruns: ${runs}`));
    expect(problems).toEqual([]);
    expect(config?.integrations[0]?.syncs[0]?.runsMs).toBe(millis);
  });

  it('rejects a number (it must be a string) with the accepted forms', () => {
    const problem = only(withSync(`${BASE_SYNC}\nruns: 5`));
    expect(problem.code).toBe('invalid_type');
    expect(problem.message).toContain('every <duration>');
  });
});

describe('model references', () => {
  it('requires output, input and __extends models to exist, with suggestions', () => {
    const text = withSync(`description: d\noutput: Isue\nendpoint: GET /x\nsync_type: full\ninput: Nope`);
    const { problems } = compile(text);
    expect(problems.map((p) => p.code)).toEqual(['unknown_model', 'unknown_model']);
    expect(problems[0]?.message).toContain("did you mean 'Issue'?");
    expect(problems[1]?.message).toContain('declared: Issue');
    expect(codes(`integrations: {}\nmodels:\n  A:\n    __extends: [B, Missing]\n  B:\n    x: string\n`)).toEqual([
      'unknown_model',
    ]);
    const action = `integrations:\n  g:\n    actions:\n      a:\n        description: d\n        output: Out\n        input: In\n        endpoint: GET /x\n${MODELS}`;
    expect(codes(action)).toEqual(['unknown_model', 'unknown_model']);
  });
});

describe('the id rule', () => {
  it('requires an id field on every sync output model', () => {
    const problem = only(withSync(BASE_SYNC, `models:\n  Issue:\n    title: string\n`));
    expect(problem.code).toBe('missing_id');
    expect(problem.path).toEqual(['integrations', 'github', 'syncs', 'issues', 'output']);
  });

  it('requires id to be a string or number; an optional one is a warning', () => {
    expect(only(withSync(BASE_SYNC, `models:\n  Issue:\n    id?: string\n`)).code).toBe('nullable_id');
    expect(only(withSync(BASE_SYNC, `models:\n  Issue:\n    id: boolean\n`)).code).toBe('invalid_id');
    expect(only(withSync(BASE_SYNC, `models:\n  Issue:\n    id: string[]\n`)).code).toBe('invalid_id');
    sync(BASE_SYNC, `models:\n  Issue:\n    id: string | number\n`);
    sync(BASE_SYNC, `models:\n  Issue:\n    id: integer\n`);
  });

  it('accepts an inherited id', () => {
    const result = valid(
      withSync(BASE_SYNC, `models:\n  Base:\n    id: string\n  Issue:\n    __extends: Base\n    title: string\n`),
    );
    expect(result.models.find((m) => m.name === 'Issue')?.fields.map((f) => f.name)).toEqual(['id', 'title']);
  });

  it('does not apply to action outputs', () => {
    valid(
      `integrations:\n  g:\n    actions:\n      a:\n        description: d\n        output: Ok\n        endpoint: GET /x\nmodels:\n  Ok:\n    ok: boolean\n`,
    );
  });
});

describe('models', () => {
  const fieldsOf = (models: string) => {
    const config = valid(`integrations: {}\n${yaml(models)}`);
    return config.models;
  };

  it('follows the type table and keeps unions, literals and references', () => {
    const [model] = fieldsOf(`
      models:
        A:
          a: bool
          b: char
          c: int
          d: date
          e: open | closed | string
          f: B[]
          g: B | null | undefined
        B:
          x: integer
    `);
    expect(model?.fields.map((f) => [f.name, f.type])).toEqual([
      ['a', { kind: 'primitive', name: 'boolean' }],
      ['b', { kind: 'primitive', name: 'string' }],
      ['c', { kind: 'primitive', name: 'number' }],
      ['d', { kind: 'primitive', name: 'Date' }],
      [
        'e',
        {
          kind: 'union',
          members: [
            { kind: 'literal', value: 'open' },
            { kind: 'literal', value: 'closed' },
            { kind: 'primitive', name: 'string' },
          ],
        },
      ],
      ['f', { kind: 'array', element: { kind: 'model', name: 'B' } }],
      [
        'g',
        {
          kind: 'union',
          members: [
            { kind: 'model', name: 'B' },
            { kind: 'primitive', name: 'null' },
            { kind: 'primitive', name: 'undefined' },
          ],
        },
      ],
    ]);
  });

  it('reads literals with spaces, Date, object, any and arrays of literals', () => {
    const [model] = fieldsOf(`
      models:
        A:
          status: in progress | done
          at: Date
          blob: object
          raw: any
          flags: on[]
    `);
    expect(model?.fields.map((f) => f.type)).toEqual([
      {
        kind: 'union',
        members: [
          { kind: 'literal', value: 'in progress' },
          { kind: 'literal', value: 'done' },
        ],
      },
      { kind: 'primitive', name: 'Date' },
      { kind: 'primitive', name: 'object' },
      { kind: 'primitive', name: 'any' },
      { kind: 'array', element: { kind: 'literal', value: 'on' } },
    ]);
  });

  it('reads optional fields, number/boolean literals, null, inline objects and YAML lists', () => {
    const [model] = fieldsOf(`
      models:
        A:
          name?: string
          count: 3
          on: true
          level: 1 | 2.5 | -3
          gone: null
          nested:
            deep?:
              x: number
            __string: string
          tags: [string]
          mixed: [string, number]
    `);
    const byName = Object.fromEntries(model?.fields.map((f) => [f.name, f]) ?? []);
    expect(byName['name']).toEqual({ name: 'name', optional: true, type: { kind: 'primitive', name: 'string' } });
    expect(byName['count']?.type).toEqual({ kind: 'literal', value: 3 });
    expect(byName['on']?.type).toEqual({ kind: 'literal', value: true });
    expect(byName['level']?.type).toEqual({
      kind: 'union',
      members: [
        { kind: 'literal', value: 1 },
        { kind: 'literal', value: 2.5 },
        { kind: 'literal', value: -3 },
      ],
    });
    expect(byName['gone']?.type).toEqual({ kind: 'primitive', name: 'null' });
    expect(byName['nested']?.type).toEqual({
      kind: 'object',
      fields: [
        {
          name: 'deep',
          optional: true,
          type: {
            kind: 'object',
            fields: [{ name: 'x', optional: false, type: { kind: 'primitive', name: 'number' } }],
            stringIndex: null,
          },
        },
      ],
      stringIndex: { kind: 'primitive', name: 'string' },
    });
    expect(byName['tags']?.type).toEqual({ kind: 'array', element: { kind: 'primitive', name: 'string' } });
    expect(byName['mixed']?.type).toEqual({
      kind: 'array',
      element: {
        kind: 'union',
        members: [
          { kind: 'primitive', name: 'string' },
          { kind: 'primitive', name: 'number' },
        ],
      },
    });
  });

  it('flattens __extends with several parents, own fields overriding, __string inherited', () => {
    const models = fieldsOf(`
      models:
        A:
          a: string
          shared: number
          __string: number
        B:
          b: boolean
        C:
          __extends: [A, B]
          shared: string
          c: date
    `);
    const c = models.find((m) => m.name === 'C');
    expect(c?.extends).toEqual(['A', 'B']);
    expect(c?.fields.map((f) => `${f.name}:${f.type.kind === 'primitive' ? f.type.name : f.type.kind}`)).toEqual([
      'a:string',
      'b:boolean',
      'shared:string',
      'c:Date',
    ]);
    expect(c?.stringIndex).toEqual({ kind: 'primitive', name: 'number' });
  });

  it('reports two parents giving one field different types, unless the child declares it', () => {
    const conflict = `integrations: {}\nmodels:\n  A:\n    x: string\n  B:\n    x: number\n  C:\n    __extends: [A, B]\n`;
    expect(only(conflict).code).toBe('conflicting_inherited_field');
    valid(`${conflict}    x: boolean\n`);
  });

  it('reports __extends cycles once, and a model extending itself', () => {
    const { problems } = compile(
      `integrations: {}\nmodels:\n  A:\n    __extends: B\n  B:\n    __extends: C\n  C:\n    __extends: A\n`,
    );
    expect(problems.map((p) => p.code)).toEqual(['circular_extends']);
    expect(problems[0]?.message).toContain('A → B → C → A');
    expect(only(`integrations: {}\nmodels:\n  A:\n    __extends: A\n`).code).toBe('circular_extends');
  });

  it('rejects unreadable type expressions, empty types and bad names', () => {
    expect(
      codes(
        `integrations: {}\nmodels:\n  A:\n    a: Record<string, number>\n    b: string |\n    c: (string\n    e:\n`,
      ),
    ).toEqual(['invalid_type_expression', 'invalid_type_expression', 'invalid_type_expression', 'missing_type']);
    expect(codes(`integrations: {}\nmodels:\n  my-model:\n    a: string\n  string:\n    a: string\n`)).toEqual([
      'invalid_name',
      'invalid_name',
    ]);
    expect(codes(`integrations: {}\nmodels:\n  A:\n    a: string\n    a?: number\n`)).toEqual(['redeclared_field']);
  });

  it('warns when a literal is one typo away from a type or model name, and quoting silences it', () => {
    const problem = only(`integrations: {}\nmodels:\n  A:\n    a: strnig\n    b: "'strnig'"\n`);
    expect(problem).toMatchObject({ severity: 'warning', code: 'literal_looks_like_type' });
    const model = compile(`integrations: {}\nmodels:\n  A:\n    c: Usr\n  User:\n    x: string\n`).problems[0];
    expect(model?.message).toContain("did you mean the model 'User'?");
  });
});

describe('names', () => {
  it('restricts integration ids and sync/action names to file- and URL-safe names', () => {
    const text = `integrations:\n  "git hub":\n    actions:\n      "a/b":\n        description: d\n        output: Issue\n        endpoint: GET /x\n${MODELS}`;
    expect(codes(text)).toEqual(['invalid_name', 'invalid_name']);
  });

  it('reserves the integration id "build": compile writes and empties service-integrations/build/', () => {
    const problem = only('integrations:\n  build: {}\n');
    expect(problem).toMatchObject({ code: 'invalid_name', line: 2, column: 3 });
    expect(problem.message).toContain('reserved');
  });
});

describe('mcp_tools (the actions exposed to AI agents)', () => {
  const ACTIONS = `
integrations:
  github:
    actions:
      create-issue:
        description: Creates an issue
        output: Issue
        endpoint: POST /issues
      close-issue:
        description: Closes an issue
        output: Issue
        endpoint: POST /issues/close
`;

  it('is absent unless written (every action is a tool), and kept in the order written', () => {
    expect(valid(`${ACTIONS}${MODELS}`).integrations[0]?.mcpTools).toBeUndefined();
    const config = valid(`${ACTIONS}    mcp_tools: [close-issue, create-issue]\n${MODELS}`);
    expect(config.integrations[0]?.mcpTools).toEqual(['close-issue', 'create-issue']);
    expect(valid(`${ACTIONS}    mcp_tools: []\n${MODELS}`).integrations[0]?.mcpTools).toEqual([]);
    expect(valid(`${ACTIONS}    mcp_tools: close-issue\n${MODELS}`).integrations[0]?.mcpTools).toEqual(['close-issue']);
  });

  it('names only actions of its integration: a typo is an error at the item, with line and column', () => {
    const problem = only(`${ACTIONS}    mcp_tools: [create-issue, clsoe-issue]\n${MODELS}`);
    expect(problem).toMatchObject({
      severity: 'error',
      code: 'unknown_action',
      path: ['integrations', 'github', 'mcp_tools', 1],
      line: 12,
      column: 31,
    });
    expect(problem.message).toBe(
      "mcp_tools names 'clsoe-issue', which is not an action of this integration; did you mean 'close-issue'?",
    );
    const none = only(`integrations:\n  github:\n    mcp_tools: [anything]\n`);
    expect(none.message).toContain('it declares no actions');
  });

  it('refuses a value that is not a list of names, and warns about a name listed twice', () => {
    expect(codes(`${ACTIONS}    mcp_tools: {create-issue: true}\n${MODELS}`)).toEqual(['invalid_type']);
    const twice = compile(`${ACTIONS}    mcp_tools: [create-issue, create-issue]\n${MODELS}`);
    expect(twice.problems.map((p) => [p.severity, p.code])).toEqual([['warning', 'duplicate_key']]);
    expect(twice.config?.integrations[0]?.mcpTools).toEqual(['create-issue']);
  });
});

describe('warnings', () => {
  it('warns that track_deletes is ignored on an incremental sync, and still compiles', () => {
    const { config, problems } = compile(withSync(`${BASE_SYNC}\ntrack_deletes: true`));
    expect(problems.map((p) => [p.severity, p.code])).toEqual([['warning', 'ignored_field']]);
    expect(config).not.toBeNull();
  });
});

describe('YAML problems', () => {
  it('reports syntax errors and duplicate keys with positions', () => {
    const syntax = only('integrations:\n  a: [1, 2\n');
    expect(syntax.code).toBe('yaml_syntax');
    expect(syntax.line).toBeGreaterThan(0);
    const duplicate = only('integrations: {}\nmodels: {}\nmodels: {}\n');
    expect(duplicate).toMatchObject({ code: 'duplicate_key', line: 3, column: 1 });
  });

  it('finds duplicate keys in a flow mapping, and none between keys of different types', () => {
    expect(only('integrations: {}\nx: { a: 1, b: 2, a: 3 }\n')).toMatchObject({
      code: 'duplicate_key',
      line: 2,
      column: 18,
    });
    expect(codes('integrations: {}\nx: { 1: a, "1": b, .nan: c, .nan: d }\n')).not.toContain('duplicate_key');
  });

  it('refuses alias bombs at the alias that repeats too much, before expanding them', () => {
    const bomb = ['integrations: {}', 'a: &a [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 0; i < 8; i++) {
      const name = String.fromCharCode(98 + i);
      bomb.push(
        `${name}: &${name} [${Array(10)
          .fill(`*${String.fromCharCode(97 + i)}`)
          .join(', ')}]`,
      );
    }
    const problem = only(`${bomb.join('\n')}\n`);
    // b repeats 10 × 11 values, c 10 × 111 (1,220 in all); d's aliases of c repeat 1,111 each: the 8th crosses 10,000.
    expect(`${problem.line}:${problem.column} ${problem.code}`).toBe('5:36 yaml_syntax');
    expect(problem.message).toBe(
      'the alias *c repeats 1111 values, which brings the values aliases repeat beyond 10000 (an alias bomb?): write the values out',
    );
  });

  it('refuses a billion laughs of doubling lists (2^40 values) at the alias that crosses the bound', () => {
    const laughs = ['integrations: {}', 'l0: &l0 [lol, lol]'];
    for (let i = 1; i < 40; i++) laughs.push(`l${i}: &l${i} [*l${i - 1}, *l${i - 1}]`);
    const problem = only(`${laughs.join('\n')}\n`);
    expect(`${problem.line}:${problem.column} ${problem.code}`).toBe('13:12 yaml_syntax');
    expect(problem.message).toMatch(/^the alias \*l10 repeats 4095 values/);
  });

  it('refuses more than 1000 aliases at the first one beyond, and reads 1000', () => {
    const aliases = (count: number): string => {
      const lines = ['integrations: {}', 'models:', '  A: &a', '    id: string'];
      for (let i = 0; i < count; i++) lines.push(`  M${i}: *a`);
      return `${lines.join('\n')}\n`;
    };
    expect(compile(aliases(1000)).problems).toEqual([]);
    const problem = only(aliases(1001));
    expect(problem).toMatchObject({ code: 'yaml_syntax', line: 1005, column: 10 });
    expect(problem.message).toBe('more than 1000 aliases in one file: write the values out');
  });

  it('says where an alias names no anchor before it', () => {
    const problem = only('integrations: {}\nmodels:\n  A: *a\n  B: &a\n    id: string\n');
    expect(problem).toMatchObject({ code: 'yaml_syntax', line: 3, column: 6 });
    expect(problem.message).toBe('the alias *a names no anchor &a before it');
  });

  it.each([
    ['a field of the model it names', 'integrations: {}\nmodels:\n  A: &a\n    id: string\n    self: *a\n', '5:11'],
    ['a list inside it', 'integrations: {}\nmodels:\n  A: &a\n    id: string\n    list:\n      - x: *a\n', '6:12'],
    ['a merge key', 'integrations: {}\nmodels: &m\n  A:\n    <<: *m\n', '4:9'],
    ['the integrations', 'integrations: &i\n  gh:\n    x: *i\n', '3:8'],
  ])('refuses an alias inside the value its anchor names (%s): that value would contain itself', (_where, text, at) => {
    const problem = only(text);
    expect(`${problem.line}:${problem.column} ${problem.code}`).toBe(`${at} yaml_syntax`);
    expect(problem.message).toMatch(
      /^the alias \*([ami]) is inside the value its anchor &\1 names: that value would contain itself/,
    );
  });

  it('reads an alias of a value elsewhere (a repeated model, a field of that type)', () => {
    const { config, problems } = compile(
      'integrations: {}\nmodels:\n  A: &a\n    id: string\n  B: *a\n  C:\n    c: *a\n',
    );
    expect(problems).toEqual([]);
    expect(config?.models.map((model) => model.name)).toEqual(['A', 'B', 'C']);
  });
});

describe('a file with several mistakes', () => {
  it('reports every one, in document order, each with line and column', () => {
    const text = yaml(`
      integrations:
        github:
          syncs:
            issues:
              description: Issues
              output: Isue
              endpoint: get /issues
              sync_type: full
              runs: every 10 seconds
              auto_strat: true
          actions:
            create:
              output: Issue
              endpoint: POST /issues
      models:
        Issue:
          title: string
          labels: Label<string>
    `);
    const { config, problems } = compileConfig(text);
    expect(config).toBeNull();
    expect(problems.map((p) => `${p.line}:${p.column} ${p.code}`)).toEqual([
      '6:17 unknown_model',
      '7:19 invalid_endpoint',
      '9:15 runs_below_minimum',
      '10:9 unknown_key',
      '12:7 missing_field',
      '18:13 invalid_type_expression',
    ]);
    const printed = formatProblems('service.yaml', problems, text);
    expect(printed.split('\n')[0]).toBe(
      "service.yaml:6:17 error unknown_model output 'Isue' is not a model declared under `models`; did you mean 'Issue'? (at integrations.github.syncs.issues.output)",
    );
    expect(printed).toContain(`\n${' '.repeat(12)}output: Isue\n${' '.repeat(20)}^\n`);
  });

  it('still checks models when the sync using them is broken', () => {
    const text = withSync(
      'description: 1\noutput: Issue\nendpoint: GET /x\nsync_type: full',
      `models:\n  Issue:\n    title: string\n`,
    );
    expect(codes(text)).toEqual(['invalid_type', 'missing_id']);
  });
});
