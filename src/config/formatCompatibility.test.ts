/**
 * service.yaml reads what the de-facto format (nango.yaml) accepts, as its users wrote it: each
 * construct below was refused before issue 30. Every remaining difference is an error or a warning
 * with its code, message and line:column (docs/configuration.md, "The de-facto format").
 */
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { generateModels } from './generateModels.js';
import { formatProblems, type ConfigProblem } from './problems.js';
import { actionOutputType, type ServiceConfig } from './types.js';
import { compileConfig } from './validate.js';

function yaml(text: string): string {
  const lines = text.replace(/^\n/, '').split('\n');
  const indent = /^ */.exec(lines[0] ?? '')?.[0].length ?? 0;
  return lines.map((line) => line.slice(indent)).join('\n');
}

function valid(text: string): { config: ServiceConfig; warnings: ConfigProblem[] } {
  const result = compileConfig(yaml(text));
  const errors = result.problems.filter((p) => p.severity === 'error');
  expect(errors, formatProblems('service.yaml', errors)).toEqual([]);
  if (result.config === null) throw new Error('no config');
  return { config: result.config, warnings: result.problems };
}

function problems(text: string): ConfigProblem[] {
  return compileConfig(yaml(text)).problems;
}

/** Where a problem is, as the CLI prints it: `line:column severity code`. */
const where = (p: ConfigProblem): string => `${p.line}:${p.column} ${p.severity} ${p.code}`;

/**
 * Sync `s` of integration `t` (output R, GET /r, full), then `extra` (lines 9 on, at column 9), and the
 * model R.
 */
function oneSync(extra: string): string {
  const head = ['integrations:', '  t:', '    syncs:', '      s:', '        description: d', '        output: R'];
  const tail = ['models:', '  R:', '    id: string', ''];
  return [
    ...head,
    '        endpoint: GET /r',
    '        sync_type: full',
    ...extra.split('\n').map((l) => `        ${l}`),
    ...tail,
  ].join('\n');
}

const sync = (config: ServiceConfig, name: string) => {
  const found = config.integrations.flatMap((i) => i.syncs).find((s) => s.name === name);
  if (found === undefined) throw new Error(`no sync ${name}`);
  return found;
};
const action = (config: ServiceConfig, name: string) => {
  const found = config.integrations.flatMap((i) => i.actions).find((a) => a.name === name);
  if (found === undefined) throw new Error(`no action ${name}`);
  return found;
};

describe("runs: the format's phrases beside the ms notation", () => {
  it.each([
    ['every half hour', 1_800_000],
    ['every quarter hour', 900_000],
    ['every half day', 43_200_000],
    ['every month', 2_592_000_000],
    ['every week', 604_800_000],
    ['every day', 86_400_000],
    ['every hour', 3_600_000],
    ['every 1h', 3_600_000],
    ['every 6 hours', 21_600_000],
    ['every 5 minutes', 300_000],
    ['every 5min', 300_000],
    ['every 5mins', 300_000],
    ['every 1 day', 86_400_000],
    ['30m', 1_800_000],
  ])('reads %j as %d ms', (runs, millis) => {
    const { config } = valid(oneSync(`runs: ${runs}`));
    expect(sync(config, 's').runsMs).toBe(millis);
    expect(sync(config, 's').runs).toBe(runs);
  });

  it('still refuses a phrase that is no frequency, at the value, listing the forms', () => {
    const [problem] = problems(oneSync('runs: every blue moon'));
    expect(problem && where(problem)).toBe('9:15 error invalid_runs');
    expect(problem?.message).toContain('"every half hour"');
  });
});

describe('scopes: a string of comma-separated scopes, or a list', () => {
  it('splits the string form at commas and trims each scope', () => {
    const { config, warnings } = valid(`
      integrations:
        t:
          syncs:
            s:
              description: d
              output: R
              endpoint: GET /r
              sync_type: full
              scopes: crm.objects.read, oauth,,users.read
          actions:
            a:
              description: d
              output: R
              endpoint: POST /a
              scopes:
                - crm.objects.write
      models:
        R:
          id: string
    `);
    expect(warnings).toEqual([]);
    expect(sync(config, 's').scopes).toEqual(['crm.objects.read', 'oauth', 'users.read']);
    expect(action(config, 'a').scopes).toEqual(['crm.objects.write']);
  });
});

