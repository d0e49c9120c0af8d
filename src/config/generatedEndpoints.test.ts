import { describe, expect, it } from 'vitest';
import { formatProblems } from './problems.js';
import { compileConfig } from './validate.js';

/** service.yaml with syncs `[name, model(s), endpoint(s)]` and actions `[name, endpoint]` of one integration. */
function file(syncs: [string, string | string[], string | string[]][], actions: [string, string][] = []): string {
  const lines = ['integrations:', '  github:'];
  if (syncs.length > 0) lines.push('    syncs:');
  for (const [name, model, endpoint] of syncs) {
    lines.push(
      `      ${name}:`,
      '        description: d',
      `        output: ${Array.isArray(model) ? `[${model.join(', ')}]` : model}`,
    );
    if (Array.isArray(endpoint)) lines.push('        endpoint:', ...endpoint.map((e) => `          - ${e}`));
    else lines.push(`        endpoint: ${endpoint}`);
    lines.push('        sync_type: full');
  }
  if (actions.length > 0) lines.push('    actions:');
  for (const [name, endpoint] of actions) {
    lines.push(`      ${name}:`, '        description: d', '        output: A', `        endpoint: ${endpoint}`);
  }
  lines.push('models:', '  A:', '    id: string', '  B:', '    id: string', '');
  return lines.join('\n');
}

/** `line:column code path` of every problem, as `service validate` places them. */
function placed(text: string): string[] {
  const { config, problems } = compileConfig(text);
  if (problems.length > 0) expect(config).toBeNull();
  return problems.map((p) => `${p.line}:${p.column} ${p.code} ${p.path.join('.')}`);
}

describe('generated endpoints in compileConfig', () => {
  it('accepts integrations sharing a path, and syncs of one model sharing one', () => {
    const github = file([
      ['issues', 'A', 'GET /issues'],
      ['more', 'A', 'GET /issues'],
    ]);
    expect(placed(github)).toEqual([]);
    expect(placed(file([['issues', 'A', 'GET /issues']], [['get', 'GET /issues/{id}']]))).toEqual([]);
  });

  it('reports an endpoint a built-in route answers, at its line and column', () => {
    const text = file(
      [
        ['a', 'A', 'GET /records'],
        ['b', 'A', 'GET /connections/{id}'],
        ['c', 'B', 'GET /{anything}'],
      ],
      [
        ['p', 'POST /proxy/anything'],
        ['w', 'POST /webhook/x/y'],
        ['ok', 'POST /connections/x/y'],
        ['h', 'GET /health/'],
      ],
    );
    expect(placed(text)).toEqual([
      '7:19 generated_endpoint_shadows_builtin integrations.github.syncs.a.endpoint',
      '12:19 generated_endpoint_shadows_builtin integrations.github.syncs.b.endpoint',
      '17:19 generated_endpoint_shadows_builtin integrations.github.syncs.c.endpoint',
      '23:19 generated_endpoint_shadows_builtin integrations.github.actions.p.endpoint',
      '27:19 generated_endpoint_shadows_builtin integrations.github.actions.w.endpoint',
      '35:19 generated_endpoint_shadows_builtin integrations.github.actions.h.endpoint',
    ]);
    const [first] = compileConfig(text).problems;
    expect(first?.message).toContain('built-in route GET /records');
    expect(formatProblems('service.yaml', compileConfig(text).problems)).toContain('ALL /proxy/*path');
  });

  it('reports a method and path shared within an integration by different things, each at its place', () => {
    const text = file(
      [
        ['issues', 'A', 'GET /issues'],
        ['others', ['A', 'B'], ['GET /labels', 'GET /issues']],
      ],
      [
        ['list', 'GET /issues'],
        ['one', 'GET /issues/{id}'],
        ['two', 'GET /issues/:key'],
        ['create', 'POST /issues'],
      ],
    );
    expect(placed(text)).toEqual([
      '14:13 generated_endpoint_conflict integrations.github.syncs.others.endpoint.1',
      '20:19 generated_endpoint_conflict integrations.github.actions.list.endpoint',
      '28:19 generated_endpoint_conflict integrations.github.actions.two.endpoint',
    ]);
    expect(compileConfig(text).problems[0]?.message).toMatch(/already declared by sync 'issues' \(model A\)/);
  });

  it('reports them beside the other problems of the file, in document order', () => {
    const text = file([['a', 'A', 'GET /records']], [['x', 'GET /y']]).replace(
      'sync_type: full\n',
      'sync_type: full\n        auto_strat: true\n',
    );
    expect(placed(text).map((line) => line.split(' ').slice(0, 2).join(' '))).toEqual([
      '7:19 generated_endpoint_shadows_builtin',
      '9:9 unknown_key',
    ]);
  });
});
