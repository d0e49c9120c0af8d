/** The rules of generated endpoints at deploy time (src/api/generated.ts), and the built-in route list they are checked against. */
import { describe, expect, it } from 'vitest';
import { compileConfig } from '../../src/config/index.js';
import type { ServiceConfig } from '../../src/config/types.js';
import { BUILTIN_ENDPOINTS, checkGeneratedEndpoints, generatedOperations } from '../../src/api/generated.js';
import { createApiRoutes } from '../../src/api/routes/index.js';
import type { ApiDeps } from '../../src/api/deps.js';
import { SERVICE_YAML } from './fixtures.js';

function config(
  integrations: Record<string, { syncs?: Record<string, [string, string]>; actions?: Record<string, string> }>,
): ServiceConfig {
  const lines = ['integrations:'];
  for (const [id, integration] of Object.entries(integrations)) {
    lines.push(`  ${id}:`);
    if (integration.syncs) {
      lines.push('    syncs:');
      for (const [name, [model, endpoint]] of Object.entries(integration.syncs)) {
        lines.push(
          `      ${name}:`,
          '        description: d',
          `        output: ${model}`,
          `        endpoint: ${endpoint}`,
          '        sync_type: full',
        );
      }
    }
    if (integration.actions) {
      lines.push('    actions:');
      for (const [name, endpoint] of Object.entries(integration.actions)) {
        lines.push(`      ${name}:`, '        description: d', '        output: A', `        endpoint: ${endpoint}`);
      }
    }
  }
  lines.push('models:', '  A:', '    id: string', '  B:', '    id: string');
  const compiled = compileConfig(lines.join('\n'));
  if (!compiled.config) throw new Error(JSON.stringify(compiled.problems));
  return compiled.config;
}

describe('checkGeneratedEndpoints', () => {
  it('accepts the test deployment, integrations sharing a path, and syncs of one model sharing one', () => {
    expect(checkGeneratedEndpoints(compileConfig(SERVICE_YAML).config!)).toEqual([]);
    expect(
      checkGeneratedEndpoints(
        config({
          github: {
            syncs: { issues: ['A', 'GET /issues'], more: ['A', 'GET /issues'] },
            actions: { get: 'GET /issues/{id}' },
          },
          gitlab: { syncs: { issues: ['B', 'GET /issues'] }, actions: { get: 'GET /issues/:number' } },
        }),
      ),
    ).toEqual([]);
  });

  it('refuses an endpoint a built-in route answers, with its place in service.yaml', () => {
    const problems = checkGeneratedEndpoints(
      config({
        github: {
          syncs: { a: ['A', 'GET /records'], b: ['A', 'GET /connections/{id}'], c: ['B', 'GET /{anything}'] },
          actions: {
            p: 'POST /proxy/anything',
            w: 'POST /webhook/x/y',
            ok: 'POST /connections/x/y',
            h: 'GET /health/',
          },
        },
      }),
    );
    expect(problems.map((problem) => [problem.code, problem.path.join('.')])).toEqual([
      ['generated_endpoint_shadows_builtin', 'integrations.github.syncs.a.endpoint'],
      ['generated_endpoint_shadows_builtin', 'integrations.github.syncs.b.endpoint'],
      ['generated_endpoint_shadows_builtin', 'integrations.github.syncs.c.endpoint'],
      ['generated_endpoint_shadows_builtin', 'integrations.github.actions.p.endpoint'],
      ['generated_endpoint_shadows_builtin', 'integrations.github.actions.w.endpoint'],
      ['generated_endpoint_shadows_builtin', 'integrations.github.actions.h.endpoint'],
    ]);
    expect(problems[0]?.message).toContain('built-in route GET /records');
    expect(problems[3]?.message).toContain('ALL /proxy/*path');
  });

  it('refuses a method and path shared within an integration by different things', () => {
    const problems = checkGeneratedEndpoints(
      config({
        github: {
          syncs: { issues: ['A', 'GET /issues'], others: ['B', 'GET /issues'] },
          actions: { list: 'GET /issues', one: 'GET /issues/{id}', two: 'GET /issues/:key', create: 'POST /issues' },
        },
      }),
    );
    expect(problems.map((problem) => `${problem.code} ${problem.path.join('.')}`)).toEqual([
      'generated_endpoint_conflict integrations.github.syncs.others.endpoint',
      'generated_endpoint_conflict integrations.github.actions.list.endpoint',
      'generated_endpoint_conflict integrations.github.actions.two.endpoint',
    ]);
    expect(problems[0]?.message).toMatch(/already declared by sync 'issues' \(model A\)/);
  });

  it('BUILTIN_ENDPOINTS lists exactly the declared routes (plus the OAuth and dashboard routers)', () => {
    // Route factories only close over their dependencies; none is touched while declaring.
    const routes = createApiRoutes({} as ApiDeps);
    const declared = new Set(
      routes.map((route) => `${route.path.startsWith('/proxy') ? '*' : route.method.toUpperCase()} ${route.path}`),
    );
    const listed = new Set(
      BUILTIN_ENDPOINTS.filter((e) => !e.path.startsWith('/oauth') && !e.path.startsWith('/dashboard')).map(
        (e) => `${e.method} ${e.path}`,
      ),
    );
    expect([...declared].sort()).toEqual([...listed].sort());
  });

  it('documents the generated endpoints in OpenAPI, one operation per method and path', () => {
    const operations = generatedOperations(
      config({
        github: { syncs: { issues: ['A', 'GET /issues'] } },
        gitlab: { syncs: { issues: ['B', 'GET /issues'] }, actions: { get: 'GET /issues/{id}' } },
      }),
    );
    expect(operations.map((operation) => `${operation.method} ${operation.path}`)).toEqual([
      'GET /issues',
      'GET /issues/{id}',
    ]);
    expect(String(operations[0]?.operation['description'])).toMatch(/github.*\n.*gitlab/);
  });
});