describe('__extends with several parents written as one string', () => {
  it('reads "A,B" and "A, B" as two parents, parents first, own fields winning', () => {
    const { config } = valid(`
      integrations: {}
      models:
        Id:
          id: string
        Times:
          created_at: date
          updated_at: date
        One:
          __extends: Id,Times
          name: string
        Two:
          __extends: Id, Times
          id: number
    `);
    const one = config.models.find((m) => m.name === 'One');
    expect(one?.extends).toEqual(['Id', 'Times']);
    expect(one?.fields.map((f) => f.name)).toEqual(['id', 'created_at', 'updated_at', 'name']);
    const two = config.models.find((m) => m.name === 'Two');
    expect(two?.fields.find((f) => f.name === 'id')?.type).toEqual({ kind: 'primitive', name: 'number' });
  });

  it('reports a parent of the list that is no model, at __extends, with a suggestion', () => {
    const [problem] = problems(`
      integrations: {}
      models:
        Id:
          id: string
        One:
          __extends: Id, Tims
          name: string
        Times:
          at: date
    `);
    expect(problem && where(problem)).toBe('6:16 error unknown_model');
    expect(problem?.message).toBe("__extends 'Tims' is not a model declared under `models`; did you mean 'Times'?");
  });

  it('works in an inline object too', () => {
    const { config } = valid(`
      integrations: {}
      models:
        Times:
          created_at: date
        Person:
          team:
            __extends: Times
            name: string
    `);
    const team = config.models.find((m) => m.name === 'Person')?.fields[0]?.type;
    expect(team).toMatchObject({ kind: 'object', fields: [{ name: 'created_at' }, { name: 'name' }] });
  });
});

describe('__extends in an inline object that holds itself', () => {
  it.each([
    [
      'the model holding it',
      'A:\n    id: string\n    x:\n      __extends: A\n      y: string',
      ['6:18 error circular_extends'],
    ],
    [
      'two models through each other',
      'A:\n    x:\n      __extends: B\n  B:\n    y:\n      __extends: A',
      ['8:18 error circular_extends'],
    ],
    [
      'the model whose other keys it types (__string)',
      'A:\n    id: string\n    __string:\n      __extends: A',
      ['6:18 error circular_extends'],
    ],
    [
      'the model whose other keys are lists of it',
      'A:\n    id: string\n    __string:\n      - __extends: A',
      ['6:20 error circular_extends'],
    ],
    [
      'a model that inherits the __string holding it',
      'A:\n    __extends: B\n    id: string\n  B:\n    __string:\n      __extends: A',
      ['8:18 error circular_extends'],
    ],
  ])('is circular_extends when it extends %s (its type would contain itself)', (_what, models, expected) => {
    const result = compileConfig(`integrations: {}\nmodels:\n  ${models}\n`);
    expect(result.problems.map(where)).toEqual(expected);
    expect(result.config).toBeNull();
  });
});

describe('input and output: model lists and other types where the format allows them', () => {
  const text = `
    integrations:
      t:
        syncs:
          s:
            description: d
            output: R
            endpoint: GET /r
            sync_type: full
            input: Settings | null
        actions:
          list:
            description: d
            input: Filter[]
            output: R[]
            endpoint: POST /list
          remove:
            description: d
            input: string
            output: boolean
            endpoint: DELETE /r
          ping:
            description: d
            output: void
            endpoint: POST /ping
          find:
            description: d
            input: R
            output: R | null
            endpoint: GET /find
          status:
            description: d
            output: "'ok' | 'failed'"
            endpoint: GET /status
    models:
      R:
        id: string
      Filter:
        q: string
      Settings:
        region: string
  `;

  it('keeps the text as written and the parsed type; a plain model name stays a model name', () => {
    const { config, warnings } = valid(text);
    expect(warnings).toEqual([]);
    expect(action(config, 'list')).toMatchObject({
      input: 'Filter[]',
      inputType: { kind: 'array', element: { kind: 'model', name: 'Filter' } },
      output: 'R[]',
      outputType: { kind: 'array', element: { kind: 'model', name: 'R' } },
    });
    expect(action(config, 'remove')).toMatchObject({
      input: 'string',
      inputType: { kind: 'primitive', name: 'string' },
      outputType: { kind: 'primitive', name: 'boolean' },
    });
    expect(action(config, 'find').inputType).toBeUndefined();
    expect(actionOutputType(action(config, 'find'))).toEqual({
      kind: 'union',
      members: [
        { kind: 'model', name: 'R' },
        { kind: 'primitive', name: 'null' },
      ],
    });
    expect(actionOutputType(action(config, 'status'))).toMatchObject({ kind: 'union' });
    expect(actionOutputType(action(config, 'ping'))).toEqual({ kind: 'primitive', name: 'undefined' });
    expect(sync(config, 's').inputType).toMatchObject({ kind: 'union' });
  });

  it('refuses a bare word that names no model (a literal is written quoted), with a suggestion', () => {
    const found = problems(`
      integrations:
        t:
          actions:
            a:
              description: d
              output: Recrd[]
              endpoint: POST /a
      models:
        Record1:
          id: string
        Recd:
          id: string
    `);
    expect(found.map(where)).toEqual(['6:17 error unknown_model']);
    expect(found[0]?.message).toBe("output 'Recrd' is not a model declared under `models`; did you mean 'Recd'?");
  });

  it("refuses a list as a sync's output: each record is one model", () => {
    const found = problems(`
      integrations:
        t:
          syncs:
            s:
              description: d
              output: R[]
              endpoint: GET /r
              sync_type: full
      models:
        R:
          id: string
    `);
    expect(found.map(where)).toEqual(['6:17 error unknown_model']);
    expect(found[0]?.message).toBe(
      "a sync's output is the model of one record, so 'R[]' is not one: write 'R' (each record is one R)",
    );
  });
});

