/**
 * The built-in route list that generated endpoints are checked against (src/config/generatedEndpoints.ts,
 * whose own tests cover the checks) and the OpenAPI operations of generated endpoints (src/api/generated.ts).
 */
import { describe, expect, it } from 'vitest';
import { compileConfig } from '../../src/config/index.js';
import type { ServiceConfig } from '../../src/config/types.js';
import { generatedOperations } from '../../src/api/generated.js';
import { BUILTIN_ENDPOINTS } from '../../src/config/generatedEndpoints.js';
import { createApiRoutes } from '../../src/api/routes/index.js';
import type { ApiDeps } from '../../src/api/deps.js';

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

describe('the built-in routes and the OpenAPI of generated endpoints', () => {
  it('BUILTIN_ENDPOINTS lists exactly the declared routes (plus the OAuth, dashboard and hosted connect page routers)', () => {
    // Route factories only close over their dependencies; none is touched while declaring.
    const routes = createApiRoutes({} as ApiDeps);
    const declared = new Set(
      routes.map((route) => `${route.path.startsWith('/proxy') ? '*' : route.method.toUpperCase()} ${route.path}`),
    );
    const listed = new Set(
      BUILTIN_ENDPOINTS.filter(
        (e) => !e.path.startsWith('/oauth') && !e.path.startsWith('/dashboard') && e.path !== '/connect',
      ).map((e) => `${e.method} ${e.path}`),
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

  it("types an action's input and output as written (a list, a primitive, a union) and tags an endpoint with its group", () => {
    const compiled = compileConfig(
      [
        'integrations:',
        '  crm:',
        '    syncs:',
        '      contacts:',
        '        description: d',
        '        output: A',
        '        endpoint: { path: /contacts, group: Contacts }',
        '        sync_type: full',
        '    actions:',
        '      remove:',
        '        description: d',
        '        input: B[]',
        '        output: boolean',
        '        endpoint: /contacts/remove',
        '      find:',
        '        description: d',
        '        input: string',
        '        output: A | null',
        '        endpoint: { method: GET, path: /contacts/find, group: Contacts }',
        'models:',
        '  A:',
        '    id: string',
        '  B:',
        '    id: string',
      ].join('\n'),
    );
    if (!compiled.config) throw new Error(JSON.stringify(compiled.problems));
    const operations = new Map(generatedOperations(compiled.config).map((o) => [`${o.method} ${o.path}`, o.operation]));
    const schemaOf = (key: string) =>
      (operations.get(key)?.['responses'] as Record<string, { content: Record<string, { schema: unknown }> }>)['200']
        ?.content['application/json']?.schema;
    expect(operations.get('GET /contacts')?.['tags']).toEqual(['Contacts']);
    expect(operations.get('GET /contacts/find')?.['tags']).toEqual(['Contacts']);
    expect(operations.get('POST /contacts/remove')?.['tags']).toEqual(['generated']);
    expect(schemaOf('POST /contacts/remove')).toEqual({ type: 'boolean' });
    expect(operations.get('POST /contacts/remove')?.['requestBody']).toEqual({
      required: false,
      content: { 'application/json': { schema: { type: 'array', items: { $ref: '#/components/schemas/B' } } } },
    });
    expect(schemaOf('GET /contacts/find')).toEqual({ anyOf: [{ $ref: '#/components/schemas/A' }, { type: 'null' }] });
  });
});
