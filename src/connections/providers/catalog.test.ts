/**
 * Every entry of the built-in provider catalog, checked one by one: the schema of its auth mode,
 * https only (every URL, the docs link, a URL that starts with a connection setting only when that
 * setting's pattern requires https), public host names, no duplicate names or display names, every
 * `${connectionConfig.x}` declared with a pattern, and auth fields consistent with the auth mode. The
 * same checks run on bad samples, to show that each one fails when it should.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isMap, isScalar, parseDocument } from 'yaml';
import { paginationSettings } from '../../runtime/paginate.js';
import type { Pagination } from '../../runtime/public.js';
import { BUILTIN_PROVIDERS_FILE, loadProviderCatalog, providerSchema, type Provider } from './catalog.js';

const URL_FIELDS = ['base_url', 'authorization_url', 'token_url', 'request_token_url', 'access_token_url'] as const;
const PLACEHOLDER = /\$\{connectionConfig\.([A-Za-z_][A-Za-z0-9_]*)\}/g;
/** A public DNS name: no IP address, no localhost, no single label. */
const PUBLIC_HOST = /^(?!localhost$)(?![0-9.]+$)[a-z0-9-]+(\.[a-z0-9-]+)+$/i;

/** Every problem of a catalog file's text, each naming the entry. */
function catalogProblems(text: string): string[] {
  const problems: string[] = [];
  const document = parseDocument(text, { uniqueKeys: false });
  if (document.errors.length > 0) return document.errors.map((error) => error.message);
  if (!isMap(document.contents)) return ['the catalog is not a map of providers'];
  const names = document.contents.items.map((item) => (isScalar(item.key) ? String(item.key.value) : '?'));
  for (const name of new Set(names.filter((name, index) => names.indexOf(name) !== index))) {
    problems.push(`${name}: defined more than once`);
  }
  const raw = document.toJS() as Record<string, unknown>;
  const displayNames = new Map<string, string>();
  for (const [name, entry] of Object.entries(raw)) {
    const parsed = providerSchema.safeParse(entry);
    if (!parsed.success) {
      problems.push(`${name}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
      continue;
    }
    const provider = parsed.data;
    const other = displayNames.get(provider.display_name.toLowerCase());
    if (other !== undefined) problems.push(`${name}: display name '${provider.display_name}' also used by ${other}`);
    displayNames.set(provider.display_name.toLowerCase(), name);
    problems.push(...entryProblems(name, provider));
  }
  return problems;
}

function entryProblems(name: string, provider: Provider): string[] {
  const problems: string[] = [];
  if (provider.docs === undefined) problems.push(`${name}: no docs link`);
  else if (!provider.docs.startsWith('https://')) problems.push(`${name}: docs link is not https`);
  const record = provider as unknown as Record<string, unknown>;
  for (const field of URL_FIELDS) {
    const value = record[field];
    if (typeof value !== 'string') continue;
    const leading = /^\$\{connectionConfig\.([A-Za-z_][A-Za-z0-9_]*)\}/.exec(value);
    if (leading) {
      // The whole origin comes from a setting: only when the setting's pattern forces https.
      const pattern = provider.connection_config[leading[1]!]?.pattern ?? '';
      if (!pattern.startsWith('^https://')) problems.push(`${name}: ${field} starts with a setting not bound to https`);
    } else if (!value.startsWith('https://')) {
      problems.push(`${name}: ${field} is not https (${value})`);
    } else {
      const host = new URL(value.replace(PLACEHOLDER, 'x')).hostname;
      if (!PUBLIC_HOST.test(host)) problems.push(`${name}: ${field} host ${host} is not a public name`);
    }
    for (const match of value.matchAll(PLACEHOLDER)) {
      const setting = provider.connection_config[match[1]!];
      if (!setting) problems.push(`${name}: ${field} uses undeclared setting ${match[1]}`);
      else if (setting.pattern === undefined) problems.push(`${name}: setting ${match[1]} has no pattern`);
    }
  }
  switch (provider.auth_mode) {
    case 'OAUTH2':
      if (provider.authorization_url === provider.token_url) problems.push(`${name}: one URL for authorize and token`);
      for (const scope of provider.default_scopes) {
        if (scope.includes(provider.scope_separator)) problems.push(`${name}: scope '${scope}' holds the separator`);
      }
      break;
    case 'OAUTH2_CC':
    case 'JWT':
      for (const scope of provider.default_scopes) {
        if (scope.includes(provider.scope_separator)) problems.push(`${name}: scope '${scope}' holds the separator`);
      }
      break;
    case 'APP':
      // The token URL names the installation: without a setting, every connection would share one.
      if (!PLACEHOLDER.test(provider.token_url)) problems.push(`${name}: APP token_url names no installation`);
      PLACEHOLDER.lastIndex = 0;
      break;
    case 'API_KEY':
      if (provider.api_key.in === 'header' && /^(authorization)$/i.test(provider.api_key.name)) {
        if (provider.api_key.format.trim() === '') problems.push(`${name}: empty Authorization format`);
      }
      break;
    case 'OAUTH1':
    case 'BASIC':
      break;
  }
  if (provider.base_url === undefined) problems.push(`${name}: no base_url`);
  return problems;
}

describe('the built-in provider catalog', () => {
  const text = readFileSync(BUILTIN_PROVIDERS_FILE, 'utf8');

  it('holds at least 100 providers, every one passing every check', () => {
    expect(catalogProblems(text)).toEqual([]);
    const catalog = loadProviderCatalog({ extraFile: undefined });
    expect(catalog.names().length).toBeGreaterThanOrEqual(100);
    const modes = new Set(catalog.names().map((name) => catalog.get(name).auth_mode));
    expect([...modes].sort()).toEqual(['API_KEY', 'APP', 'BASIC', 'JWT', 'OAUTH1', 'OAUTH2', 'OAUTH2_CC']);
  });

  it("gives svc.paginate a default it can follow wherever it names one (a script's paginate without a type)", () => {
    const catalog = loadProviderCatalog({ extraFile: undefined });
    // The connection service hands it over without its undefined keys (connectionService.ts).
    const defaults = (name: string): Pagination | undefined => catalog.get(name).paginate as Pagination | undefined;
    const paged = catalog.names().filter((name) => catalog.get(name).paginate !== undefined);
    expect(paged.length).toBeGreaterThanOrEqual(15);
    for (const name of paged) {
      expect(() => paginationSettings({ limit: 10 }, defaults(name), name), name).not.toThrow();
    }
    expect(paginationSettings(undefined, defaults('hubspot'))).toMatchObject({
      type: 'cursor',
      cursor_name_in_request: 'after',
      cursor_path_in_response: 'paging.next.after',
      response_path: 'results',
    });
  });

  it('has the auth types of well-known entries right', () => {
    const catalog = loadProviderCatalog({ extraFile: undefined });
    expect(catalog.get('google-service-account')).toMatchObject({
      auth_mode: 'JWT',
      token_url: 'https://oauth2.googleapis.com/token',
    });
    expect(catalog.get('github-app')).toMatchObject({
      auth_mode: 'APP',
      token_url: 'https://api.github.com/app/installations/${connectionConfig.installation_id}/access_tokens',
    });
    expect(catalog.get('paypal')).toMatchObject({
      auth_mode: 'OAUTH2_CC',
      token_request_auth_method: 'client_secret_basic',
    });
    expect(catalog.get('anthropic')).toMatchObject({ api_key: { in: 'header', name: 'x-api-key' } });
    expect(catalog.get('mapbox')).toMatchObject({ api_key: { in: 'query', name: 'access_token' } });
    expect(catalog.get('mailgun').auth_mode).toBe('BASIC');
  });

  it('catches each kind of bad entry', () => {
    const good = `ok:\n  display_name: OK\n  docs: https://example.com/docs\n  auth_mode: BASIC\n  base_url: https://api.example.com\n`;
    expect(catalogProblems(good)).toEqual([]);
    const bad: [string, RegExp][] = [
      [
        `${good}ok:\n  display_name: Again\n  auth_mode: BASIC\n  base_url: https://b.example.com\n`,
        /ok: defined more than once/,
      ],
      [
        `${good}two:\n  display_name: ok\n  docs: https://e.com/d\n  auth_mode: BASIC\n  base_url: https://b.example.com\n`,
        /display name 'ok' also used by ok/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: BASIC\n  base_url: http://api.example.com\n`,
        /base_url is not https/,
      ],
      [
        `x:\n  display_name: X\n  docs: http://e.com/d\n  auth_mode: BASIC\n  base_url: https://api.example.com\n`,
        /docs link is not https/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: BASIC\n  base_url: https://127.0.0.1/api\n`,
        /not a public name/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: BASIC\n  base_url: https://\${connectionConfig.sub}.e.com\n`,
        /undeclared setting sub/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: BASIC\n  base_url: \${connectionConfig.host}\n  connection_config:\n    host: { pattern: '.*' }\n`,
        /not bound to https/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: API_KEY\n  base_url: https://a.e.com\n`,
        /api_key/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: BASIC\n  api_key: { in: query, name: k }\n  base_url: https://a.e.com\n`,
        /Unrecognized key/,
      ],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: APP\n  token_url: https://a.e.com/token\n  base_url: https://a.e.com\n`,
        /names no installation/,
      ],
      [`x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: JWT\n  base_url: https://a.e.com\n`, /token_url/],
      [
        `x:\n  display_name: X\n  docs: https://e.com/d\n  auth_mode: OAUTH2\n  authorization_url: https://a.e.com/a\n  token_url: https://a.e.com/t\n  default_scopes: ['a b']\n  base_url: https://a.e.com\n`,
        /holds the separator/,
      ],
    ];
    for (const [sample, expected] of bad) expect(catalogProblems(sample).join('\n'), sample).toMatch(expected);
  });
});