describe('field types the format writes', () => {
  it('reads `field: []` as a list of anything, its aliases in any case, and a word with a note in parentheses', () => {
    const { config, warnings } = valid(`
      integrations: {}
      models:
        M:
          tags: []
          name: String
          count: Integer
          ratio: float
          code: varchar
          items: array
          when: Date
          blob: object
          view: speaker_view(CC) | gallery
    `);
    expect(warnings).toEqual([]);
    const text = generateModels(config);
    for (const line of [
      '  tags: any[];',
      '  name: string;',
      '  count: number;',
      '  ratio: number;',
      '  code: string;',
      '  items: any[];',
      '  when: Date;',
      '  blob: Record<string, any>;',
      '  view: "speaker_view(CC)" | "gallery";',
    ]) {
      expect(text).toContain(line);
    }
  });

  it('reads other keys starting with __ as fields, and refuses one a typo away from __extends or __string', () => {
    const { config } = valid(`
      integrations: {}
      models:
        M:
          id: string
          __raw: any
    `);
    expect(config.models[0]?.fields.map((f) => f.name)).toEqual(['id', '__raw']);
    const found = problems(`
      integrations: {}
      models:
        M:
          __extend: N
        N:
          x: string
    `);
    expect(found.map(where)).toEqual(['4:5 error unknown_key']);
    expect(found[0]?.message).toBe("unknown key '__extend'; did you mean '__extends'?");
  });

  it('keeps the later of two declarations of a field (`a` and `a?`), with a warning at the later one', () => {
    const { config, warnings } = valid(`
      integrations: {}
      models:
        M:
          options: string[]
          hidden: boolean
          options?: any[]
    `);
    expect(config.models[0]?.fields.map((f) => `${f.name}${f.optional ? '?' : ''}`)).toEqual(['hidden', 'options?']);
    expect(warnings.map(where)).toEqual(['6:5 warning redeclared_field']);
    expect(warnings[0]?.message).toBe(
      "field 'options' is declared twice ('options' and 'options?'): the later one, 'options?', is kept",
    );
  });

  it('generates models.ts that compiles for every construct above', () => {
    const { config } = valid(`
      integrations: {}
      models:
        Times:
          created_at: date
        Base:
          id: string
        M:
          __extends: Base, Times
          tags: []
          name: String
          blob: object
          team:
            __extends: Times
            name: string
          options: string[]
          options?: any[]
    `);
    const source = `${generateModels(config).replace(/^export (type )?\{[^}]*\} from [^;]*;$/gm, '')}
const m: M = { id: 'a', created_at: new Date(), tags: [1, 'x'], name: 'n', blob: { a: { b: 1 } }, team: { name: 't', created_at: new Date() } };
export const nested: unknown = m.blob['a'].b;
`;
    // The script compiler's strictness, on models.ts alone (its runtime re-exports taken out).
    const host = ts.createCompilerHost({});
    const program = ts.createProgram({
      rootNames: ['models.ts'],
      options: { strict: true, noEmit: true, lib: ['lib.es2022.d.ts'], types: [] },
      host: {
        ...host,
        getSourceFile: (name, version) =>
          name === 'models.ts' ? ts.createSourceFile(name, source, version) : host.getSourceFile(name, version),
        fileExists: (name) => name === 'models.ts' || host.fileExists(name),
        readFile: (name) => (name === 'models.ts' ? source : host.readFile(name)),
      },
    });
    expect(ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '))).toEqual(
      [],
    );
  });
});

