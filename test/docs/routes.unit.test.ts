/**
 * docs/api.md's route table against the routes the API declares: a route the code serves and the
 * table leaves out is a route no reader finds.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BUILTIN_ENDPOINTS } from '../../src/config/generatedEndpoints.js';

const API_MD = readFileSync(fileURLToPath(new URL('../../docs/api.md', import.meta.url)), 'utf8');
const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'];

/** `METHOD /path` of every route named in the first column of the table under "## Routes". */
function documentedRoutes(markdown: string): Set<string> {
  const section = /^## Routes\n([\s\S]*?)(?=^## )/m.exec(markdown)?.[1] ?? '';
  const routes = new Set<string>();
  for (const line of section.split('\n')) {
    if (!line.startsWith('| `')) continue;
    const firstCell = line.split(/(?<!\\)\|/)[1] ?? '';
    for (const [, methods = '', path = ''] of firstCell.matchAll(/`([A-Z/]+) (\/[^`\s?]*)[^`]*`/g)) {
      for (const method of methods.split('/')) routes.add(`${method} ${normalize(path)}`);
    }
  }
  return routes;
}

/** `:name` and `*name` become `:` and `*`, so the table may name parameters as it likes. */
const normalize = (path: string): string => path.replace(/:[A-Za-z_]+/g, ':').replace(/\*[A-Za-z_]*/g, '*');

describe('docs/api.md', () => {
  it('lists every built-in route of the API in its route table (the dashboard has docs/dashboard.md)', () => {
    const documented = documentedRoutes(API_MD);
    expect(documented.size).toBeGreaterThan(25);
    const missing = BUILTIN_ENDPOINTS.filter((route) => !route.path.startsWith('/dashboard'))
      .flatMap((route) => (route.method === '*' ? METHODS : [route.method]).map((m) => `${m} ${normalize(route.path)}`))
      .filter((route) => !documented.has(route));
    expect(missing).toEqual([]);
  });
});