describe('loading the provider catalog', () => {
  it('ships at least twenty providers, the required ones among them, each valid', () => {
    const catalog = loadProviderCatalog({ extraFile: undefined });
    const required = [
      'github',
      'gitlab',
      'slack',
      'google',
      'microsoft',
      'hubspot',
      'salesforce',
      'notion',
      'linear',
      'jira',
      'asana',
      'airtable',
      'intercom',
      'zendesk',
      'shopify',
      'stripe',
      'dropbox',
      'box',
      'trello',
      'twitter',
    ];
    for (const name of required) expect(catalog.has(name), name).toBe(true);
    expect(catalog.names().length).toBeGreaterThanOrEqual(20);
    expect(catalog.get('stripe')).toMatchObject({ auth_mode: 'API_KEY', base_url: 'https://api.stripe.com' });
    expect(catalog.get('trello').auth_mode).toBe('OAUTH1');
    expect(catalog.get('airtable')).toMatchObject({ pkce: true, token_request_auth_method: 'client_secret_basic' });
    // Every placeholder of every built-in URL names a declared connection setting.
    for (const name of catalog.names()) {
      const provider = catalog.get(name);
      for (const value of Object.values(provider)) {
        if (typeof value !== 'string') continue;
        for (const match of value.matchAll(/\$\{connectionConfig\.(\w+)\}/g)) {
          expect(provider.connection_config[match[1]!], `${name}: ${match[1]}`).toBeDefined();
        }
      }
    }
  });

  it('loads user providers from a file and says what is wrong with a bad one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'providers-'));
    const good = join(dir, 'good.yaml');
    writeFileSync(
      good,
      'internal-crm:\n  display_name: Internal CRM\n  auth_mode: API_KEY\n  api_key: { in: header, name: X-Api-Key, format: "${apiKey}" }\n  base_url: https://crm.internal.example\n',
    );
    expect(loadProviderCatalog({ extraFile: good }).get('internal-crm').base_url).toBe('https://crm.internal.example');
    const bad = join(dir, 'bad.yaml');
    writeFileSync(bad, 'broken:\n  display_name: Broken\n  auth_mode: OAUTH2\n  token_url: not a url\n');
    expect(() => loadProviderCatalog({ extraFile: bad })).toThrow(/bad\.yaml: broken\.(authorization_url|token_url)/);
    expect(() => loadProviderCatalog({ extraFile: join(dir, 'missing.yaml') })).toThrow(/cannot read providers file/);
  });
});