describe('keys the service does not read', () => {
  it('are warnings at the key, never errors: version, track_deletes on an action, event scripts, any other key', () => {
    const { warnings } = valid(`
      integrations:
        t:
          on-events:
            post-connection-creation:
              - setup
          syncs:
            s:
              description: d
              output: R
              endpoint: GET /r
              sync_type: full
              version: 1.0.2
              nango_yaml_version: v2
          actions:
            a:
              description: d
              output: R
              endpoint: POST /a
              version: 3
              track_deletes: true
      models:
        R:
          id: string
    `);
    expect(warnings.map((p) => `${where(p)} ${p.message}`)).toEqual([
      "3:5 warning ignored_key 'on-events' in integration 't' is ignored: scripts run on connection events are not supported: they are neither built nor run (docs/configuration.md, \"Differences from the de-facto format\")",
      "12:9 warning ignored_key 'version' is ignored: every deploy is a version of its own here (service deploy --redeploy <n> goes back to one)",
      "13:9 warning ignored_key unknown key 'nango_yaml_version' in sync 's' is ignored (the keys read here: description, output, endpoint, sync_type, runs, input, scopes, auto_start, track_deletes, webhook_subscriptions, record_validation)",
      "19:9 warning ignored_key 'version' is ignored: every deploy is a version of its own here (service deploy --redeploy <n> goes back to one)",
      "20:9 warning ignored_key 'track_deletes' in action 'a' is ignored: it applies to syncs only",
    ]);
  });

  it('are still errors one typo away from a key the service reads (a misspelt key must not fall back to its default)', () => {
    const found = problems(oneSync('auto_strat: false'));
    expect(found.map(where)).toEqual(['9:9 error unknown_key']);
    expect(found[0]?.message).toBe("unknown key 'auto_strat' in sync 's'; did you mean 'auto_start'?");
  });

  it("refuse the format's first layout (scripts straight under the integration) instead of ignoring every script", () => {
    const found = problems(`
      integrations:
        t:
          contacts:
            type: sync
            runs: every hour
            returns:
              - Contact
      models:
        Contact:
          id: string
    `);
    expect(found.map(where)).toEqual(['3:5 error unknown_key']);
    expect(found[0]?.message).toBe(
      "'contacts' in integration 't' looks like a script of the de-facto format's first layout (scripts under the integration, 'returns:'); declare it under 'syncs:' or 'actions:' with 'output:' and an 'endpoint'",
    );
  });

  it("read 'webhook-subscriptions' as webhook_subscriptions with a warning; both at once is an error", () => {
    const base = oneSync('webhook-subscriptions: contact.created');
    const { config, warnings } = valid(base);
    expect(sync(config, 's').webhookSubscriptions).toEqual(['contact.created']);
    expect(warnings.map((p) => `${where(p)} ${p.message}`)).toEqual([
      "9:9 warning deprecated_key 'webhook-subscriptions' is read as 'webhook_subscriptions'; write 'webhook_subscriptions'",
    ]);
    const both = problems(
      base.replace(
        'webhook-subscriptions: contact.created',
        'webhook-subscriptions: a\n        webhook_subscriptions: b',
      ),
    );
    expect(both.map(where)).toEqual(['9:9 error conflicting_keys']);
  });
});

describe('endpoints: the mapping form and a bare path', () => {
  const text = `
    integrations:
      t:
        syncs:
          one:
            description: d
            output: R
            endpoint: /items
            sync_type: full
          two:
            description: d
            output: [R, S]
            endpoint:
              - path: /r2
                group: Records
              - method: GET
                path: /s2
            sync_type: full
        actions:
          create:
            description: d
            output: R
            endpoint: /records/create
          update:
            description: d
            output: R
            endpoint:
              method: PATCH
              path: /records/{id}
              group: Records
    models:
      R:
        id: string
      S:
        id: string
  `;

  it('reads a bare path as GET for a sync and POST for an action, and keeps the group', () => {
    const { config, warnings } = valid(text);
    expect(warnings).toEqual([]);
    expect(sync(config, 'one').outputs[0]?.endpoint).toEqual({ method: 'GET', path: '/items' });
    expect(sync(config, 'two').outputs.map((o) => o.endpoint)).toEqual([
      { method: 'GET', path: '/r2', group: 'Records' },
      { method: 'GET', path: '/s2' },
    ]);
    expect(action(config, 'create').endpoint).toEqual({ method: 'POST', path: '/records/create' });
    expect(action(config, 'update').endpoint).toEqual({ method: 'PATCH', path: '/records/{id}', group: 'Records' });
  });

  it('reports a bad path, an unknown method and a missing path of the mapping form at the value', () => {
    const found = problems(`
      integrations:
        t:
          actions:
            a:
              description: d
              output: R
              endpoint:
                method: FETCH
                path: /a
            b:
              description: d
              output: R
              endpoint:
                path: records
            c:
              description: d
              output: R
              endpoint:
                group: Records
      models:
        R:
          id: string
    `);
    expect(found.map((p) => `${where(p)} ${p.message}`)).toEqual([
      "8:19 error invalid_value method must be one of 'GET', 'POST', 'PUT', 'PATCH', 'DELETE', got the string \"FETCH\"",
      '14:17 error invalid_endpoint invalid endpoint path "records"; the path must start with \'/\'; expected a path such as "/issues"',
      "18:9 error missing_field missing required field 'path'",
    ]);
  });
});

describe('what SPEC.md still requires, with what to write', () => {
  it('a sync without sync_type or description, an action without description', () => {
    const found = problems(`
      integrations:
        t:
          syncs:
            s:
              output: R
              endpoint: GET /r
          actions:
            a:
              output: R
              endpoint: POST /a
      models:
        R:
          id: string
    `);
    expect(found.map((p) => `${where(p)} ${p.message}`)).toEqual([
      "4:7 error missing_field missing required field 'description': add 'description: <what the sync does>' (SPEC.md requires it; the de-facto format did not)",
      "4:7 error missing_field missing required field 'sync_type': add 'sync_type: full' (each run replaces all records: what the de-facto format assumed when it was left out) or 'sync_type: incremental' (each run upserts)",
      "8:7 error missing_field missing required field 'description': add 'description: <what the action does>' (SPEC.md requires it; the de-facto format did not)",
    ]);
  });

  it('an id that may be null or absent is a warning (batchSave refuses such a record), one that cannot be an id an error', () => {
    const found = problems(`
      integrations:
        t:
          syncs:
            s:
              description: d
              output: [A, B, C]
              endpoint: [GET /a, GET /b, GET /c]
              sync_type: full
      models:
        A:
          id: string | null
        B:
          id?: string
        C:
          id: boolean
    `);
    expect(found.map((p) => `${where(p)} ${p.message}`)).toEqual([
      "6:18 warning nullable_id field 'id' of model 'A' may be null: svc.batchSave refuses a record without a string or number id (invalid_record); make it required and a string or a number",
      "6:21 warning nullable_id field 'id' of model 'B' may be absent: svc.batchSave refuses a record without a string or number id (invalid_record); make it required and a string or a number",
      "6:24 error invalid_id field 'id' of model 'C' must be a string or a number (records are deduplicated by it)",
    ]);
  });
});

describe('YAML merge keys, as the loader of the format reads them (js-yaml)', () => {
  it('merges the fields of an aliased mapping into a model; its own fields win, wherever they stand', () => {
    const { config } = valid(`
      integrations: {}
      models:
        Base: &base
          id: string
          name: string
        Person:
          name: number
          <<: *base
          email: string
    `);
    const person = config.models.find((model) => model.name === 'Person');
    expect(person?.fields.map((field) => `${field.name}: ${JSON.stringify(field.type)}`)).toEqual([
      'name: {"kind":"primitive","name":"number"}',
      'id: {"kind":"primitive","name":"string"}',
      'email: {"kind":"primitive","name":"string"}',
    ]);
  });

  it('merges a list of mappings into a sync; a merge of something else is a yaml_syntax error', () => {
    const { config } = valid(`
      integrations:
        t:
          syncs:
            s:
              <<: [{ description: shared, sync_type: full }, { runs: every day }]
              output: R
              endpoint: GET /r
      models:
        R:
          id: string
    `);
    expect(sync(config, 's')).toMatchObject({ description: 'shared', syncType: 'full', runsMs: 86_400_000 });
    for (const merged of ['string', '[{ a: string }, b]', '*s', '[*s]']) {
      const [problem, ...more] = problems(`integrations: {}\nx: &s y\nmodels:\n  A:\n    <<: ${merged}\n`);
      expect(more).toEqual([]);
      expect(`${problem ? where(problem) : ''} ${problem?.message}`).toBe(
        '5:9 error yaml_syntax a merge key (<<) takes a mapping, an alias of one, or a list of them',
      );
    }
  });
});
